import { z } from 'zod';
import type { AuthContext } from '../../core/api-keys/api-key-service.js';
import { badRequest } from '../../core/errors.js';
import { MAX_WEBHOOK_URL_LENGTH } from '../../core/webhooks/url-policy.js';
import { WEBHOOK_EVENT_TYPES, type WebhookScope, type WebhookService } from '../../core/webhooks/webhook-service.js';
import { pageEnvelope, parsePage } from '../pagination.js';
import type { RouteDef } from '../route-types.js';
import { parseInput, singleQuery } from '../validation.js';

const eventTypes = z
  .array(z.enum(WEBHOOK_EVENT_TYPES, { error: `must be one of ${WEBHOOK_EVENT_TYPES.join(', ')}` }))
  .max(WEBHOOK_EVENT_TYPES.length * 2, { error: 'too many event types' });
const domainIds = z.array(z.number().int().min(1).max(2147483647)).max(100).nullable();
const url = z.string().trim().min(1).max(MAX_WEBHOOK_URL_LENGTH);
const description = z.string().max(500).nullable();

const createBody = z
  .object({ url, eventTypes, description: description.optional(), domainIds: domainIds.optional() })
  .strict();
const patchBody = z
  .object({
    url: url.optional(),
    eventTypes: eventTypes.optional(),
    description: description.optional(),
    domainIds: domainIds.optional(),
    rotateSecret: z.boolean().optional(),
  })
  .strict();

function scope(auth: AuthContext): WebhookScope {
  return { teamId: auth.teamId, domainId: auth.domainId };
}

export function webhooksRoutes(webhooks: WebhookService): RouteDef[] {
  return [
    {
      method: 'GET',
      path: '/webhooks',
      access: 'full',
      summary: 'List webhook endpoints (page-numbered; secrets are never listed).',
      handler: async ({ auth, query }) => {
        const page = parsePage(query);
        const { items, total } = await webhooks.list(scope(auth), page.offset, page.limit);
        return pageEnvelope('webhooks', items, total, page);
      },
    },
    {
      method: 'POST',
      path: '/webhooks',
      access: 'full',
      summary: 'Create a webhook endpoint; the signing secret is returned only here and on rotation.',
      handler: async ({ auth, body }) => webhooks.create(scope(auth), parseInput(createBody, body ?? {})),
    },
    {
      method: 'GET',
      path: '/webhooks/:webhookId',
      access: 'full',
      summary: 'Get a webhook endpoint.',
      handler: async ({ auth, params }) => webhooks.get(scope(auth), params.webhookId ?? ''),
    },
    {
      method: 'PATCH',
      path: '/webhooks/:webhookId',
      access: 'full',
      summary: 'Change url, eventTypes, description or domainIds; rotateSecret issues a new secret at once.',
      handler: async ({ auth, params, body }) => {
        const id = params.webhookId ?? '';
        return webhooks.update(scope(auth), id, parseInput(patchBody, body ?? {}));
      },
    },
    {
      method: 'DELETE',
      path: '/webhooks/:webhookId',
      access: 'full',
      summary: 'Delete a webhook endpoint and drop its pending deliveries.',
      handler: async ({ auth, params }) => webhooks.remove(scope(auth), params.webhookId ?? ''),
    },
    {
      method: 'GET',
      path: '/webhooks/:webhookId/attempts',
      access: 'full',
      summary: 'Delivery attempts, newest first; cursor-paginated with nextCursor.',
      handler: async ({ auth, params, query }) => {
        const id = params.webhookId ?? '';
        const limitText = singleQuery(query, 'limit');
        if (limitText !== undefined && (!/^\d{1,3}$/.test(limitText) || Number(limitText) < 1 || Number(limitText) > 100)) {
          throw badRequest('limit: must be an integer from 1 to 100');
        }
        return webhooks.listAttempts(scope(auth), id, limitText === undefined ? 25 : Number(limitText), singleQuery(query, 'cursor'));
      },
    },
    {
      method: 'POST',
      path: '/webhooks/:webhookId/test',
      access: 'full',
      summary: 'Send a webhook.test event to this endpoint (whatever its event filter).',
      handler: async ({ auth, params }) => webhooks.sendTest(scope(auth), params.webhookId ?? ''),
    },
  ];
}
