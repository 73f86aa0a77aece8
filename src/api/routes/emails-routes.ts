import { z } from 'zod';
import type { EmailService, SendContext } from '../../core/emails/email-service.js';
import { batchBodySchema, sendBodySchema } from '../../core/emails/send-schema.js';
import { badRequest } from '../../core/errors.js';
import type { AuthContext } from '../../core/api-keys/api-key-service.js';
import { parsePage } from '../pagination.js';
import type { RouteDef, RouteRequest } from '../route-types.js';
import { parseInput, singleQuery, type Query } from '../validation.js';

const rescheduleBody = z.object({ scheduledAt: z.string().min(1) });

function sendContext(auth: AuthContext): SendContext {
  return { teamId: auth.teamId, domainId: auth.domainId, apiKeyId: auth.keyId };
}

function emailId(req: RouteRequest): string {
  const id = req.params.emailId ?? '';
  if (id.length < 3 || id.length > 100) throw badRequest('emailId: must be 3 to 100 characters');
  return id;
}

function list(v: string | string[] | undefined): string[] {
  return v === undefined ? [] : Array.isArray(v) ? v : [v];
}

function dateParam(query: Query, name: string): string | undefined {
  const v = singleQuery(query, name);
  if (v === undefined) return undefined;
  const ms = Date.parse(v);
  if (Number.isNaN(ms)) throw badRequest(`${name}: must be an ISO 8601 date-time`);
  return new Date(ms).toISOString();
}

export function emailsRoutes(emails: EmailService): RouteDef[] {
  return [
    {
      method: 'POST',
      path: '/emails',
      access: 'sending',
      summary: 'Send an email (optionally scheduled, templated, idempotent).',
      handler: async (req) => {
        const input = parseInput(sendBodySchema, req.body ?? {});
        return emails.submit(sendContext(req.auth), input, { idempotencyKey: req.header('idempotency-key'), rawBody: req.body });
      },
    },
    {
      method: 'POST',
      path: '/emails/batch',
      access: 'sending',
      summary: 'Send 1 to 100 emails in one request (counts as one request for the rate limit).',
      handler: async (req) => {
        const input = parseInput(batchBodySchema, req.body ?? null, 'body');
        return emails.submitBatch(sendContext(req.auth), input, { idempotencyKey: req.header('idempotency-key'), rawBody: req.body });
      },
    },
    {
      method: 'GET',
      path: '/emails',
      access: 'sending',
      summary: 'List emails, newest first.',
      handler: async (req) => {
        const page = parsePage(req.query, { defaultLimit: 50, maxLimit: 100 });
        const domainIds = list(req.query.domainId).map((v) => {
          if (!/^\d{1,10}$/.test(v) || Number(v) < 1 || Number(v) > 2147483647) throw badRequest('domainId: must be an integer between 1 and 2147483647');
          return Number(v);
        });
        const tags = list(req.query.tag);
        if (tags.some((t) => t.length < 1 || t.length > 64)) throw badRequest('tag: each tag is 1 to 64 characters');
        return emails.list(sendContext(req.auth), {
          offset: page.offset,
          limit: page.limit,
          startDate: dateParam(req.query, 'startDate'),
          endDate: dateParam(req.query, 'endDate'),
          domainIds,
          tags,
        });
      },
    },
    {
      method: 'GET',
      path: '/emails/:emailId',
      access: 'sending',
      summary: 'Get an email with its status events, oldest first.',
      handler: async (req) => emails.get(sendContext(req.auth), emailId(req)),
    },
    {
      method: 'PATCH',
      path: '/emails/:emailId',
      access: 'sending',
      summary: 'Reschedule a scheduled email.',
      handler: async (req) => {
        const id = emailId(req);
        const body = parseInput(rescheduleBody, req.body ?? {});
        return emails.reschedule(sendContext(req.auth), id, body.scheduledAt);
      },
    },
    {
      method: 'POST',
      path: '/emails/:emailId/cancel',
      access: 'sending',
      summary: 'Cancel a scheduled email.',
      handler: async (req) => emails.cancel(sendContext(req.auth), emailId(req)),
    },
  ];
}
