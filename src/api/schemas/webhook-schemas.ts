import { z } from 'zod';
import { WEBHOOK_EVENT_TYPES } from '../../core/webhooks/webhook-endpoints-service.js';
import { intId, stringMap, timestamp } from './common-schemas.js';

const secret = z.string().meta({ description: 'The signing secret: shown only on creation and rotation.' });

export const webhookSchema = z
  .strictObject({
    id: z.string(),
    url: z.string(),
    description: z.string().nullable(),
    eventTypes: z.array(z.enum(WEBHOOK_EVENT_TYPES)).meta({ description: 'Empty means every event type.' }),
    domainIds: z.array(intId).meta({ description: 'Empty means every domain.' }),
    status: z.enum(['ACTIVE', 'PAUSED', 'AUTO_DISABLED']).meta({ description: 'Only an ACTIVE endpoint is sent events. AUTO_DISABLED: its events failed webhooks.disableAfterFailures times in a row.' }),
    consecutiveFailures: z.int().min(0).meta({ description: 'Events in a row whose every attempt failed, counted while ACTIVE; a delivered one resets it.' }),
    disabledAt: timestamp.nullable().meta({ description: 'When it was paused or auto-disabled; null while ACTIVE.' }),
    createdAt: timestamp,
    updatedAt: timestamp,
  })
  .meta({ id: 'Webhook' });

export const createdWebhookSchema = webhookSchema.extend({ secret });
export const updatedWebhookSchema = webhookSchema.extend({ secret: secret.optional() });

export const webhookAttemptSchema = z
  .strictObject({
    id: z.string(),
    webhookId: z.string(),
    eventId: z.string(),
    eventType: z.enum(WEBHOOK_EVENT_TYPES),
    attempt: z.int().min(1),
    maxAttempts: z.int().min(1),
    status: z.enum(['SUCCEEDED', 'FAILED', 'DISCARDED']).meta({ description: 'DISCARDED: no request was made; the call was dropped while the endpoint was PAUSED or AUTO_DISABLED, and attempt is the one not made.' }),
    request: z.strictObject({ method: z.literal('POST'), url: z.string(), headers: stringMap, body: z.string().nullable().meta({ description: 'The payload sent; null once the event has been pruned.' }) }),
    response: z.strictObject({ status: z.int(), body: z.string().nullable() }).nullable(),
    durationMs: z.int().min(0),
    error: z.string().nullable(),
    nextAttemptAt: timestamp.nullable().meta({ description: 'When the next attempt is due; null after a success or the last attempt.' }),
    createdAt: timestamp,
  })
  .meta({ id: 'WebhookAttempt' });

export const webhookAttemptsSchema = z.strictObject({
  attempts: z.array(webhookAttemptSchema),
  nextCursor: z.string().nullable().meta({ description: 'Pass as cursor for the next page; null at the end.' }),
});

export const webhookTestSchema = z.strictObject({ success: z.boolean(), eventId: z.string() });
