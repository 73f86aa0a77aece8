import type Router from '@koa/router';
import { WEBHOOK_EVENT_TYPES } from '../../core/webhooks/webhook-endpoints-service.js';
import { webhookCreateSchema, webhookPatchSchema } from '../../core/webhooks/webhook-schema.js';
import { route, type PageDeps } from '../console-deps.js';
import { field, parseWith, scopeOf, type ConsoleContext } from '../console-context.js';
import { isSecure, redirectWithFlash } from '../console-responses.js';
import { html, queryString, seg, type SafeHtml } from '../html.js';
import { actionButton, badge, csrfField, definitionList, input, renderPage, section, table, time } from '../layout.js';

// Webhooks: endpoints (the signing secret is shown once, on creation and rotation), a test
// event, and the log of attempts with the exact request and the response.

function pretty(body: string | null): string {
  if (body === null) return '';
  try {
    return JSON.stringify(JSON.parse(body), null, 2);
  } catch {
    return body;
  }
}

function secretBox(title: string, secret: string): SafeHtml {
  return html`<section class="card secret" aria-labelledby="secret-title"><h2 id="secret-title">${title}</h2>
<p><strong>Copy the signing secret now: it is shown only this once.</strong> Verify each delivery's <code>X-Service-Signature</code> with it.</p>
<p><code class="wrap" id="secret-value">${secret}</code> <button type="button" class="copy btn small" data-copy="secret-value">Copy</button></p></section>`;
}

export function webhooksPages(r: Router, d: PageDeps): void {
  const secure = isSecure(d.publicUrl);
  const { webhooks } = d.services;

  async function listPage(ctx: ConsoleContext, created?: SafeHtml): Promise<void> {
    const list = await webhooks.list(scopeOf(ctx), 0, 100);
    renderPage(ctx, d.assets, {
      title: 'Webhooks',
      nav: 'webhooks',
      body: html`${created ?? ''}${section('Add an endpoint', html`<form method="post" action="/console/webhooks" class="stack">${csrfField(ctx)}
${input({ name: 'url', label: 'URL', type: 'url', required: true, placeholder: 'https://example.com/posthorn-events' })}
${input({ name: 'description', label: 'Description' })}
<fieldset><legend>Events (none checked: every event)</legend><div class="checks">${WEBHOOK_EVENT_TYPES.map((t, i) => html`<span class="check"><input type="checkbox" id="ev-${i}" name="eventTypes" value="${t}"><label for="ev-${i}">${t}</label></span>`)}</div></fieldset>
<button type="submit" class="btn primary">Add endpoint</button></form>`)}
${table('Webhook endpoints', ['URL', 'Status', 'Events', 'Added'], list.items.map((w) => [
  html`<a href="/console/webhooks/${seg(w.id)}">${w.url}</a>${w.description ? html`<br><span class="muted">${w.description}</span>` : ''}`,
  badge(w.status),
  w.eventTypes.length ? w.eventTypes.join(', ') : 'every event',
  time(w.createdAt),
]), 'No endpoints yet.')}`,
    });
  }

  route(r, 'get', '/webhooks', (ctx) => listPage(ctx));

  route(r, 'post', '/webhooks', async (ctx) => {
    const body = parseWith(webhookCreateSchema, {
      url: field(ctx, 'url'),
      eventTypes: ctx.state.console.form.getAll('eventTypes'),
      description: field(ctx, 'description') || null,
    });
    const w = await webhooks.create(scopeOf(ctx), body);
    ctx.set('Cache-Control', 'no-store');
    await listPage(ctx, secretBox(`Endpoint ${w.url} added`, w.secret));
  });

  async function detailPage(ctx: ConsoleContext, secret?: SafeHtml): Promise<void> {
    const w = await webhooks.get(scopeOf(ctx), ctx.params.id!);
    const cursor = typeof ctx.query.cursor === 'string' ? ctx.query.cursor : undefined;
    const watch = ctx.query.watch === '1';
    const { attempts, nextCursor } = await webhooks.listAttempts(scopeOf(ctx), w.id, 25, cursor);
    const base = `/console/webhooks/${seg(w.id)}`;
    renderPage(ctx, d.assets, {
      title: w.url,
      nav: 'webhooks',
      crumbs: [['Webhooks', '/console/webhooks']],
      actions: html`${actionButton(ctx, `${base}/test`, 'Send a test event', { kind: 'primary' })}${w.status === 'ACTIVE' ? actionButton(ctx, `${base}/status`, 'Pause', { fields: { status: 'PAUSED' }, confirm: 'Pause this endpoint? It gets no new events and its pending deliveries are discarded.' }) : actionButton(ctx, `${base}/status`, 'Re-enable', { fields: { status: 'ACTIVE' } })}${actionButton(ctx, `${base}/rotate`, 'New secret', { confirm: 'Replace the signing secret? Deliveries are signed with the new one at once.' })}`,
      body: html`${secret ?? ''}${section('Endpoint', definitionList([
        ['URL', w.url],
        ['Status', html`${badge(w.status)}${w.disabledAt ? html` <span class="muted">since ${time(w.disabledAt)}</span>` : ''}${w.status === 'AUTO_DISABLED' ? html` <span class="muted">its events failed every attempt too many times in a row; send a test event, then re-enable it</span>` : w.consecutiveFailures ? html` <span class="muted">${w.consecutiveFailures} events in a row failed every attempt</span>` : ''}`],
        ['Events', w.eventTypes.length ? w.eventTypes.join(', ') : 'every event'],
        ['Description', w.description ?? '—'],
        ['Added', time(w.createdAt)],
      ]))}
<div id="live-attempts"${watch ? html` data-live="1500"` : ''}>${section('Attempts', html`${attempts.length ? html`<ol class="attempts">${attempts.map((a) => html`<li><details><summary>${badge(a.status)} ${a.eventType} · attempt ${a.attempt} of ${a.maxAttempts} · ${a.response ? html`HTTP ${a.response.status}` : html`${a.error ?? 'no response'}`}${a.status === 'DISCARDED' ? '' : html` · ${a.durationMs} ms`} · ${time(a.createdAt)}${a.nextAttemptAt ? html` · next ${time(a.nextAttemptAt)}` : ''}</summary>
<div class="grid-2"><div><h3>${a.status === 'DISCARDED' ? 'Not sent' : 'Request'}</h3><pre class="code">POST ${a.request.url}
${Object.entries(a.request.headers).map(([k, v]) => `${k}: ${v}\n`).join('')}
${pretty(a.request.body)}</pre></div>
<div><h3>Response</h3>${a.response ? html`<pre class="code">HTTP ${a.response.status}

${pretty(a.response.body)}</pre>` : html`<p>${a.error ?? 'No response.'}</p>`}</div></div></details></li>`)}</ol>` : html`<p class="empty">No attempts yet. Send a test event to see one.</p>`}
${nextCursor ? html`<p><a href="${base}${queryString({ cursor: nextCursor })}">Older attempts →</a></p>` : ''}`)}</div>
${section('Delete', actionButton(ctx, `${base}/delete`, 'Delete endpoint', { kind: 'danger', confirm: 'Delete this endpoint? Its pending deliveries are dropped.' }))}`,
    });
  }

  route(r, 'get', '/webhooks/:id', (ctx) => detailPage(ctx));

  route(r, 'post', '/webhooks/:id/test', async (ctx) => {
    await webhooks.sendTest(scopeOf(ctx), ctx.params.id!);
    redirectWithFlash(ctx, secure, `/console/webhooks/${seg(ctx.params.id!)}?watch=1`, { kind: 'ok', text: 'A test event was queued; its attempt appears below.' });
  });

  route(r, 'post', '/webhooks/:id/status', async (ctx) => {
    const { status } = parseWith(webhookPatchSchema.pick({ status: true }).required(), { status: field(ctx, 'status') });
    const w = await webhooks.update(scopeOf(ctx), ctx.params.id!, { status });
    redirectWithFlash(ctx, secure, `/console/webhooks/${seg(w.id)}`, { kind: 'ok', text: w.status === 'ACTIVE' ? 'Endpoint re-enabled.' : 'Endpoint paused; its pending deliveries were discarded.' });
  });

  route(r, 'post', '/webhooks/:id/rotate', async (ctx) => {
    const w = await webhooks.update(scopeOf(ctx), ctx.params.id!, { rotateSecret: true });
    ctx.set('Cache-Control', 'no-store');
    await detailPage(ctx, secretBox('New signing secret', w.secret ?? ''));
  });

  route(r, 'post', '/webhooks/:id/delete', async (ctx) => {
    await webhooks.remove(scopeOf(ctx), ctx.params.id!);
    redirectWithFlash(ctx, secure, '/console/webhooks', { kind: 'ok', text: 'Endpoint deleted.' });
  });
}
