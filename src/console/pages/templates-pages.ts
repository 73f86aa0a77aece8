import type Router from '@koa/router';
import { templateCreateSchema, templatePatchSchema } from '../../core/templates/template-schema.js';
import { badRequest } from '../../core/errors.js';
import { isIntId } from '../../core/int-id.js';
import { route, type PageDeps } from '../console-deps.js';
import { field, parseWith, scopeOf, type ConsoleContext } from '../console-context.js';
import { isSecure, redirectWithFlash } from '../console-responses.js';
import { html, seg } from '../html.js';
import { actionButton, badge, csrfField, input, pager, renderPage, section, table, time } from '../layout.js';
import { ListQuery } from '../list-filters.js';
import { contentFields, contentFromForm, contentPreviewRoute, editableContent, previewFrame, sendFrame } from './content-editor.js';

// Templates: the draft (editor content with a preview), publishing, versions and rollback.

export function templatesPages(r: Router, d: PageDeps): void {
  const secure = isSecure(d.publicUrl);
  const { templates } = d.services;
  const teamOf = (ctx: ConsoleContext) => scopeOf(ctx).teamId;
  contentPreviewRoute(r, d);

  route(r, 'get', '/templates', async (ctx) => {
    const q = new ListQuery(ctx.querystring);
    const search = q.text('q', 'Search');
    const p = q.page();
    const list = await templates.list(teamOf(ctx), { search: search || undefined, offset: p.offset, limit: p.limit });
    renderPage(ctx, d.assets, {
      title: 'Templates',
      nav: 'templates',
      problems: q.problems,
      body: html`${section('New template', html`<form method="post" action="/console/templates" class="stack">${csrfField(ctx)}
<div class="row">${input({ name: 'name', label: 'Name', required: true })}${input({ name: 'subject', label: 'Subject', required: true })}</div>
<button type="submit" class="btn primary">Create and edit</button></form>`)}
<form method="get" class="filters" role="search" aria-label="Search templates">${input({ name: 'q', label: 'Search by name', type: 'search', value: search })}<button type="submit" class="btn secondary">Search</button></form>
${table('Templates', ['Template', 'Subject', 'Published', 'Updated'], list.items.map((t) => [
  html`<a href="/console/templates/${seg(t.id)}">${t.name}</a>`,
  t.subject,
  t.publishedVersion === null ? badge('DRAFT') : html`version ${t.publishedVersion}`,
  time(t.updatedAt),
]), 'No templates match.')}${pager('/console/templates', { ...p, total: list.total }, { q: search })}`,
    });
  });

  route(r, 'post', '/templates', async (ctx) => {
    const t = await templates.create(teamOf(ctx), parseWith(templateCreateSchema, { name: field(ctx, 'name'), subject: field(ctx, 'subject') }));
    redirectWithFlash(ctx, secure, `/console/templates/${seg(t.id)}`, { kind: 'ok', text: 'Template created. Write its content, preview it, then publish.' });
  });

  route(r, 'get', '/templates/:id', async (ctx) => {
    const t = await templates.get(teamOf(ctx), ctx.params.id!);
    const { versions } = await templates.versions(teamOf(ctx), t.id);
    const base = `/console/templates/${seg(t.id)}`;
    renderPage(ctx, d.assets, {
      title: t.name,
      nav: 'templates',
      crumbs: [['Templates', '/console/templates']],
      actions: html`${actionButton(ctx, `${base}/publish`, 'Publish draft', { kind: 'primary' })}${actionButton(ctx, `${base}/duplicate`, 'Duplicate')}`,
      body: html`<div class="grid-2">${section('Draft', html`<form method="post" action="${base}" class="stack">${csrfField(ctx)}
${input({ name: 'name', label: 'Name', value: t.name, required: true })}${input({ name: 'subject', label: 'Subject', value: t.subject, required: true })}
${contentFields(editableContent(t.content), 'template-preview')}
<button type="submit" class="btn primary">Save draft</button></form>`)}
${section('Preview', html`<p class="hint">The saved draft; "Preview" shows the text you are editing. Sends use the published version${t.publishedVersion === null ? ' (none yet: publish first)' : ` (version ${t.publishedVersion})`}.</p>${previewFrame('template-preview', `${base}/preview.html`)}`)}</div>
${section('Versions', table('Versions', ['Version', 'Subject', 'Published', 'Saved', ''], [...versions].reverse().map((v) => [
  html`<a href="${base}/versions/${seg(v.versionNumber)}/preview.html" target="template-preview">Version ${v.versionNumber}</a>`,
  v.subject,
  v.isPublished ? badge('ACTIVE') : '',
  time(v.createdAt),
  v.isPublished ? '' : actionButton(ctx, `${base}/rollback`, 'Use this version', { fields: { versionNumber: String(v.versionNumber) }, confirm: `Send with version ${v.versionNumber} from now on?` }),
]), 'Never published.'))}
${section('Delete', actionButton(ctx, `${base}/delete`, 'Delete template', { kind: 'danger', confirm: `Delete ${t.name}? Sends naming it will be refused.` }))}`,
    });
  });

  route(r, 'post', '/templates/:id', async (ctx) => {
    const patch = parseWith(templatePatchSchema, { name: field(ctx, 'name'), subject: field(ctx, 'subject'), content: contentFromForm(ctx.state.console.form) });
    await templates.update(teamOf(ctx), ctx.params.id!, patch);
    redirectWithFlash(ctx, secure, `/console/templates/${seg(ctx.params.id!)}`, { kind: 'ok', text: 'Draft saved.' });
  });

  route(r, 'get', '/templates/:id/preview.html', async (ctx) => {
    sendFrame(ctx, (await templates.get(teamOf(ctx), ctx.params.id!)).html);
  });

  route(r, 'get', '/templates/:id/versions/:n/preview.html', async (ctx) => {
    const { versions } = await templates.versions(teamOf(ctx), ctx.params.id!);
    const v = versions.find((x) => String(x.versionNumber) === ctx.params.n);
    sendFrame(ctx, v ? v.html : '<p>No such version.</p>');
  });

  route(r, 'post', '/templates/:id/publish', async (ctx) => {
    const t = await templates.publish(teamOf(ctx), ctx.params.id!);
    redirectWithFlash(ctx, secure, `/console/templates/${seg(t.id)}`, { kind: 'ok', text: `Published as version ${t.publishedVersion}.` });
  });

  route(r, 'post', '/templates/:id/rollback', async (ctx) => {
    const raw = field(ctx, 'versionNumber');
    const version = /^\d{1,10}$/.test(raw) ? Number(raw) : 0;
    if (!isIntId(version)) throw badRequest(`versionNumber: "${raw}" is not a version number`);
    const t = await templates.rollback(teamOf(ctx), ctx.params.id!, version);
    redirectWithFlash(ctx, secure, `/console/templates/${seg(t.id)}`, { kind: 'ok', text: `Sends now use version ${t.publishedVersion}.` });
  });

  route(r, 'post', '/templates/:id/duplicate', async (ctx) => {
    const t = await templates.duplicate(teamOf(ctx), ctx.params.id!);
    redirectWithFlash(ctx, secure, `/console/templates/${seg(t.id)}`, { kind: 'ok', text: 'A copy was made.' });
  });

  route(r, 'post', '/templates/:id/delete', async (ctx) => {
    await templates.remove(teamOf(ctx), ctx.params.id!);
    redirectWithFlash(ctx, secure, '/console/templates', { kind: 'ok', text: 'Template deleted.' });
  });
}
