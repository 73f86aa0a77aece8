import { z } from 'zod';
import type { DomainService } from '../../core/domains/domain-service.js';
import { intIdPath } from '../params.js';
import { defineRoute, type RouteDef } from '../route-types.js';
import { deletedSchema, intId } from '../schemas/common-schemas.js';
import { domainSchema, domainVerifySchema } from '../schemas/domain-schemas.js';

const createBody = z.object({ name: z.string().min(1).max(253), region: z.string().trim().min(1).max(64) }).strict();
const patchBody = z
  .object({
    clickTracking: z.boolean().optional(),
    openTracking: z.boolean().optional(),
    trackingDomain: z.string().min(1).max(253).nullable().optional(),
    tlsPolicy: z.enum(['OPPORTUNISTIC', 'ENFORCED']).optional(),
    receiving: z.boolean().optional(),
    mtaStsMode: z.enum(['enforce', 'testing', 'none']).optional(),
  })
  .strict();
const params = { id: intIdPath('Domain id.') };

export function domainsRoutes(domains: DomainService): RouteDef[] {
  const scope = (auth: { teamId: number; domainId: number | null }) => ({ teamId: auth.teamId, domainId: auth.domainId });
  const tag = 'Domains';
  return [
    defineRoute({
      method: 'GET',
      path: '/domains',
      access: 'full',
      tag,
      summary: 'List domains (a bare array).',
      response: z.array(domainSchema),
      handler: async ({ auth }) => domains.list(scope(auth)),
    }),
    defineRoute({
      method: 'POST',
      path: '/domains',
      access: 'full',
      tag,
      summary: 'Add a sending domain; returns the DNS records to publish.',
      request: { body: createBody },
      response: domainSchema,
      errors: [409],
      handler: async ({ auth, input }) => domains.create(scope(auth), input.body),
    }),
    defineRoute({
      method: 'GET',
      path: '/domains/:id',
      access: 'full',
      tag,
      summary: 'Get a domain.',
      request: { params },
      response: domainSchema,
      errors: [404],
      handler: async ({ auth, input }) => domains.get(scope(auth), input.params.id),
    }),
    defineRoute({
      method: 'PUT',
      path: '/domains/:id/verify',
      access: 'full',
      tag,
      summary: 'Check the DNS records now.',
      request: { params },
      response: domainVerifySchema,
      errors: [404],
      handler: async ({ auth, input }) => ({ message: (await domains.verify(scope(auth), input.params.id)).message }),
    }),
    defineRoute({
      method: 'PATCH',
      path: '/domains/:id',
      access: 'full',
      tag,
      summary: 'Change tracking, tracking domain, TLS policy, receiving or the served MTA-STS mode.',
      request: { params, body: patchBody },
      response: domainSchema,
      errors: [404],
      handler: async ({ auth, input }) => domains.update(scope(auth), input.params.id, input.body),
    }),
    defineRoute({
      method: 'DELETE',
      path: '/domains/:id',
      access: 'full',
      tag,
      summary: 'Delete a domain.',
      request: { params },
      response: deletedSchema(intId),
      errors: [404],
      handler: async ({ auth, input }) => domains.remove(scope(auth), input.params.id),
    }),
  ];
}
