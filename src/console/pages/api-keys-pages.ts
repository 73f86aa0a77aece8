import type Router from '@koa/router';
import { badRequest } from '../../core/errors.js';
import { isIntId } from '../../core/int-id.js';
import { route, type PageDeps } from '../console-deps.js';
import { field, intIdOf, scopeOf, type ConsoleContext } from '../console-context.js';
import { isSecure, redirectWithFlash } from '../console-responses.js';
import { html, seg, type HtmlValue } from '../html.js';
import { actionButton, csrfField, input, renderPage, section, select, table, time } from '../layout.js';

// API keys: create (the key is shown once, on the answer to the POST, never stored in a
// cookie or a URL), list, revoke.

/**
 * The form's choices, exactly: a value it does not offer is refused, never read as the widest
 * key (FULL, every domain). No permission at all is FULL, as the API's default.
 */
function permissionOf(ctx: ConsoleContext): 'FULL' | 'SENDING' {
  const raw = ctx.state.console.form.get('permission') ?? '';
  if (raw === '' || raw === 'FULL' || raw === 'SENDING') return raw === 'SENDING' ? 'SENDING' : 'FULL';
  throw badRequest('permission: must be FULL or SENDING');
}

/** '' (or no field) is every domain; else one domain's id, which core checks is the team's. */
function domainIdOf(ctx: ConsoleContext): number | null {
  const raw = ctx.state.console.form.get('domainId') ?? '';
  if (raw === '') return null;
  const id = /^\d{1,10}$/.test(raw) ? Number(raw) : 0;
  if (!isIntId(id)) throw badRequest(`domainId: "${raw}" is not a domain of this team`);
  return id;
}

export function apiKeysPages(r: Router, d: PageDeps): void {
  const secure = isSecure(d.publicUrl);
  const { apiKeys, domains } = d.services;

  async function page(ctx: ConsoleContext, created?: HtmlValue): Promise<void> {
    const scope = scopeOf(ctx);
    const [keys, teamDomains] = await Promise.all([apiKeys.list(scope.teamId), domains.list(scope)]);
    const names = new Map(teamDomains.map((x) => [x.id, x.name]));
    renderPage(ctx, d.assets, {
      title: 'API keys',
      nav: 'api-keys',
      body: html`${created ?? ''}${section('Create a key', html`<form method="post" action="/console/api-keys" class="stack">${csrfField(ctx)}
${input({ name: 'name', label: 'Name', required: true, hint: 'To recognise the key later, e.g. "web app".' })}
${select({ name: 'permission', label: 'Permission', options: [['FULL', 'Full access'], ['SENDING', 'Sending only (email endpoints)']] })}
${select({ name: 'domainId', label: 'Domain', options: [['', 'Every domain'], ...teamDomains.map((x) => [String(x.id), `Only ${x.name}`] as const)] })}
<button type="submit" class="btn primary">Create key</button></form>`)}
${table('API keys', ['Name', 'Key', 'Permission', 'Domain', 'Last used', 'Created', ''], keys.map((k) => [
  k.name,
  html`<code>${k.partialKey}</code>`,
  k.permission,
  k.domainId === null ? 'every domain' : (names.get(k.domainId) ?? `#${k.domainId}`),
  time(k.lastUsed),
  time(k.createdAt),
  actionButton(ctx, `/console/api-keys/${seg(k.id)}/revoke`, 'Revoke', { kind: 'danger', confirm: `Revoke the key "${k.name}"? Requests with it fail at once.` }),
]), 'No API keys yet.')}`,
    });
  }

  route(r, 'get', '/api-keys', (ctx) => page(ctx));

  route(r, 'post', '/api-keys', async (ctx) => {
    const key = await apiKeys.create(scopeOf(ctx).teamId, { name: field(ctx, 'name'), permission: permissionOf(ctx), domainId: domainIdOf(ctx) });
    await page(
      ctx,
      html`<section class="card secret" aria-labelledby="new-key"><h2 id="new-key">Your new key "${key.name}"</h2>
<p><strong>Copy it now: it is shown only this once.</strong> Posthorn keeps only a hash of it.</p>
<p><code class="wrap" id="new-key-value">${key.token}</code> <button type="button" class="copy btn small" data-copy="new-key-value">Copy</button></p></section>`,
    );
  });

  route(r, 'post', '/api-keys/:id/revoke', async (ctx) => {
    await apiKeys.revoke(intIdOf(ctx, 'API key'), scopeOf(ctx).teamId);
    redirectWithFlash(ctx, secure, '/console/api-keys', { kind: 'ok', text: 'The key was revoked.' });
  });
}
