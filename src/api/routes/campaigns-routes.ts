import { z } from 'zod';
import type { CampaignService } from '../../core/campaigns/campaign-service.js';
import { MAX_BATCH_SIZE } from '../../core/campaigns/campaign-service.js';
import { badRequest } from '../../core/errors.js';
import { pageEnvelope, parsePage } from '../pagination.js';
import type { RouteDef } from '../route-types.js';
import { parseInput, enumQuery, searchQuery } from '../validation.js';

const addresses = z.union([z.string().min(1).max(1000), z.array(z.string().min(1).max(1000)).max(50)]).nullable();
const batchSize = z.number().int().min(1).max(MAX_BATCH_SIZE);
const fields = {
  name: z.string().trim().min(1).max(200),
  from: z.string().min(1).max(1000),
  subject: z.string().min(1).max(998),
  contactBookId: z.string().min(1).max(100),
  segmentId: z.string().min(1).max(100).nullable(),
  previewText: z.string().max(500).nullable(),
  content: z.string().min(1).max(2_000_000).nullable(),
  html: z.string().min(1).max(2_000_000).nullable(),
  replyTo: addresses,
  cc: addresses,
  bcc: addresses,
  batchSize,
};
const createBody = z
  .object({
    ...fields,
    segmentId: fields.segmentId.optional(),
    previewText: fields.previewText.optional(),
    content: fields.content.optional(),
    html: fields.html.optional(),
    replyTo: addresses.optional(),
    cc: addresses.optional(),
    bcc: addresses.optional(),
    batchSize: batchSize.optional(),
    sendNow: z.boolean().optional(),
    scheduledAt: z.string().min(1).max(200).nullable().optional(),
  })
  .strict();
const patchBody = z.object(Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, v.optional()]))).strict();
const scheduleBody = z.object({ scheduledAt: z.string().min(1).max(200).nullable().optional(), batchSize: batchSize.optional() }).strict();
const STATUSES = ['DRAFT', 'SCHEDULED', 'RUNNING', 'PAUSED', 'SENT'] as const;

function id(raw: string | undefined): string {
  if (!raw || raw.length > 100) throw badRequest('campaignId: invalid');
  return raw;
}

export function campaignsRoutes(campaigns: CampaignService): RouteDef[] {
  const scope = (auth: { teamId: number; domainId: number | null }) => ({ teamId: auth.teamId, domainId: auth.domainId });
  return [
    {
      method: 'POST',
      path: '/campaigns',
      access: 'full',
      summary: 'Create a campaign (draft, or scheduled with sendNow / scheduledAt).',
      handler: async ({ auth, body }) => campaigns.create(scope(auth), parseInput(createBody, body ?? {})),
    },
    {
      method: 'GET',
      path: '/campaigns',
      access: 'full',
      summary: 'List campaigns (page, status, search over name and subject).',
      handler: async ({ auth, query }) => {
        const page = parsePage(query);
        const status = enumQuery(query, 'status', STATUSES);
        const { items, total } = await campaigns.list(scope(auth), { status, search: searchQuery(query), offset: page.offset, limit: page.limit });
        return pageEnvelope('campaigns', items, total, page);
      },
    },
    { method: 'GET', path: '/campaigns/:id', access: 'full', summary: 'Get a campaign with its counters.', handler: async ({ auth, params }) => campaigns.get(scope(auth), id(params.id)) },
    {
      method: 'PATCH',
      path: '/campaigns/:id',
      access: 'full',
      summary: 'Edit a draft campaign.',
      handler: async ({ auth, params, body }) => campaigns.update(scope(auth), id(params.id), parseInput(patchBody, body ?? {}) as never),
    },
    { method: 'DELETE', path: '/campaigns/:id', access: 'full', summary: 'Delete a campaign.', handler: async ({ auth, params }) => campaigns.remove(scope(auth), id(params.id)) },
    {
      method: 'POST',
      path: '/campaigns/:id/schedule',
      access: 'full',
      summary: 'Schedule a draft (now, or at scheduledAt).',
      handler: async ({ auth, params, body }) => campaigns.schedule(scope(auth), id(params.id), parseInput(scheduleBody, body ?? {})),
    },
    { method: 'POST', path: '/campaigns/:id/pause', access: 'full', summary: 'Pause a running campaign.', handler: async ({ auth, params }) => campaigns.pause(scope(auth), id(params.id)) },
    { method: 'POST', path: '/campaigns/:id/resume', access: 'full', summary: 'Resume a paused campaign.', handler: async ({ auth, params }) => campaigns.resume(scope(auth), id(params.id)) },
  ];
}
