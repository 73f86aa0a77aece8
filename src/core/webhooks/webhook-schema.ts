import { z } from 'zod';
import { MAX_INT_ID } from '../int-id.js';
import { MAX_WEBHOOK_URL_LENGTH } from './url-policy.js';
import { WEBHOOK_EVENT_TYPES } from './webhook-endpoints-service.js';

// Request bodies of the webhook endpoints, shared by the API and the console.

const eventTypes = z
  .array(z.enum(WEBHOOK_EVENT_TYPES, { error: `must be one of ${WEBHOOK_EVENT_TYPES.join(', ')}` }))
  .max(WEBHOOK_EVENT_TYPES.length * 2, { error: 'too many event types' });
const domainIds = z.array(z.number().int().min(1).max(MAX_INT_ID)).max(100).nullable();
// The URL parser drops tabs and line breaks anywhere in a URL, so one holding them would be
// stored and shown as written while the calls went to another address.
const url = z
  .string()
  .trim()
  .min(1)
  .max(MAX_WEBHOOK_URL_LENGTH)
  .regex(/^[^\u0000-\u001f\u007f]*$/, { error: 'must not contain tabs, line breaks or other control characters' });
const description = z.string().max(500).nullable();
// What GET shows (useSend's spelling), or lower case. AUTO_DISABLED is the server's to set.
const status = z.enum(['ACTIVE', 'PAUSED', 'active', 'paused'], { error: 'must be ACTIVE or PAUSED (AUTO_DISABLED is set by the server; set ACTIVE to re-enable an endpoint)' });

export const webhookCreateSchema = z
  .object({ url, eventTypes, description: description.optional(), domainIds: domainIds.optional() })
  .strict();
export const webhookPatchSchema = z
  .object({
    url: url.optional(),
    eventTypes: eventTypes.optional(),
    description: description.optional(),
    domainIds: domainIds.optional(),
    rotateSecret: z.boolean().optional(),
    status: status.optional(),
  })
  .strict();
