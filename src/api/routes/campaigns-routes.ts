import type { CampaignService } from '../../core/campaigns/campaign-service.js';
import { campaignCreateSchema as createBody, campaignPatchSchema as patchBody, campaignScheduleSchema as scheduleBody } from '../../core/campaigns/campaign-schema.js';
import { enumQuery, pageQueries, searchQuery, stringPath } from '../params.js';
import { pageEnvelope, pageOf } from '../pagination.js';
import { defineRoute, type RouteDef } from '../route-types.js';
import { CAMPAIGN_STATUSES, campaignActionSchema, campaignSchema } from '../schemas/campaign-schemas.js';
import { pageEnvelopeSchema } from '../schemas/common-schemas.js';

const params = { campaignId: stringPath('Campaign id.') };

export function campaignsRoutes(campaigns: CampaignService): RouteDef[] {
  const scope = (auth: { teamId: number; domainId: number | null }) => ({ teamId: auth.teamId, domainId: auth.domainId });
  const tag = 'Campaigns';
  return [
    defineRoute({
      method: 'POST',
      path: '/campaigns',
      access: 'full',
      tag,
      summary: 'Create a campaign (draft, or scheduled with sendNow / scheduledAt); 409 to send while its contact book is being deleted.',
      request: { body: createBody },
      response: campaignSchema,
      errors: [409],
      handler: async ({ auth, input }) => campaigns.create(scope(auth), input.body),
    }),
    defineRoute({
      method: 'GET',
      path: '/campaigns',
      access: 'full',
      tag,
      summary: 'List campaigns (page, status, search over name and subject).',
      request: { query: { ...pageQueries(), status: enumQuery(CAMPAIGN_STATUSES, 'Only campaigns in this status.'), search: searchQuery('Matches part of the name or subject, case ignored.') } },
      response: pageEnvelopeSchema('campaigns', campaignSchema),
      handler: async ({ auth, input: { query } }) => {
        const page = pageOf(query);
        const { items, total } = await campaigns.list(scope(auth), { status: query.status, search: query.search, offset: page.offset, limit: page.limit });
        return pageEnvelope('campaigns', items, total, page);
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/campaigns/:campaignId',
      access: 'full',
      tag,
      summary: 'Get a campaign with its counters.',
      request: { params },
      response: campaignSchema,
      errors: [404],
      handler: async ({ auth, input }) => campaigns.get(scope(auth), input.params.campaignId),
    }),
    defineRoute({
      method: 'PATCH',
      path: '/campaigns/:campaignId',
      access: 'full',
      tag,
      summary: 'Edit a draft campaign.',
      request: { params, body: patchBody },
      response: campaignSchema,
      errors: [404],
      handler: async ({ auth, input }) => campaigns.update(scope(auth), input.params.campaignId, input.body),
    }),
    defineRoute({
      method: 'DELETE',
      path: '/campaigns/:campaignId',
      access: 'full',
      tag,
      summary: 'Delete a campaign; answers the deleted campaign.',
      request: { params },
      response: campaignSchema,
      errors: [404],
      handler: async ({ auth, input }) => campaigns.remove(scope(auth), input.params.campaignId),
    }),
    defineRoute({
      method: 'POST',
      path: '/campaigns/:campaignId/schedule',
      access: 'full',
      tag,
      summary: 'Schedule a draft (now, or at scheduledAt).',
      request: { params, body: scheduleBody },
      response: campaignActionSchema,
      errors: [404, 409],
      handler: async ({ auth, input }) => campaigns.schedule(scope(auth), input.params.campaignId, input.body),
    }),
    defineRoute({
      method: 'POST',
      path: '/campaigns/:campaignId/pause',
      access: 'full',
      tag,
      summary: 'Pause a running campaign.',
      request: { params },
      response: campaignActionSchema,
      errors: [404],
      handler: async ({ auth, input }) => campaigns.pause(scope(auth), input.params.campaignId),
    }),
    defineRoute({
      method: 'POST',
      path: '/campaigns/:campaignId/resume',
      access: 'full',
      tag,
      summary: 'Resume a paused campaign.',
      request: { params },
      response: campaignActionSchema,
      errors: [404, 409],
      handler: async ({ auth, input }) => campaigns.resume(scope(auth), input.params.campaignId),
    }),
  ];
}
