import type Router from '@koa/router';
import { forbidden, notFound } from '../../core/errors.js';
import { route, type Handler, type PageDeps } from '../console-deps.js';
import { field, type ConsoleContext } from '../console-context.js';
import { isSecure, redirectWithFlash } from '../console-responses.js';
import { html, seg } from '../html.js';
import { csrfField, input, renderPage, section, table, time } from '../layout.js';

// Operator: the teams of this server (list, create, rename, rate limit), through core's team
// service, as `posthorn teams` does.

/** Operator pages refuse team members. */
export function operatorOnly(handler: Handler): Handler {
  return async (ctx: ConsoleContext) => {
    if (!ctx.state.console.user.operator) throw forbidden('This page is for operators of this server.');
    return handler(ctx);
  };
}

function rateLimitOf(raw: string): number | null {
  if (raw === '' || raw === 'default') return null;
  return /^\d+$/.test(raw) ? Number(raw) : NaN;
}

export function operatorTeamsPage(r: Router, d: PageDeps): void {
  const secure = isSecure(d.publicUrl);
  const { teams } = d.services;

  route(r, 'get', '/operator/teams', operatorOnly(async (ctx) => {
    const [list, users] = await Promise.all([teams.list(), d.users.list()]);
    const members = (id: number) => users.filter((u) => u.teamId === id);
    renderPage(ctx, d.assets, {
      title: 'Teams',
      nav: 'operator-teams',
      body: html`${section('New team', html`<form method="post" action="/console/operator/teams" class="row-form">${csrfField(ctx)}
${input({ name: 'name', label: 'Name', required: true })}${input({ name: 'rateLimit', label: 'Requests per second', type: 'number', min: 1, hint: 'Empty: the server default.' })}
<button type="submit" class="btn primary">Create team</button></form>`)}
${table('Teams', ['Team', 'Console users', 'Rate limit', 'Created', 'Change'], list.map((t) => [
  html`<strong>${t.name}</strong> <span class="muted">#${t.id}</span>`,
  members(t.id).map((u) => `${u.email}${u.operator ? ' (operator)' : ''}`).join(', ') || html`<span class="muted">none</span>`,
  t.rateLimit === null ? 'default' : `${t.rateLimit}/s`,
  time(t.createdAt),
  html`<form method="post" action="/console/operator/teams/${seg(t.id)}" class="inline-edit">${csrfField(ctx)}
<label class="sr-only" for="name-${t.id}">Name of team ${t.id}</label><input id="name-${t.id}" name="name" value="${t.name}" required>
<label class="sr-only" for="rate-${t.id}">Rate limit of team ${t.id}</label><input id="rate-${t.id}" name="rateLimit" type="number" min="1" placeholder="default" value="${t.rateLimit ?? ''}">
<button type="submit" class="btn small secondary">Save</button></form>`,
]))}
<p class="hint">Console users are managed with <code>posthorn users</code> on the server.</p>`,
    });
  }));

  route(r, 'post', '/operator/teams', operatorOnly(async (ctx) => {
    const limit = rateLimitOf(field(ctx, 'rateLimit'));
    const id = await teams.create(field(ctx, 'name'), limit);
    redirectWithFlash(ctx, secure, '/console/operator/teams', { kind: 'ok', text: `Team ${id} created.` });
  }));

  route(r, 'post', '/operator/teams/:id', operatorOnly(async (ctx) => {
    const id = Number.parseInt(ctx.params.id!, 10) || 0;
    const updated = await teams.update(id, { name: field(ctx, 'name'), rateLimit: rateLimitOf(field(ctx, 'rateLimit')) });
    if (!updated) throw notFound(`team ${id} not found`);
    redirectWithFlash(ctx, secure, '/console/operator/teams', { kind: 'ok', text: `Team ${id} saved.` });
  }));
}
