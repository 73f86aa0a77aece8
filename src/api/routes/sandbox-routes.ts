import type { AuthContext } from '../../core/api-keys/api-key-service.js';
import type { SandboxScope, SandboxService } from '../../core/sandbox/sandbox-service.js';
import { pageQueries, stringPath } from '../params.js';
import { pageEnvelope, pageOf } from '../pagination.js';
import { defineRoute, type RouteDef } from '../route-types.js';
import { pageEnvelopeSchema } from '../schemas/common-schemas.js';
import { sandboxMessageListItemSchema, sandboxMessageSchema } from '../schemas/sandbox-schemas.js';

// Sandbox mode's capture mailbox (docs/api.md, Sandbox). Always in the route table, so the
// document describes them; outside sandbox mode both answer 404.

function scope(auth: AuthContext): SandboxScope {
  return { teamId: auth.teamId, domainId: auth.domainId };
}

export function sandboxRoutes(sandbox: SandboxService): RouteDef[] {
  const tag = 'Sandbox';
  return [
    defineRoute({
      method: 'GET',
      path: '/sandbox/messages',
      access: 'full',
      tag,
      summary: 'Sandbox mode: list the captured messages, newest first (404 outside sandbox mode).',
      request: { query: pageQueries() },
      response: pageEnvelopeSchema('messages', sandboxMessageListItemSchema),
      errors: [404],
      handler: async ({ auth, input: { query } }) => {
        const page = pageOf(query);
        const { items, total } = await sandbox.list(scope(auth), { offset: page.offset, limit: page.limit });
        return pageEnvelope('messages', items, total, page);
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/sandbox/messages/:id',
      access: 'full',
      tag,
      summary: 'Sandbox mode: one captured message, raw (signed) and parsed (404 outside sandbox mode).',
      request: { params: { id: stringPath('Sandbox message id.', { min: 3, max: 100 }) } },
      response: sandboxMessageSchema,
      errors: [404],
      handler: async ({ auth, input }) => sandbox.get(scope(auth), input.params.id),
    }),
  ];
}
