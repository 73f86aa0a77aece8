import { z } from 'zod';
import type { TemplateService } from '../../core/templates/template-service.js';
import { badRequest } from '../../core/errors.js';
import { pageEnvelope, parsePage } from '../pagination.js';
import type { RouteDef } from '../route-types.js';
import { parseInput, searchQuery } from '../validation.js';

const name = z.string().trim().min(1).max(200);
const subject = z.string().min(1).max(998);
const content = z.string().max(2_000_000);
const createBody = z.object({ name, subject, content: content.optional() }).strict();
const patchBody = z.object({ name: name.optional(), subject: subject.optional(), content: content.optional() }).strict();
const rollbackBody = z.object({ versionNumber: z.number().int().min(1) }).strict();

function templateId(raw: string | undefined): string {
  if (!raw || raw.length > 100) throw badRequest('templateId: invalid');
  return raw;
}

export function templatesRoutes(templates: TemplateService): RouteDef[] {
  return [
    {
      method: 'GET',
      path: '/templates',
      access: 'full',
      summary: 'List templates (page, limit up to 100, search over name and subject).',
      handler: async ({ auth, query }) => {
        const page = parsePage(query);
        const { items, total } = await templates.list(auth.teamId, { search: searchQuery(query), offset: page.offset, limit: page.limit });
        return pageEnvelope('templates', items, total, page);
      },
    },
    {
      method: 'POST',
      path: '/templates',
      access: 'full',
      summary: 'Create a template draft from an editor document.',
      handler: async ({ auth, body }) => templates.create(auth.teamId, parseInput(createBody, body ?? {})),
    },
    { method: 'GET', path: '/templates/:id', access: 'full', summary: 'Get a template.', handler: async ({ auth, params }) => templates.get(auth.teamId, templateId(params.id)) },
    {
      method: 'PATCH',
      path: '/templates/:id',
      access: 'full',
      summary: 'Edit the draft (name, subject, content).',
      handler: async ({ auth, params, body }) => templates.update(auth.teamId, templateId(params.id), parseInput(patchBody, body ?? {})),
    },
    { method: 'DELETE', path: '/templates/:id', access: 'full', summary: 'Delete a template.', handler: async ({ auth, params }) => templates.remove(auth.teamId, templateId(params.id)) },
    {
      method: 'POST',
      path: '/templates/:id/duplicate',
      access: 'full',
      summary: 'Copy a template into a new draft.',
      handler: async ({ auth, params }) => templates.duplicate(auth.teamId, templateId(params.id)),
    },
    {
      method: 'POST',
      path: '/templates/:id/publish',
      access: 'full',
      summary: 'Freeze the draft as the next version and send with it.',
      handler: async ({ auth, params }) => templates.publish(auth.teamId, templateId(params.id)),
    },
    {
      method: 'GET',
      path: '/templates/:id/versions',
      access: 'full',
      summary: 'List every published version and which one sends.',
      handler: async ({ auth, params }) => templates.versions(auth.teamId, templateId(params.id)),
    },
    {
      method: 'POST',
      path: '/templates/:id/rollback',
      access: 'full',
      summary: 'Send with an earlier version again.',
      handler: async ({ auth, params, body }) => templates.rollback(auth.teamId, templateId(params.id), parseInput(rollbackBody, body ?? {}).versionNumber),
    },
  ];
}
