import { z } from 'zod';
import type { AuthContext } from '../../core/api-keys/api-key-service.js';
import { type WebhookEndpointsService, type WebhookScope } from '../../core/webhooks/webhook-endpoints-service.js';
import { limitQuery, pageQueries, stringPath, textQuery } from '../params.js';
import { pageEnvelope, pageOf } from '../pagination.js';
import { defineRoute, type RouteDef } from '../route-types.js';
import { deletedSchema, pageEnvelopeSchema } from '../schemas/common-schemas.js';
import { createdWebhookSchema, updatedWebhookSchema, webhookAttemptsSchema, webhookSchema, webhookTestSchema } from '../schemas/webhook-schemas.js';
import { webhookCreateSchema as createBody, webhookPatchSchema as patchBody } from '../../core/webhooks/webhook-schema.js';

function scope(auth: AuthContext): WebhookScope {
  return { teamId: auth.teamId, domainId: auth.domainId };
}

export function webhooksRoutes(webhooks: WebhookEndpointsService): RouteDef[] {
  const tag = 'Webhooks';
  const params = { webhookId: stringPath('Webhook id.') };
  return [
    defineRoute({
      method: 'GET',
      path: '/webhooks',
      access: 'full',
      tag,
      summary: 'List webhook endpoints (page-numbered; secrets are never listed).',
      request: { query: pageQueries() },
      response: pageEnvelopeSchema('webhooks', webhookSchema),
      handler: async ({ auth, input }) => {
        const page = pageOf(input.query);
        const { items, total } = await webhooks.list(scope(auth), page.offset, page.limit);
        return pageEnvelope('webhooks', items, total, page);
      },
    }),
    defineRoute({
      method: 'POST',
      path: '/webhooks',
      access: 'full',
      tag,
      summary: 'Create a webhook endpoint; the signing secret is returned only here and on rotation.',
      request: { body: createBody },
      response: createdWebhookSchema,
      handler: async ({ auth, input }) => webhooks.create(scope(auth), input.body),
    }),
    defineRoute({
      method: 'GET',
      path: '/webhooks/:webhookId',
      access: 'full',
      tag,
      summary: 'Get a webhook endpoint.',
      request: { params },
      response: webhookSchema,
      errors: [404],
      handler: async ({ auth, input }) => webhooks.get(scope(auth), input.params.webhookId),
    }),
    defineRoute({
      method: 'PATCH',
      path: '/webhooks/:webhookId',
      access: 'full',
      tag,
      summary: 'Change url, eventTypes, description, domainIds or status (ACTIVE or PAUSED); rotateSecret issues a new secret at once.',
      request: { params, body: patchBody },
      response: updatedWebhookSchema,
      errors: [404],
      handler: async ({ auth, input }) => webhooks.update(scope(auth), input.params.webhookId, input.body),
    }),
    defineRoute({
      method: 'DELETE',
      path: '/webhooks/:webhookId',
      access: 'full',
      tag,
      summary: 'Delete a webhook endpoint and drop its pending deliveries.',
      request: { params },
      response: deletedSchema(z.string()),
      errors: [404],
      handler: async ({ auth, input }) => webhooks.remove(scope(auth), input.params.webhookId),
    }),
    defineRoute({
      method: 'GET',
      path: '/webhooks/:webhookId/attempts',
      access: 'full',
      tag,
      summary: 'Delivery attempts, newest first; cursor-paginated with nextCursor.',
      request: { params, query: { limit: limitQuery(25, 100), cursor: textQuery('The nextCursor of the previous page.') } },
      response: webhookAttemptsSchema,
      errors: [404],
      handler: async ({ auth, input: { params, query } }) => webhooks.listAttempts(scope(auth), params.webhookId, query.limit, query.cursor),
    }),
    defineRoute({
      method: 'POST',
      path: '/webhooks/:webhookId/test',
      access: 'full',
      tag,
      summary: 'Send a webhook.test event to this endpoint (whatever its event filter).',
      request: { params },
      response: webhookTestSchema,
      errors: [404],
      handler: async ({ auth, input }) => webhooks.sendTest(scope(auth), input.params.webhookId),
    }),
  ];
}
