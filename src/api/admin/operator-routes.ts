import { AppError, notFound } from '../../core/errors.js';
import type { AuditService, OperatorActor } from '../../core/operators/audit-service.js';
import type { AdminHealth } from '../../core/operators/admin-health.js';
import { MAX_QUEUE_PAGE, QUEUE_STATES, type QueueService } from '../../core/queue/queue-service.js';
import type { TeamService } from '../../core/teams/team-service.js';
import type { DomainService } from '../../core/domains/domain-service.js';
import type { ShapingOperator } from '../../core/shaping/shaping-view.js';
import type { Port25State } from '../../core/operators/port25-watch.js';
import { enumQuery, intIdPath, intIdQuery, limitQuery, stringPath, textQuery } from '../params.js';
import { defineRoute, type RouteDef, type RouteRequest } from '../route-types.js';
import {
  adminHealthSchema,
  auditSchema,
  bounceBody,
  createdSuspensionSchema,
  domainPatchBody,
  domainPoolSchema,
  shapingHoldSchema,
  queueMessagesSchema,
  queueSummarySchema,
  retryBody,
  suspendBody,
  suspensionSchema,
  teamCreateBody,
  teamPatchBody,
  teamSchema,
  traceSchema,
} from './operator-schemas.js';
import { z } from 'zod';

// The operator API under /admin/v1 (docs/operations.md): operator keys only, every change
// written to the audit log by the service that makes it, in the change's own transaction.

export interface OperatorRouteDeps {
  queue: QueueService;
  teams: TeamService;
  domains: Pick<DomainService, 'setPool'>;
  shaping: Pick<ShapingOperator, 'endHold'>;
  audit: AuditService;
  health: AdminHealth;
  /** This node's outbound port watch: its memory, so the queue summary of the node that answers. */
  outboundPort25: () => Port25State;
}

function actor(req: RouteRequest): OperatorActor {
  // The operator middleware set it; a route reached otherwise is a wiring mistake.
  if (!req.operator) throw new AppError('UNAUTHORIZED', 'missing operator key');
  return req.operator;
}

const cursor = textQuery('The nextCursor of the previous page.', 200);

export function operatorRoutes(deps: OperatorRouteDeps): RouteDef[] {
  const { queue, teams, audit } = deps;
  return [
    defineRoute({
      method: 'GET',
      path: '/queue',
      access: 'operator',
      tag: 'Queue',
      summary: 'Queue totals by state, and one row per destination domain with queued mail.',
      response: queueSummarySchema,
      // The port watch is the serving process's memory: added here, not in the service the CLI
      // also reads in a process of its own, where it would always say ok.
      handler: async () => ({ ...(await queue.summary()), outboundPort25: deps.outboundPort25() }),
    }),
    defineRoute({
      method: 'GET',
      path: '/queue/messages',
      access: 'operator',
      tag: 'Queue',
      summary: 'The queued deliveries behind the summary, filtered, oldest first.',
      request: {
        query: {
          destination: textQuery('Only deliveries to this recipient domain.', 253, { filter: true }),
          teamId: intIdQuery('Only this team.'),
          campaignId: textQuery('Only this campaign.', 100, { filter: true }),
          state: enumQuery(QUEUE_STATES, 'Only deliveries in this state.'),
          limit: limitQuery(50, MAX_QUEUE_PAGE),
          cursor,
        },
      },
      response: queueMessagesSchema,
      handler: async ({ input: { query } }) =>
        queue.messages({ destination: query.destination, teamId: query.teamId, campaignId: query.campaignId, state: query.state }, query.limit, query.cursor),
    }),
    defineRoute({
      method: 'GET',
      path: '/queue/suspensions',
      access: 'operator',
      tag: 'Queue',
      summary: 'Active suspensions.',
      response: z.strictObject({ suspensions: z.array(suspensionSchema) }),
      handler: async () => ({ suspensions: await queue.listSuspensions() }),
    }),
    defineRoute({
      method: 'POST',
      path: '/queue/suspensions',
      access: 'operator',
      tag: 'Queue',
      summary: 'Hold matching mail without attempting it (no attempt counted, no DELIVERY_DELAYED) for some minutes.',
      request: { body: suspendBody },
      response: createdSuspensionSchema,
      handler: async (req) => queue.suspend(actor(req), req.input.body),
    }),
    defineRoute({
      method: 'DELETE',
      path: '/queue/suspensions/:suspensionId',
      access: 'operator',
      tag: 'Queue',
      summary: 'End a suspension now: the mail it held is due at once.',
      request: { params: { suspensionId: stringPath('Suspension id.', { max: 100 }) } },
      response: suspensionSchema,
      errors: [404],
      handler: async (req) => queue.resume(actor(req), req.input.params.suspensionId),
    }),
    defineRoute({
      method: 'DELETE',
      path: '/queue/shaping-holds/:holdId',
      access: 'operator',
      tag: 'Queue',
      summary: 'Lift a traffic-shaping hold (a suspension or throttle a remote reply put on a source and rollup) now: the mail it held is due at once.',
      request: { params: { holdId: stringPath('Hold id.', { max: 100 }) } },
      response: shapingHoldSchema,
      errors: [404],
      handler: async (req) => deps.shaping.endHold(actor(req), req.input.params.holdId),
    }),
    defineRoute({
      method: 'POST',
      path: '/queue/retry',
      access: 'operator',
      tag: 'Queue',
      summary: 'Make matching queued mail due now (mail on the wire and held mail are left as they are).',
      request: { body: retryBody },
      response: z.strictObject({
        retried: z.int().min(0),
        held: z.int().min(0).meta({ description: 'How many of those a suspension still holds: they are attempted when it ends or is resumed.' }),
      }),
      handler: async (req) => queue.retry(actor(req), req.input.body),
    }),
    defineRoute({
      method: 'POST',
      path: '/queue/bounce',
      access: 'operator',
      tag: 'Queue',
      summary: 'Fail matching queued mail with a reason: FAILED events and webhooks like any failure. Never mail on the wire.',
      request: { body: bounceBody },
      response: z.strictObject({ bounced: z.int().min(0) }),
      handler: async (req) => queue.bounce(actor(req), req.input.body),
    }),
    defineRoute({
      method: 'GET',
      path: '/emails/:emailId/trace',
      access: 'operator',
      tag: 'Queue',
      summary: 'Each delivery attempt of an email: MX, addresses, TLS and the SMTP transcript (bodies and AUTH secrets are never recorded).',
      request: { params: { emailId: stringPath('Email id.', { max: 100 }) } },
      response: traceSchema,
      errors: [404],
      handler: async ({ input }) => queue.trace(input.params.emailId),
    }),
    defineRoute({
      method: 'GET',
      path: '/teams',
      access: 'operator',
      tag: 'Teams',
      summary: 'Every team.',
      response: z.strictObject({ teams: z.array(teamSchema) }),
      handler: async () => ({ teams: await teams.list() }),
    }),
    defineRoute({
      method: 'POST',
      path: '/teams',
      access: 'operator',
      tag: 'Teams',
      summary: 'Create a team (its starter templates are seeded).',
      request: { body: teamCreateBody },
      response: teamSchema,
      handler: async (req) => {
        const id = await teams.create(req.input.body.name, req.input.body.rateLimit ?? null, actor(req));
        return (await teams.get(id))!;
      },
    }),
    defineRoute({
      method: 'PATCH',
      path: '/teams/:teamId',
      access: 'operator',
      tag: 'Teams',
      summary: 'Rename a team, set its rate limit (null: the configured default) or its egress pool (null: the default pool).',
      request: { params: { teamId: intIdPath('Team id.') }, body: teamPatchBody },
      response: teamSchema,
      errors: [404],
      handler: async (req) => {
        const team = await teams.update(req.input.params.teamId, req.input.body, actor(req));
        if (!team) throw notFound(`team ${req.input.params.teamId} not found`);
        return team;
      },
    }),
    defineRoute({
      method: 'PATCH',
      path: '/domains/:domainId',
      access: 'operator',
      tag: 'Teams',
      summary: "Set a domain's egress pool (null: its team's); a domain's pool beats its team's.",
      request: { params: { domainId: intIdPath('Domain id.') }, body: domainPatchBody },
      response: domainPoolSchema,
      errors: [404],
      handler: async (req) => {
        const domain = await deps.domains.setPool(req.input.params.domainId, req.input.body.pool, actor(req));
        if (!domain) throw notFound(`domain ${req.input.params.domainId} not found`);
        return domain;
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/audit',
      access: 'operator',
      tag: 'Audit',
      summary: 'Operator actions, newest first.',
      request: { query: { limit: limitQuery(50, 200), cursor } },
      response: auditSchema,
      handler: async ({ input: { query } }) => audit.list(query.limit, query.cursor),
    }),
    defineRoute({
      method: 'GET',
      path: '/health',
      access: 'operator',
      tag: 'Health',
      summary: 'Health for operators: queue age, listeners, free disk and the last outcome of each background job; 503 with the same body when degraded.',
      response: adminHealthSchema,
      degraded: 'Degraded: the store cannot be read, the process is shutting down or a listener failed. The same body, with status "degraded".',
      // Degraded answers 503 with the same body, as /health does, so a probe sees it by status.
      handler: async (req) => {
        const health = await deps.health();
        req.koa.body = health;
        req.koa.status = health.status === 'ok' ? 200 : 503;
        return health;
      },
    }),
  ];
}
