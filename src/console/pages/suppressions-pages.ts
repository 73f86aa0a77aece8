import type Router from '@koa/router';
import { SUPPRESSION_REASONS, suppressionAddSchema } from '../../core/suppressions/suppression-service.js';
import { route, type PageDeps } from '../console-deps.js';
import { field, parseWith, scopeOf } from '../console-context.js';
import { isSecure, redirectWithFlash } from '../console-responses.js';
import { html } from '../html.js';
import { ListQuery } from '../list-filters.js';
import { actionButton, badge, csrfField, input, pager, renderPage, section, select, table, time } from '../layout.js';

// Suppressions: addresses this team never sends to (hard bounces, complaints, by hand).

export function suppressionsPages(r: Router, d: PageDeps): void {
  const secure = isSecure(d.publicUrl);
  const { suppressions } = d.services;

  route(r, 'get', '/suppressions', async (ctx) => {
    const q = new ListQuery(ctx.querystring);
    const search = q.text('q', 'Search', 320);
    const reason = q.oneOf('reason', 'Reason', SUPPRESSION_REASONS);
    const p = q.page();
    const list = await suppressions.list(scopeOf(ctx).teamId, { search: search || undefined, reason, offset: p.offset, limit: p.limit });
    renderPage(ctx, d.assets, {
      title: 'Suppressions',
      nav: 'suppressions',
      problems: q.problems,
      body: html`${section('Suppress an address', html`<form method="post" action="/console/suppressions" class="row-form">${csrfField(ctx)}
${input({ name: 'email', label: 'Email', type: 'email', required: true })}<button type="submit" class="btn primary">Suppress</button></form>`)}
<form method="get" class="filters" role="search" aria-label="Search suppressions">${input({ name: 'q', label: 'Search', type: 'search', value: search })}
${select({ name: 'reason', label: 'Reason', value: reason ?? '', options: [['', 'Any reason'], ...SUPPRESSION_REASONS.map((x) => [x, x.replace('_', ' ').toLowerCase()] as const)] })}<button type="submit" class="btn secondary">Search</button></form>
${table('Suppressed addresses', ['Email', 'Reason', 'Source', 'Since', ''], list.items.map((s) => [
  s.email,
  badge(s.reason),
  s.source ?? '—',
  time(s.createdAt),
  actionButton(ctx, '/console/suppressions/remove', 'Remove', { fields: { email: s.email }, confirm: `Send to ${s.email} again?` }),
]), 'No suppressed addresses.')}${pager('/console/suppressions', { ...p, total: list.total }, { q: search, reason })}`,
    });
  });

  route(r, 'post', '/suppressions', async (ctx) => {
    const s = await suppressions.add(scopeOf(ctx).teamId, parseWith(suppressionAddSchema, { email: field(ctx, 'email'), reason: 'MANUAL', source: 'console' }));
    redirectWithFlash(ctx, secure, '/console/suppressions', { kind: 'ok', text: `${s.email} is suppressed.` });
  });

  route(r, 'post', '/suppressions/remove', async (ctx) => {
    const res = await suppressions.remove(scopeOf(ctx).teamId, field(ctx, 'email'));
    redirectWithFlash(ctx, secure, '/console/suppressions', { kind: 'ok', text: `${res.email} may be sent to again.` });
  });
}
