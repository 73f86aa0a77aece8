import { z } from 'zod';
import type { EmailService, SendContext } from '../../core/emails/email-service.js';
import { batchBodySchema, sendBodySchema } from '../../core/emails/send-schema.js';
import { MAX_SCHEDULED_AT_CHARS } from '../../core/emails/scheduled-at.js';
import type { AuthContext } from '../../core/api-keys/api-key-service.js';
import { dateTimeQuery, intIdListQuery, pageQueries, stringListQuery, stringPath, textHeader } from '../params.js';
import { pageOf } from '../pagination.js';
import { defineRoute, type RouteDef } from '../route-types.js';
import { batchResultSchema, emailIdSchema, emailListSchema, emailSchema } from '../schemas/email-schemas.js';
import { jsonPage } from '../json-stream.js';

const rescheduleBody = z.object({ scheduledAt: z.string().min(1).max(MAX_SCHEDULED_AT_CHARS) });
const params = { emailId: stringPath('Email id.', { min: 3, max: 100 }) };
const headers = {
  'Idempotency-Key': textHeader(
    'Makes the request safe to retry for 24 hours: the same key with the same body returns the original response and sends nothing again; with another body, or while the first request is in flight, 409 NOT_UNIQUE.',
    { min: 1, max: 256 },
  ),
};

function sendContext(auth: AuthContext): SendContext {
  return { teamId: auth.teamId, domainId: auth.domainId, apiKeyId: auth.keyId };
}

export function emailsRoutes(emails: EmailService): RouteDef[] {
  const tag = 'Emails';
  return [
    defineRoute({
      method: 'POST',
      path: '/emails',
      access: 'sending',
      tag,
      summary: 'Send an email (optionally scheduled, templated, idempotent).',
      request: { headers, body: sendBodySchema },
      response: emailIdSchema,
      errors: [403, 409],
      handler: async (req) => emails.submit(sendContext(req.auth), req.input.body, { idempotencyKey: req.input.headers['Idempotency-Key'], rawBody: req.body }),
    }),
    defineRoute({
      method: 'POST',
      path: '/emails/batch',
      access: 'sending',
      tag,
      summary: 'Send 1 to 100 emails in one request (counts as one request for the rate limit).',
      request: { headers, body: batchBodySchema },
      response: batchResultSchema,
      errors: [403, 409],
      handler: async (req) => emails.submitBatch(sendContext(req.auth), req.input.body, { idempotencyKey: req.input.headers['Idempotency-Key'], rawBody: req.body }),
    }),
    defineRoute({
      method: 'GET',
      path: '/emails',
      access: 'sending',
      tag,
      summary: 'List emails, newest first.',
      request: {
        query: {
          ...pageQueries(50, 100),
          startDate: dateTimeQuery('Only emails created at or after this instant.'),
          endDate: dateTimeQuery('Only emails created at or before this instant.'),
          domainId: intIdListQuery('Only emails from these domains (repeat the parameter for several).'),
          tag: stringListQuery('Only emails carrying every given tag (repeat the parameter to require several).', { min: 1, max: 64, error: 'each tag is 1 to 64 characters' }),
        },
      },
      response: emailListSchema,
      handler: async ({ auth, input: { query } }) => {
        const page = pageOf(query);
        const result = await emails.list(sendContext(auth), {
          offset: page.offset,
          limit: page.limit,
          startDate: query.startDate,
          endDate: query.endDate,
          domainIds: query.domainId,
          tags: query.tag,
        });
        return result.items ? jsonPage(result.items, result.count) : result;
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/emails/:emailId',
      access: 'sending',
      tag,
      summary: 'Get an email with its status events, oldest first.',
      request: { params },
      response: emailSchema,
      errors: [404],
      handler: async ({ auth, input }) => emails.get(sendContext(auth), input.params.emailId),
    }),
    defineRoute({
      method: 'PATCH',
      path: '/emails/:emailId',
      access: 'sending',
      tag,
      summary: 'Reschedule a scheduled email.',
      request: { params, body: rescheduleBody },
      response: emailIdSchema,
      errors: [404],
      handler: async ({ auth, input }) => emails.reschedule(sendContext(auth), input.params.emailId, input.body.scheduledAt),
    }),
    defineRoute({
      method: 'POST',
      path: '/emails/:emailId/cancel',
      access: 'sending',
      tag,
      summary: 'Cancel a scheduled email.',
      request: { params },
      response: emailIdSchema,
      errors: [404],
      handler: async ({ auth, input }) => emails.cancel(sendContext(auth), input.params.emailId),
    }),
  ];
}
