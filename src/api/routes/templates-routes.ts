import { z } from 'zod';
import type { TemplateService } from '../../core/templates/template-service.js';
import { pageQueries, searchQuery, stringPath } from '../params.js';
import { pageEnvelope, pageOf } from '../pagination.js';
import { defineRoute, type RouteDef } from '../route-types.js';
import { deletedSchema, pageEnvelopeSchema } from '../schemas/common-schemas.js';
import { templateSchema, templateVersionsSchema } from '../schemas/template-schemas.js';
import { templateCreateSchema as createBody, templatePatchSchema as patchBody, templateRollbackSchema as rollbackBody } from '../../core/templates/template-schema.js';

const params = { templateId: stringPath('Template id.') };

export function templatesRoutes(templates: TemplateService): RouteDef[] {
  const tag = 'Templates';
  return [
    defineRoute({
      method: 'GET',
      path: '/templates',
      access: 'full',
      tag,
      summary: 'List templates (page, limit up to 100, search over name and subject).',
      request: { query: { ...pageQueries(), search: searchQuery('Matches part of the name or subject, case ignored.') } },
      response: pageEnvelopeSchema('templates', templateSchema),
      handler: async ({ auth, input: { query } }) => {
        const page = pageOf(query);
        const { items, total } = await templates.list(auth.teamId, { search: query.search, offset: page.offset, limit: page.limit });
        return pageEnvelope('templates', items, total, page);
      },
    }),
    defineRoute({
      method: 'POST',
      path: '/templates',
      access: 'full',
      tag,
      summary: 'Create a template draft from an editor document.',
      request: { body: createBody },
      response: templateSchema,
      handler: async ({ auth, input }) => templates.create(auth.teamId, input.body),
    }),
    defineRoute({
      method: 'GET',
      path: '/templates/:templateId',
      access: 'full',
      tag,
      summary: 'Get a template.',
      request: { params },
      response: templateSchema,
      errors: [404],
      handler: async ({ auth, input }) => templates.get(auth.teamId, input.params.templateId),
    }),
    defineRoute({
      method: 'PATCH',
      path: '/templates/:templateId',
      access: 'full',
      tag,
      summary: 'Edit the draft (name, subject, content).',
      request: { params, body: patchBody },
      response: templateSchema,
      errors: [404],
      handler: async ({ auth, input }) => templates.update(auth.teamId, input.params.templateId, input.body),
    }),
    defineRoute({
      method: 'DELETE',
      path: '/templates/:templateId',
      access: 'full',
      tag,
      summary: 'Delete a template.',
      request: { params },
      response: deletedSchema(z.string()),
      errors: [404],
      handler: async ({ auth, input }) => templates.remove(auth.teamId, input.params.templateId),
    }),
    defineRoute({
      method: 'POST',
      path: '/templates/:templateId/duplicate',
      access: 'full',
      tag,
      summary: 'Copy a template into a new draft.',
      request: { params },
      response: templateSchema,
      errors: [404],
      handler: async ({ auth, input }) => templates.duplicate(auth.teamId, input.params.templateId),
    }),
    defineRoute({
      method: 'POST',
      path: '/templates/:templateId/publish',
      access: 'full',
      tag,
      summary: 'Freeze the draft as the next version and send with it.',
      request: { params },
      response: templateSchema,
      errors: [404],
      handler: async ({ auth, input }) => templates.publish(auth.teamId, input.params.templateId),
    }),
    defineRoute({
      method: 'GET',
      path: '/templates/:templateId/versions',
      access: 'full',
      tag,
      summary: 'List every published version and which one sends.',
      request: { params },
      response: templateVersionsSchema,
      errors: [404],
      handler: async ({ auth, input }) => templates.versions(auth.teamId, input.params.templateId),
    }),
    defineRoute({
      method: 'POST',
      path: '/templates/:templateId/rollback',
      access: 'full',
      tag,
      summary: 'Send with an earlier version again.',
      request: { params, body: rollbackBody },
      response: templateSchema,
      errors: [404],
      handler: async ({ auth, input }) => templates.rollback(auth.teamId, input.params.templateId, input.body.versionNumber),
    }),
  ];
}
