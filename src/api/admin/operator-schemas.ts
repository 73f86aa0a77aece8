import { z } from 'zod';
import { QUEUE_STATES } from '../../core/queue/queue-service.js';
import { count, intId, timestamp } from '../schemas/common-schemas.js';

// Request and response bodies of the operator API (/admin/v1).

const reply = z
  .strictObject({ code: z.int().nullable(), text: z.string(), mxHost: z.string().nullable() })
  .meta({ id: 'RemoteReply', description: 'The last reply a remote server gave.' });

export const suspensionSchema = z
  .strictObject({
    id: z.string(),
    destination: z.string().nullable(),
    teamId: intId.nullable(),
    campaignId: z.string().nullable(),
    reason: z.string(),
    until: timestamp,
    createdBy: z.string(),
    createdAt: timestamp,
  })
  .meta({ id: 'Suspension', description: 'Mail matching every field that is set is held (not attempted) until `until`.' });

export const shapingHoldSchema = z
  .strictObject({
    id: z.string(),
    source: z.string(),
    rollup: z.string().meta({ description: 'A recipient domain, or an MX suffix (every domain whose MX is under it).' }),
    kind: z.enum(['suspend', 'throttle']),
    messageRate: z.string().nullable().meta({ description: 'With a throttle: the rate until `until`.' }),
    reason: z.string(),
    until: timestamp,
    createdAt: timestamp,
  })
  .meta({ id: 'ShapingHold', description: 'A (source, rollup) suspended or throttled because of a remote reply.' });

const shapingStateSchema = z
  .strictObject({
    sources: z.array(
      z.strictObject({
        name: z.string(),
        localAddress: z.string().nullable(),
        ehloName: z.string(),
        pools: z.array(z.string()),
        warmup: z
          .strictObject({
            start: z.string(),
            day: z.int().meta({ description: 'Day of the schedule (1 on the start date).' }),
            budget: count.nullable().meta({ description: "Messages a day to each rollup; null: the schedule is over, no cap." }),
            rollups: z.array(z.strictObject({ rollup: z.string(), used: count, left: count.nullable() })),
          })
          .nullable(),
      }),
    ),
    pools: z.array(z.strictObject({ name: z.string(), sources: z.array(z.strictObject({ name: z.string(), weight: z.int() })) })),
    holds: z.array(shapingHoldSchema),
    rates: z.array(
      z.strictObject({
        source: z.string().nullable().meta({ description: 'null: every source.' }),
        rollup: z.string(),
        messageRate: z.string(),
        until: timestamp.nullable().meta({ description: 'A throttle: when it ends; null: a configured rate.' }),
        reason: z.string().nullable(),
      }),
    ),
  })
  .meta({ id: 'ShapingState', description: 'Egress sources and pools, holds from remote replies, message rates in force and warm-up progress.' });

export const queueSummarySchema = z
  .strictObject({
    totals: z.strictObject({ ready: count, scheduled: count, deferred: count, inFlight: count, suspended: count }),
    destinations: z.array(
      z.strictObject({
        destination: z.string(),
        queued: count,
        inFlight: count,
        deferred: count,
        suspended: count,
        oldestDue: timestamp.nullable(),
        lastReply: reply.nullable(),
        openConnections: count,
        suspension: z.strictObject({ id: z.string(), until: timestamp, reason: z.string() }).nullable(),
      }),
    ),
    suspensions: z.array(suspensionSchema),
    shaping: shapingStateSchema,
    outboundPort25: z
      .strictObject({
        state: z.enum(['ok', 'suspected-blocked']).meta({ description: "suspected-blocked: this node's connections to MX hosts of several domains all failed to connect, none succeeded in 15 minutes." }),
        since: timestamp.nullable().meta({ description: 'When it turned on; null while ok.' }),
        attempts: count.meta({ description: 'Connections that failed to connect: since it turned on, or in the last 15 minutes while ok.' }),
        failedHosts: count.meta({ description: 'Distinct MX hosts among them.' }),
        lastError: z.string().nullable().meta({ description: 'The latest, as host[address]: why.' }),
        port: z.int().meta({ description: 'The outbound port (outbound.port).' }),
      })
      .meta({ description: "This node's view (each node has its own network); always ok with a relay or in sandbox mode." }),
  })
  .meta({ id: 'QueueSummary' });

export const queueMessagesSchema = z
  .strictObject({
    messages: z.array(
      z.strictObject({
        deliveryId: intId,
        emailId: z.string(),
        teamId: intId,
        recipient: z.string(),
        destination: z.string(),
        state: z.enum(QUEUE_STATES),
        attempts: count,
        nextAttemptAt: timestamp,
        lastReply: reply.nullable(),
        heldReason: z.string().nullable().meta({ description: 'Why traffic shaping holds it (a hold, the message rate, the warm-up budget), while it does.' }),
      }),
    ),
    nextCursor: z.string().nullable(),
  })
  .meta({ id: 'QueueMessages' });

const destination = z.string().trim().min(1).max(253);
const selectorFields = {
  destination: destination.optional(),
  teamId: intId.optional(),
  campaignId: z.string().min(1).max(100).optional(),
};

export const suspendBody = z
  .strictObject({
    ...selectorFields,
    minutes: z.number().positive().max(30 * 24 * 60),
    reason: z.string().trim().min(1).max(500),
  })
  .meta({ description: 'At least one of destination, teamId and campaignId.' });
export const createdSuspensionSchema = suspensionSchema.extend({ parked: count.meta({ description: 'Queued deliveries this suspension held at once (mail another suspension already held is not counted).' }) });

export const retryBody = z
  .strictObject({ ...selectorFields, emailIds: z.array(z.string().min(1).max(100)).min(1).max(1000).optional() })
  .meta({ description: 'At least one of destination, teamId, campaignId and emailIds.' });
export const bounceBody = retryBody.extend({ reason: z.string().trim().min(1).max(500) });

export const traceSchema = z
  .strictObject({
    emailId: z.string(),
    teamId: intId,
    attempts: z.array(
      z.strictObject({
        id: intId,
        startedAt: timestamp,
        destination: z.string(),
        mxHost: z.string().nullable(),
        address: z.string().nullable().meta({ description: 'The MX address connected to (ip:port).' }),
        source: z.string().nullable().meta({ description: 'Our local address for the session.' }),
        sourceName: z.string().nullable().meta({ description: 'The egress source the attempt went out from.' }),
        tls: z
          .strictObject({
            version: z.string().nullable(),
            cipher: z.string().nullable(),
            verified: z.boolean(),
            error: z.string().nullable(),
            subject: z.string().nullable(),
            issuer: z.string().nullable(),
          })
          .nullable()
          .meta({ description: 'Null when the session stayed in plaintext.' }),
        results: z.array(z.strictObject({ recipient: z.string(), outcome: z.string(), code: z.int().optional(), response: z.string() })),
        transcript: z.array(z.strictObject({ at: timestamp, direction: z.enum(['client', 'server', 'info']), line: z.string() })),
      }),
    ),
  })
  .meta({ id: 'EmailTrace' });

const poolName = z.string().min(1).max(63);

export const teamSchema = z
  .strictObject({
    id: intId,
    name: z.string(),
    rateLimit: intId.nullable().meta({ description: 'Requests per second; null uses the configured default.' }),
    pool: z.string().nullable().meta({ description: "Egress pool of the team's mail (outbound.pools); null: the default pool." }),
    createdAt: timestamp,
  })
  .meta({ id: 'Team' });
export const teamCreateBody = z.strictObject({ name: z.string().min(1).max(200), rateLimit: z.int().min(1).max(1_000_000).nullable().optional() });
export const teamPatchBody = z.strictObject({
  name: z.string().min(1).max(200).optional(),
  rateLimit: z.int().min(1).max(1_000_000).nullable().optional(),
  pool: poolName.nullable().optional().meta({ description: 'A configured egress pool; null (or "default"): the default pool.' }),
});

export const domainPoolSchema = z
  .strictObject({ id: intId, name: z.string(), teamId: intId, pool: z.string().nullable().meta({ description: "Egress pool of the domain's mail; null: its team's." }) })
  .meta({ id: 'DomainPool' });
export const domainPatchBody = z.strictObject({ pool: poolName.nullable().meta({ description: 'A configured egress pool; null (or "default"): the team\'s.' }) });

export const auditSchema = z
  .strictObject({
    entries: z.array(
      z.strictObject({
        id: intId,
        keyId: intId.nullable().meta({ description: 'The operator key; null for a console user or the CLI on the server.' }),
        consoleUserId: intId.nullable().meta({ description: 'The operator signed in to the web console; null for a key or the CLI.' }),
        actor: z.string().meta({ description: 'Who, as text: "key 2 (ops)", "console user 3 (ops@example.com)" or "cli".' }),
        action: z.string(),
        target: z.record(z.string(), z.unknown()),
        createdAt: timestamp,
      }),
    ),
    nextCursor: z.string().nullable(),
  })
  .meta({ id: 'AuditLog' });

const jobState = z.strictObject({
  lastRunAt: timestamp.nullable(),
  lastOkAt: timestamp.nullable(),
  lastError: z.strictObject({ at: timestamp, message: z.string() }).nullable(),
  runs: count,
  failures: count,
});

export const adminHealthSchema = z
  .strictObject({
    status: z.enum(['ok', 'degraded']),
    node: z.string(),
    uptimeSeconds: z.number().min(0),
    store: z.enum(['ok', 'error']),
    storeKind: z.enum(['sqlite', 'postgres']).meta({ description: 'SQLite (one server) or PostgreSQL (shared by the cluster).' }),
    cluster: z
      .array(z.strictObject({ node: z.string(), hostname: z.string(), lastSeenSeconds: z.number().min(0) }))
      .meta({ description: 'The nodes this one sees alive (heartbeats in the shared store), itself included.' }),
    queue: z.strictObject({
      ready: count,
      inFlight: count,
      deferred: count,
      suspended: count,
      oldestReadyAgeSeconds: z.number().min(0).nullable().meta({ description: 'How long the oldest delivery that is due now has been waiting.' }),
    }),
    listeners: z.record(z.string(), z.strictObject({ state: z.enum(['listening', 'not started', 'failed']), host: z.string().nullable(), port: z.int().nullable() })),
    disk: z.strictObject({ path: z.string(), freeBytes: count, totalBytes: count }).nullable(),
    jobs: z.record(z.string(), jobState),
  })
  .meta({ id: 'AdminHealth' });
