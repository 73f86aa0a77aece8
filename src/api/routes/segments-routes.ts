import { segmentCreateSchema, segmentPatchSchema, type SegmentService } from '../../core/segments/segment-service.js';
import { pageEnvelope, parsePage } from '../pagination.js';
import type { RouteDef } from '../route-types.js';
import { parseInput, singleQuery } from '../validation.js';
import { pathId } from './contact-books-routes.js';

export function segmentsRoutes(segments: SegmentService): RouteDef[] {
  return [
    {
      method: 'GET',
      path: '/segments',
      access: 'full',
      summary: 'List segments, newest first (page envelope with key segments; optional contactBookId filter).',
      handler: async ({ auth, query }) => {
        const page = parsePage(query);
        const { items, total } = await segments.list(auth.teamId, { contactBookId: singleQuery(query, 'contactBookId'), offset: page.offset, limit: page.limit });
        return pageEnvelope('segments', items, total, page);
      },
    },
    {
      method: 'POST',
      path: '/segments',
      access: 'full',
      summary: 'Create a segment: a saved filter over one contact book.',
      handler: async ({ auth, body }) => {
        const input = parseInput(segmentCreateSchema, body ?? {});
        return segments.create(auth.teamId, { name: input.name, contactBookId: input.contactBookId, filters: input.filters });
      },
    },
    {
      method: 'GET',
      path: '/segments/:segmentId',
      access: 'full',
      summary: 'Get a segment.',
      handler: async (req) => segments.get(req.auth.teamId, pathId(req, 'segmentId')),
    },
    {
      method: 'PATCH',
      path: '/segments/:segmentId',
      access: 'full',
      summary: 'Rename a segment or change its filters.',
      handler: async (req) => {
        const id = pathId(req, 'segmentId');
        return segments.update(req.auth.teamId, id, parseInput(segmentPatchSchema, req.body ?? {}));
      },
    },
    {
      method: 'DELETE',
      path: '/segments/:segmentId',
      access: 'full',
      summary: 'Delete a segment (its contacts are untouched).',
      handler: async (req) => segments.remove(req.auth.teamId, pathId(req, 'segmentId')),
    },
    {
      method: 'GET',
      path: '/segments/:segmentId/contacts',
      access: 'full',
      summary: 'Contacts matching the segment now (page envelope with key contacts).',
      handler: async (req) => {
        const id = pathId(req, 'segmentId');
        const page = parsePage(req.query);
        const { items, total } = await segments.contacts(req.auth.teamId, id, page);
        return pageEnvelope('contacts', items, total, page);
      },
    },
  ];
}
