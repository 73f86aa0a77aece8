import {
  SUPPRESSION_REASONS,
  suppressionAddSchema,
  suppressionBulkAddSchema,
  suppressionBulkRemoveSchema,
  type SuppressionService,
} from '../../core/suppressions/suppression-service.js';
import { enumQuery, pageQueries, searchQuery, stringPath } from '../params.js';
import { pageEnvelope, pageOf } from '../pagination.js';
import { defineRoute, type RouteDef } from '../route-types.js';
import { bulkCountSchema, pageEnvelopeSchema } from '../schemas/common-schemas.js';
import { suppressionBulkAddedSchema, suppressionRemovedSchema, suppressionSchema } from '../schemas/suppression-schemas.js';

export function suppressionsRoutes(suppressions: SuppressionService): RouteDef[] {
  const tag = 'Suppressions';
  const params = { email: stringPath('The address (any case).', { min: 1, max: 320 }) };
  return [
    defineRoute({
      method: 'GET',
      path: '/suppressions',
      access: 'full',
      tag,
      summary: 'List suppressed addresses, newest first (page envelope with key suppressions; search, reason).',
      request: { query: { ...pageQueries(), search: searchQuery('Matches part of the address, case ignored; a domain may be typed in Unicode or in A-labels (docs/api.md, Searching addresses).'), reason: enumQuery(SUPPRESSION_REASONS, 'Only entries with this reason.') } },
      response: pageEnvelopeSchema('suppressions', suppressionSchema),
      handler: async ({ auth, input: { query } }) => {
        const page = pageOf(query);
        const { items, total } = await suppressions.list(auth.teamId, { search: query.search, reason: query.reason, offset: page.offset, limit: page.limit });
        return pageEnvelope('suppressions', items, total, page);
      },
    }),
    defineRoute({
      method: 'POST',
      path: '/suppressions',
      access: 'full',
      tag,
      summary: 'Suppress an address (reason MANUAL unless given); an address already listed keeps its entry.',
      request: { body: suppressionAddSchema },
      response: suppressionSchema,
      handler: async ({ auth, input }) => suppressions.add(auth.teamId, input.body),
    }),
    defineRoute({
      method: 'POST',
      path: '/suppressions/bulk',
      access: 'full',
      tag,
      summary: 'Suppress up to 1000 addresses; duplicates and already listed addresses are accepted.',
      request: { body: suppressionBulkAddSchema },
      response: suppressionBulkAddedSchema,
      handler: async ({ auth, input }) => suppressions.bulkAdd(auth.teamId, input.body),
    }),
    defineRoute({
      method: 'POST',
      path: '/suppressions/bulk/remove',
      access: 'full',
      tag,
      summary: 'Remove up to 1000 addresses from the list.',
      request: { body: suppressionBulkRemoveSchema },
      response: bulkCountSchema,
      handler: async ({ auth, input }) => suppressions.bulkRemove(auth.teamId, input.body),
    }),
    defineRoute({
      method: 'GET',
      path: '/suppressions/:email',
      access: 'full',
      tag,
      summary: 'Get the entry for an address (404 when it is not listed).',
      request: { params },
      response: suppressionSchema,
      errors: [404],
      handler: async ({ auth, input }) => suppressions.get(auth.teamId, input.params.email),
    }),
    defineRoute({
      method: 'DELETE',
      path: '/suppressions/:email',
      access: 'full',
      tag,
      summary: 'Remove an address; a removed hard bounce is attempted again on the next send.',
      request: { params },
      response: suppressionRemovedSchema,
      errors: [404],
      handler: async ({ auth, input }) => suppressions.remove(auth.teamId, input.params.email),
    }),
  ];
}
