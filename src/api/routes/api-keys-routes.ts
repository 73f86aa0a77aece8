import { z } from 'zod';
import type { ApiKeyService } from '../../core/api-keys/api-key-service.js';
import { MAX_INT_ID } from '../../core/int-id.js';
import { intIdPath } from '../params.js';
import { defineRoute, type RouteDef } from '../route-types.js';
import { apiKeySchema, createdApiKeySchema } from '../schemas/api-key-schemas.js';
import { deletedSchema, intId } from '../schemas/common-schemas.js';

const createBody = z
  .object({
    name: z.string().trim().min(1).max(200),
    permission: z.enum(['FULL', 'SENDING']).optional(),
    domainId: z.number().int().min(1).max(MAX_INT_ID).nullable().optional(),
  })
  .strict();

export function apiKeysRoutes(apiKeys: ApiKeyService): RouteDef[] {
  const tag = 'API keys';
  return [
    defineRoute({
      method: 'GET',
      path: '/apiKeys',
      access: 'full',
      tag,
      summary: 'List the team API keys (never the secret).',
      response: z.array(apiKeySchema),
      handler: async ({ auth }) => apiKeys.list(auth.teamId, auth.domainId),
    }),
    defineRoute({
      method: 'POST',
      path: '/apiKeys',
      access: 'full',
      tag,
      summary: 'Create an API key; the full key is returned only here.',
      request: { body: createBody },
      response: createdApiKeySchema,
      handler: async ({ auth, input }) => apiKeys.create(auth.teamId, input.body, auth.domainId),
    }),
    defineRoute({
      method: 'DELETE',
      path: '/apiKeys/:apiKeyId',
      access: 'full',
      tag,
      summary: 'Revoke an API key, effective immediately.',
      request: { params: { apiKeyId: intIdPath('API key id.') } },
      response: deletedSchema(intId),
      errors: [404],
      handler: async ({ auth, input }) => {
        const id = input.params.apiKeyId;
        await apiKeys.revoke(id, auth.teamId, auth.domainId);
        return { id, success: true, message: 'API key deleted' };
      },
    }),
  ];
}
