import { z } from 'zod';
import type { DomainService } from '../../core/domains/domain-service.js';
import type { RouteDef } from '../route-types.js';
import { parseInput, parseIntId } from '../validation.js';

const createBody = z.object({ name: z.string().min(1).max(253), region: z.string().trim().min(1).max(64) }).strict();
const patchBody = z
  .object({
    clickTracking: z.boolean().optional(),
    openTracking: z.boolean().optional(),
    trackingDomain: z.string().min(1).max(253).nullable().optional(),
    tlsPolicy: z.enum(['OPPORTUNISTIC', 'ENFORCED']).optional(),
    receiving: z.boolean().optional(),
  })
  .strict();

export function domainsRoutes(domains: DomainService): RouteDef[] {
  const scope = (auth: { teamId: number; domainId: number | null }) => ({ teamId: auth.teamId, domainId: auth.domainId });
  return [
    { method: 'GET', path: '/domains', access: 'full', summary: 'List domains (a bare array).', handler: async ({ auth }) => domains.list(scope(auth)) },
    {
      method: 'POST',
      path: '/domains',
      access: 'full',
      summary: 'Add a sending domain; returns the DNS records to publish.',
      handler: async ({ auth, body }) => domains.create(scope(auth), parseInput(createBody, body ?? {})),
    },
    {
      method: 'GET',
      path: '/domains/:id',
      access: 'full',
      summary: 'Get a domain.',
      handler: async ({ auth, params }) => domains.get(scope(auth), parseIntId(params.id)),
    },
    {
      method: 'PUT',
      path: '/domains/:id/verify',
      access: 'full',
      summary: 'Check the DNS records now.',
      handler: async ({ auth, params }) => ({ message: (await domains.verify(scope(auth), parseIntId(params.id))).message }),
    },
    {
      method: 'PATCH',
      path: '/domains/:id',
      access: 'full',
      summary: 'Change tracking, tracking domain, TLS policy or receiving.',
      handler: async ({ auth, params, body }) => {
        const id = parseIntId(params.id);
        return domains.update(scope(auth), id, parseInput(patchBody, body ?? {}));
      },
    },
    {
      method: 'DELETE',
      path: '/domains/:id',
      access: 'full',
      summary: 'Delete a domain.',
      handler: async ({ auth, params }) => domains.remove(scope(auth), parseIntId(params.id)),
    },
  ];
}
