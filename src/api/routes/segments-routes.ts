import { z } from 'zod';
import { segmentCreateSchema, segmentPatchSchema, type SegmentService } from '../../core/segments/segment-service.js';
import { pageQueries, stringPath, textQuery } from '../params.js';
import { pageEnvelope, pageOf } from '../pagination.js';
import { defineRoute, type RouteDef } from '../route-types.js';
import { deletedSchema, pageEnvelopeSchema } from '../schemas/common-schemas.js';
import { contactSchema } from '../schemas/contact-schemas.js';
import { segmentSchema } from '../schemas/segment-schemas.js';

export function segmentsRoutes(segments: SegmentService): RouteDef[] {
  const tag = 'Segments';
  const params = { segmentId: stringPath('Segment id.') };
  return [
    defineRoute({
      method: 'GET',
      path: '/segments',
      access: 'full',
      tag,
      summary: 'List segments, newest first (page envelope with key segments; optional contactBookId filter).',
      request: { query: { ...pageQueries(), contactBookId: textQuery('Only segments of this contact book.', 100, { filter: true }) } },
      response: pageEnvelopeSchema('segments', segmentSchema),
      handler: async ({ auth, input: { query } }) => {
        const page = pageOf(query);
        const { items, total } = await segments.list(auth.teamId, { contactBookId: query.contactBookId, offset: page.offset, limit: page.limit });
        return pageEnvelope('segments', items, total, page);
      },
    }),
    defineRoute({
      method: 'POST',
      path: '/segments',
      access: 'full',
      tag,
      summary: 'Create a segment: a saved filter over one contact book.',
      request: { body: segmentCreateSchema },
      response: segmentSchema,
      handler: async ({ auth, input: { body } }) => segments.create(auth.teamId, { name: body.name, contactBookId: body.contactBookId, filters: body.filters }),
    }),
    defineRoute({
      method: 'GET',
      path: '/segments/:segmentId',
      access: 'full',
      tag,
      summary: 'Get a segment.',
      request: { params },
      response: segmentSchema,
      errors: [404],
      handler: async ({ auth, input }) => segments.get(auth.teamId, input.params.segmentId),
    }),
    defineRoute({
      method: 'PATCH',
      path: '/segments/:segmentId',
      access: 'full',
      tag,
      summary: 'Rename a segment or change its filters.',
      request: { params, body: segmentPatchSchema },
      response: segmentSchema,
      errors: [404],
      handler: async ({ auth, input }) => segments.update(auth.teamId, input.params.segmentId, input.body),
    }),
    defineRoute({
      method: 'DELETE',
      path: '/segments/:segmentId',
      access: 'full',
      tag,
      summary: 'Delete a segment (its contacts are untouched); 409 while a campaign that has not started uses it.',
      request: { params },
      response: deletedSchema(z.string()),
      errors: [404, 409],
      handler: async ({ auth, input }) => segments.remove(auth.teamId, input.params.segmentId),
    }),
    defineRoute({
      method: 'GET',
      path: '/segments/:segmentId/contacts',
      access: 'full',
      tag,
      summary: 'Contacts matching the segment now (page envelope with key contacts).',
      request: { params, query: pageQueries() },
      response: pageEnvelopeSchema('contacts', contactSchema),
      errors: [404],
      handler: async ({ auth, input }) => {
        const page = pageOf(input.query);
        const { items, total } = await segments.contacts(auth.teamId, input.params.segmentId, page);
        return pageEnvelope('contacts', items, total, page);
      },
    }),
  ];
}
