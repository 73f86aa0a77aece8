import {
  SUPPRESSION_REASONS,
  suppressionAddSchema,
  suppressionBulkAddSchema,
  suppressionBulkRemoveSchema,
  type SuppressionService,
} from '../../core/suppressions/suppression-service.js';
import { badRequest } from '../../core/errors.js';
import { pageEnvelope, parsePage } from '../pagination.js';
import type { RouteDef, RouteRequest } from '../route-types.js';
import { parseInput, enumQuery, searchQuery } from '../validation.js';

function emailParam(req: RouteRequest): string {
  const email = req.params.email ?? '';
  if (email.length < 1 || email.length > 320) throw badRequest('email: must be 1 to 320 characters');
  return email;
}

export function suppressionsRoutes(suppressions: SuppressionService): RouteDef[] {
  return [
    {
      method: 'GET',
      path: '/suppressions',
      access: 'full',
      summary: 'List suppressed addresses, newest first (page envelope with key suppressions; search, reason).',
      handler: async (req) => {
        const page = parsePage(req.query);
        const reason = enumQuery(req.query, 'reason', SUPPRESSION_REASONS);
        const search = searchQuery(req.query);
        const { items, total } = await suppressions.list(req.auth.teamId, {
          search,
          reason,
          offset: page.offset,
          limit: page.limit,
        });
        return pageEnvelope('suppressions', items, total, page);
      },
    },
    {
      method: 'POST',
      path: '/suppressions',
      access: 'full',
      summary: 'Suppress an address (reason MANUAL unless given); an address already listed keeps its entry.',
      handler: async ({ auth, body }) => suppressions.add(auth.teamId, parseInput(suppressionAddSchema, body ?? {})),
    },
    {
      method: 'POST',
      path: '/suppressions/bulk',
      access: 'full',
      summary: 'Suppress up to 1000 addresses; duplicates and already listed addresses are accepted.',
      handler: async ({ auth, body }) => suppressions.bulkAdd(auth.teamId, parseInput(suppressionBulkAddSchema, body ?? {})),
    },
    {
      method: 'POST',
      path: '/suppressions/bulk/remove',
      access: 'full',
      summary: 'Remove up to 1000 addresses from the list.',
      handler: async ({ auth, body }) => suppressions.bulkRemove(auth.teamId, parseInput(suppressionBulkRemoveSchema, body ?? {})),
    },
    {
      method: 'GET',
      path: '/suppressions/:email',
      access: 'full',
      summary: 'Get the entry for an address (404 when it is not listed).',
      handler: async (req) => suppressions.get(req.auth.teamId, emailParam(req)),
    },
    {
      method: 'DELETE',
      path: '/suppressions/:email',
      access: 'full',
      summary: 'Remove an address; a removed hard bounce is attempted again on the next send.',
      handler: async (req) => suppressions.remove(req.auth.teamId, emailParam(req)),
    },
  ];
}
