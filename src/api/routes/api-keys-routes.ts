import { z } from 'zod';
import type { ApiKeyService } from '../../core/api-keys/api-key-service.js';
import type { RouteDef } from '../route-types.js';
import { parseInput, parseIntId } from '../validation.js';

const createBody = z
  .object({
    name: z.string().trim().min(1).max(200),
    permission: z.enum(['FULL', 'SENDING']).optional(),
    domainId: z.number().int().min(1).max(2147483647).nullable().optional(),
  })
  .strict();

export function apiKeysRoutes(apiKeys: ApiKeyService): RouteDef[] {
  return [
    {
      method: 'GET',
      path: '/apiKeys',
      access: 'full',
      summary: 'List the team API keys (never the secret).',
      handler: async ({ auth }) => apiKeys.list(auth.teamId, auth.domainId),
    },
    {
      method: 'POST',
      path: '/apiKeys',
      access: 'full',
      summary: 'Create an API key; the full key is returned only here.',
      handler: async ({ auth, body }) => {
        const input = parseInput(createBody, body ?? {});
        const created = await apiKeys.create(auth.teamId, input, auth.domainId);
        return created;
      },
    },
    {
      method: 'DELETE',
      path: '/apiKeys/:id',
      access: 'full',
      summary: 'Revoke an API key, effective immediately.',
      handler: async ({ auth, params }) => {
        const id = parseIntId(params.id);
        await apiKeys.revoke(id, auth.teamId, auth.domainId);
        return { id, success: true, message: 'API key deleted' };
      },
    },
  ];
}
