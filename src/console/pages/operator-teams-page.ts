import type Router from '@koa/router';
import { notFound } from '../../core/errors.js';
import { route, type PageDeps } from '../console-deps.js';
import { field, intIdOf } from '../console-context.js';
import { isSecure, redirectWithFlash } from '../console-responses.js';
import { html, seg } from '../html.js';
import { csrfField, input, renderPage, section, table, time } from '../layout.js';
import { operatorActor, operatorOnly } from '../operator-access.js';

// Operator: the teams of this server (list, create, rename, rate limit), through core's team
// service, as `posthorn teams` does; every change is written to the operator audit log with the
// same actions as the operator API's (team.create, team.update), in the change's transaction.

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
    const name = field(ctx, 'name');
    const limit = rateLimitOf(field(ctx, 'rateLimit'));
    const id = await teams.create(name, limit, operatorActor(ctx));
    redirectWithFlash(ctx, secure, '/console/operator/teams', { kind: 'ok', text: `Team ${id} created.` });
  }));

  route(r, 'post', '/operator/teams/:id', operatorOnly(async (ctx) => {
    const id = intIdOf(ctx, 'team');
    const change = { name: field(ctx, 'name'), rateLimit: rateLimitOf(field(ctx, 'rateLimit')) };
    const updated = await teams.update(id, change, operatorActor(ctx));
    if (!updated) throw notFound(`team ${id} not found`);
    redirectWithFlash(ctx, secure, '/console/operator/teams', { kind: 'ok', text: `Team ${id} saved.` });
  }));
}
