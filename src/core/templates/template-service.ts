import type { Clock } from '../../lib/clock.js';
import { newId } from '../../lib/ids.js';
import { EMPTY_DOCUMENT, parseEditorDocument } from '../../render/editor-document.js';
import { renderEditorHtml } from '../../render/editor-html-renderer.js';
import { renderEditorText } from '../../render/editor-text-renderer.js';
import { RenderError } from '../../render/render-error.js';
import { substituteVariables } from '../../render/variables.js';
import type { TemplateRow, TemplateVersionRow, TemplatesRepository } from '../../store/repositories/templates-repository.js';
import { badRequest, notFound } from '../errors.js';
import { isIntId } from '../int-id.js';
import { DEFAULT_TEMPLATES } from './default-templates.js';
import { assertSubjectTemplateFoldable } from '../emails/email-headers.js';
import { orTooSlow } from '../query-too-slow.js';

export interface TemplateView {
  id: string;
  name: string;
  subject: string;
  content: string;
  html: string;
  publishedVersion: number | null;
  createdAt: string;
  updatedAt: string;
}

export interface TemplateVersionView {
  versionNumber: number;
  subject: string;
  content: string;
  html: string;
  createdAt: string;
  /** Whether this is the version sends use. */
  isPublished: boolean;
}

/** Renders editor content to the HTML and text stored with the draft; bad content is 400. */
export function renderContent(content: string | undefined): { content: string; html: string; text: string } {
  const json = content === undefined || content.trim() === '' ? JSON.stringify(EMPTY_DOCUMENT) : content;
  try {
    const doc = parseEditorDocument(json);
    return { content: json, html: renderEditorHtml(doc), text: renderEditorText(doc) };
  } catch (err) {
    if (err instanceof RenderError) throw badRequest(`content: ${err.message}`);
    throw err;
  }
}

export function createTemplateService(deps: { templates: TemplatesRepository; clock: Clock }) {
  const { templates, clock } = deps;

  const view = (t: TemplateRow): TemplateView => ({
    id: t.id,
    name: t.name,
    subject: t.subject,
    content: t.content,
    html: t.html,
    publishedVersion: t.published_version,
    createdAt: t.created_at,
    updatedAt: t.updated_at,
  });
  const versionView = (v: TemplateVersionRow, published: number | null): TemplateVersionView => ({
    versionNumber: v.version_number,
    subject: v.subject,
    content: v.content,
    html: v.html,
    createdAt: v.created_at,
    isPublished: v.version_number === published,
  });

  async function load(teamId: number, id: string): Promise<TemplateRow> {
    const t = await templates.findById(teamId, id);
    if (!t) throw notFound(`template ${id} not found`);
    return t;
  }

  return {
    async list(teamId: number, q: { search?: string; offset: number; limit: number }) {
      const { rows, total } = await orTooSlow(templates.list(teamId, q));
      return { items: rows.map(view), total };
    },

    async create(teamId: number, input: { name: string; subject: string; content?: string }): Promise<TemplateView> {
      assertSubjectTemplateFoldable(input.subject, 'subject');
      const rendered = renderContent(input.content);
      const now = clock.now().toISOString();
      const row = { id: newId('tp'), team_id: teamId, name: input.name, subject: input.subject, content: rendered.content, html: rendered.html, text_body: rendered.text, published_version: null, created_at: now, updated_at: now, deleted_at: null };
      await templates.insert(row);
      return view(row);
    },

    async get(teamId: number, id: string): Promise<TemplateView> {
      return view(await load(teamId, id));
    },

    /** Edits change only the draft; supplying content re-renders the HTML. */
    async update(teamId: number, id: string, patch: { name?: string; subject?: string; content?: string }): Promise<TemplateView> {
      await load(teamId, id);
      const changes: Parameters<TemplatesRepository['updateDraft']>[2] = {};
      if (patch.name !== undefined) changes.name = patch.name;
      if (patch.subject !== undefined) {
        assertSubjectTemplateFoldable(patch.subject, 'subject');
        changes.subject = patch.subject;
      }
      if (patch.content !== undefined) {
        const r = renderContent(patch.content);
        Object.assign(changes, { content: r.content, html: r.html, text_body: r.text });
      }
      const updated = await templates.updateDraft(teamId, id, changes, clock.now().toISOString());
      if (!updated) throw notFound(`template ${id} not found`);
      return view(updated);
    },

    async remove(teamId: number, id: string) {
      if (!(await templates.softDelete(teamId, id, clock.now().toISOString()))) throw notFound(`template ${id} not found`);
      return { id, success: true, message: 'Template deleted' };
    },

    /** A new draft with the same content, never published. */
    async duplicate(teamId: number, id: string): Promise<TemplateView> {
      const t = await load(teamId, id);
      const now = clock.now().toISOString();
      const row = { ...t, id: newId('tp'), name: `${t.name} (Copy)`, published_version: null, created_at: now, updated_at: now, deleted_at: null };
      await templates.insert(row);
      return view(row);
    },

    async publish(teamId: number, id: string): Promise<TemplateView> {
      const t = await load(teamId, id);
      await templates.publish(t, clock.now().toISOString());
      return view(await load(teamId, id));
    },

    async versions(teamId: number, id: string) {
      const t = await load(teamId, id);
      return { publishedVersion: t.published_version, versions: (await templates.versions(id)).map((v) => versionView(v, t.published_version)) };
    },

    /** Points the sending version at an earlier one; nothing is copied, history is unchanged. */
    async rollback(teamId: number, id: string, versionNumber: number): Promise<TemplateView> {
      await load(teamId, id);
      if (!isIntId(versionNumber) || !(await templates.version(id, versionNumber))) throw badRequest(`versionNumber: template ${id} has no version ${versionNumber}`);
      await templates.setPublishedVersion(id, versionNumber, clock.now().toISOString());
      return view(await load(teamId, id));
    },

    /**
     * The published version, rendered with variables: subject and text raw, HTML with values
     * escaped. Unknown, foreign or never-published templates are refused (400, nothing sent).
     */
    async renderForSend(teamId: number, id: string, variables: Record<string, string>) {
      const t = await templates.findById(teamId, id);
      if (!t) throw badRequest(`templateId: template ${id} not found`);
      if (t.published_version === null) throw badRequest(`templateId: template ${id} has never been published`);
      const v = (await templates.version(id, t.published_version))!;
      return {
        subject: substituteVariables(v.subject, variables, { escapeHtml: false }),
        html: substituteVariables(v.html, variables, { escapeHtml: true }),
        text: substituteVariables(v.text_body, variables, { escapeHtml: false }),
      };
    },

    /** Every new team starts with five published starter templates. */
    async seedDefaults(teamId: number): Promise<void> {
      const now = clock.now().toISOString();
      const rows = DEFAULT_TEMPLATES.map((d) => {
        const r = renderContent(d.content);
        return { id: newId('tp'), team_id: teamId, name: d.name, subject: d.subject, content: r.content, html: r.html, text_body: r.text, published_version: 1, created_at: now, updated_at: now, deleted_at: null };
      });
      await templates.insertMany(
        rows,
        rows.map((r) => ({ template_id: r.id, version_number: 1, subject: r.subject, content: r.content, html: r.html, text_body: r.text_body, created_at: now })),
      );
    },
  };
}
export type TemplateService = ReturnType<typeof createTemplateService>;
