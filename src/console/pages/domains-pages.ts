import type Router from '@koa/router';
import { badRequest } from '../../core/errors.js';
import { route, type PageDeps } from '../console-deps.js';
import { field, intIdOf, scopeOf, type ConsoleContext } from '../console-context.js';
import { isSecure, redirectWithFlash } from '../console-responses.js';
import { html, seg } from '../html.js';
import { actionButton, badge, checkbox, csrfField, definitionList, input, renderPage, section, select, table, time } from '../layout.js';

// Domains: add one, publish the records it asks for (copy buttons, each record's status),
// verify now, and the tracking, TLS and receiving settings.

/** A value with its copy button; names stay on one line, long values (DKIM keys) wrap anywhere. */
const copyable = (id: string, value: string, kind: 'name' | 'value') =>
  html`<code class="${kind === 'name' ? 'nowrap' : 'wrap'}" id="${id}">${value}</code> <button type="button" class="copy btn small" data-copy="${id}" aria-label="Copy ${kind === 'name' ? 'name' : 'value'}">Copy</button>`;

export function domainsPages(r: Router, d: PageDeps): void {
  const secure = isSecure(d.publicUrl);
  const { domains } = d.services;
  const idOf = (ctx: ConsoleContext) => intIdOf(ctx, 'domain');

  route(r, 'get', '/domains', async (ctx) => {
    const list = await domains.list(scopeOf(ctx));
    renderPage(ctx, d.assets, {
      title: 'Domains',
      nav: 'domains',
      body: html`${section('Add a domain', html`<form method="post" action="/console/domains" class="row-form">${csrfField(ctx)}
${input({ name: 'name', label: 'Domain name', required: true, placeholder: 'example.com', hint: 'The domain you send from (or a subdomain of it). You will publish a few DNS records for it next.' })}
<button type="submit" class="btn primary">Add domain</button></form>`)}
${table('Domains', ['Domain', 'Status', 'Tracking', 'Added'], list.map((x) => [
  html`<a href="/console/domains/${seg(x.id)}">${x.name}</a>`,
  badge(x.status),
  [x.openTracking ? 'opens' : '', x.clickTracking ? 'clicks' : ''].filter(Boolean).join(', ') || 'off',
  time(x.createdAt),
]), 'No domains yet.')}`,
    });
  });

  route(r, 'post', '/domains', async (ctx) => {
    const created = await domains.create(scopeOf(ctx), { name: field(ctx, 'name'), region: 'local' });
    redirectWithFlash(ctx, secure, `/console/domains/${seg(created.id)}`, { kind: 'ok', text: `Domain ${created.name} added. Publish the records below, then verify.` });
  });

  route(r, 'get', '/domains/:id', async (ctx) => {
    const x = await domains.get(scopeOf(ctx), idOf(ctx));
    const records = x.dnsRecords.map((rec, i) => [
      rec.type,
      copyable(`rec-${i}-name`, rec.name, 'name'),
      copyable(`rec-${i}-value`, rec.value, 'value'),
      rec.priority ?? '—',
      html`${badge(rec.status)}${rec.recommended ? html` <span class="muted">recommended</span>` : ''}`,
    ]);
    renderPage(ctx, d.assets, {
      title: x.name,
      nav: 'domains',
      crumbs: [['Domains', '/console/domains']],
      actions: actionButton(ctx, `/console/domains/${seg(x.id)}/verify`, 'Verify now', { kind: 'primary' }),
      body: html`${section('Status', definitionList([
        ['Status', badge(x.status)],
        ['Last checked', time(x.lastCheckedTime)],
        ...(x.verificationError ? ([['What is missing', x.verificationError]] as [string, string][]) : []),
        ...(x.errorMessage ? ([['Note', x.errorMessage]] as [string, string][]) : []),
      ]))}
${section('DNS records', html`<p class="hint">Publish these at your DNS provider. TTL: automatic. Posthorn checks them again on its own; "Verify now" checks at once.</p>
${table('DNS records to publish', ['Type', 'Name', 'Value', 'Priority', 'Status'], records)}`)}
${section('Settings', html`<form method="post" action="/console/domains/${seg(x.id)}/settings" class="stack">${csrfField(ctx)}
${checkbox({ name: 'openTracking', label: 'Track opens', checked: x.openTracking, hint: 'Adds a tracking pixel to HTML mail.' })}
${checkbox({ name: 'clickTracking', label: 'Track clicks', checked: x.clickTracking, hint: 'Rewrites links through this server (signed, never an open redirect).' })}
${input({ name: 'trackingDomain', label: 'Tracking domain', value: x.trackingDomain ?? '', hint: `A subdomain of ${x.name} (for example "track") pointing at this server with a CNAME; empty for none.` })}
${select({ name: 'tlsPolicy', label: 'TLS when delivering', value: x.tlsPolicy, options: [['OPPORTUNISTIC', 'Opportunistic: encrypt when the receiver offers it'], ['ENFORCED', 'Enforced: never deliver in plaintext']] })}
${checkbox({ name: 'receiving', label: 'Receive mail for this domain', checked: x.receiving, hint: 'Needs a verified domain and an MX record pointing here.' })}
<button type="submit" class="btn primary">Save settings</button></form>`)}
${section('Delete', html`<p>Deleting the domain stops mail from it at once, and deletes the API keys bound to it.</p>${actionButton(ctx, `/console/domains/${seg(x.id)}/delete`, 'Delete domain', { kind: 'danger', confirm: `Delete ${x.name}? Mail from it will be refused, and the API keys bound to it are deleted.` })}`)}`,
    });
  });

  route(r, 'post', '/domains/:id/verify', async (ctx) => {
    const res = await domains.verify(scopeOf(ctx), idOf(ctx));
    redirectWithFlash(ctx, secure, `/console/domains/${seg(res.domain.id)}`, { kind: res.domain.status === 'SUCCESS' ? 'ok' : 'error', text: res.message });
  });

  route(r, 'post', '/domains/:id/settings', async (ctx) => {
    const f = ctx.state.console.form;
    const tracking = field(ctx, 'trackingDomain');
    const current = await domains.get(scopeOf(ctx), idOf(ctx));
    // The form's two choices (any case); another value is refused, never read as the weaker one.
    const tls = field(ctx, 'tlsPolicy').toUpperCase();
    if (tls !== 'OPPORTUNISTIC' && tls !== 'ENFORCED') throw badRequest('tlsPolicy: must be OPPORTUNISTIC or ENFORCED');
    await domains.update(scopeOf(ctx), idOf(ctx), {
      openTracking: f.has('openTracking'),
      clickTracking: f.has('clickTracking'),
      trackingDomain: tracking === '' ? null : tracking,
      tlsPolicy: tls,
      // Only sent when it changes, so saving other settings of an unverified domain works.
      ...(f.has('receiving') !== current.receiving ? { receiving: f.has('receiving') } : {}),
    });
    redirectWithFlash(ctx, secure, `/console/domains/${seg(idOf(ctx))}`, { kind: 'ok', text: 'Settings saved.' });
  });

  route(r, 'post', '/domains/:id/delete', async (ctx) => {
    await domains.remove(scopeOf(ctx), idOf(ctx));
    redirectWithFlash(ctx, secure, '/console/domains', { kind: 'ok', text: 'Domain deleted.' });
  });
}
