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
export const createdSuspensionSchema = suspensionSchema.extend({ parked: count.meta({ description: 'Queued deliveries held at once.' }) });

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

export const teamSchema = z
  .strictObject({ id: intId, name: z.string(), rateLimit: intId.nullable().meta({ description: 'Requests per second; null uses the configured default.' }), createdAt: timestamp })
  .meta({ id: 'Team' });
export const teamCreateBody = z.strictObject({ name: z.string().min(1).max(200), rateLimit: z.int().min(1).max(1_000_000).nullable().optional() });
export const teamPatchBody = z.strictObject({ name: z.string().min(1).max(200).optional(), rateLimit: z.int().min(1).max(1_000_000).nullable().optional() });

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
