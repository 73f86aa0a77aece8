import type Router from '@koa/router';
import { badRequest } from '../../core/errors.js';
import { route, type PageDeps } from '../console-deps.js';
import { field } from '../console-context.js';
import { isSecure, redirectWithFlash } from '../console-responses.js';
import { html, seg } from '../html.js';
import { actionButton, badge, renderPage, section, table, time } from '../layout.js';
import { operatorOnly } from './operator-teams-page.js';
import type { QueuedDelivery } from '../queue-source.js';

// Operator: the outbound queue by destination. Everything it shows or does goes through
// QueueSource, today the delivery service (the same calls as `posthorn queue`); a richer
// operator queue service can be passed in app.ts without touching the rest of the console.

const LISTED = 500;

export function operatorQueuePage(r: Router, d: PageDeps): void {
  const secure = isSecure(d.publicUrl);

  route(r, 'get', '/operator/queue', operatorOnly(async (ctx) => {
    const [counts, queued] = await Promise.all([d.queue.countsByState(), d.queue.listQueued(LISTED)]);
    const byDomain = new Map<string, QueuedDelivery[]>();
    for (const q of queued) byDomain.set(q.rcpt_domain, [...(byDomain.get(q.rcpt_domain) ?? []), q]);
    const destinations = [...byDomain.entries()].sort((a, b) => b[1].length - a[1].length);
    renderPage(ctx, d.assets, {
      title: 'Delivery queue',
      nav: 'operator-queue',
      body: html`${section('Deliveries by state', html`<ul class="counters">${counts.map((c) => html`<li><span class="n">${c.count}</span> ${c.state}</li>`)}</ul>`)}
${section('Waiting, by destination', html`<p class="hint">The ${LISTED} soonest due deliveries, grouped by the recipient's domain.</p>
${destinations.length ? destinations.map(([domain, list]) => html`<details class="destination"><summary><strong>${domain}</strong> · ${list.length} waiting · next ${time(new Date(list[0]!.next_attempt_at).toISOString())}${list[0]!.last_response ? html` · last reply: <code class="reply-inline">${list[0]!.last_response}</code>` : ''}</summary>
${table(`Deliveries to ${domain}`, ['Recipient', 'Team', 'Attempts', 'Next attempt', 'Last reply', ''], list.map((q) => [
  html`<a href="/console/emails/${seg(q.email_id)}">${q.recipient}</a>`,
  String(q.team_id),
  String(q.attempts),
  time(new Date(q.next_attempt_at).toISOString()),
  q.last_response ? html`<code class="reply-inline">${q.last_response}</code>` : badge('queued'),
  html`${actionButton(ctx, '/console/operator/queue/retry', 'Retry now', { fields: { deliveryId: String(q.id) } })}${actionButton(ctx, '/console/operator/queue/purge', 'Give up', { kind: 'danger', fields: { deliveryId: String(q.id) }, confirm: `Give up on ${q.recipient}? It is recorded as failed.` })}`,
]))}</details>`) : html`<p class="empty">Nothing is waiting.</p>`}`)}`,
    });
  }));

  const idOf = (raw: string) => {
    if (!/^\d+$/.test(raw)) throw badRequest('deliveryId: must be a delivery id');
    return Number(raw);
  };

  route(r, 'post', '/operator/queue/retry', operatorOnly(async (ctx) => {
    const id = idOf(field(ctx, 'deliveryId'));
    if (!(await d.queue.retryNow(id))) throw badRequest(`delivery ${id} is not queued any more`);
    redirectWithFlash(ctx, secure, '/console/operator/queue', { kind: 'ok', text: `Delivery ${id} is due now.` });
  }));

  route(r, 'post', '/operator/queue/purge', operatorOnly(async (ctx) => {
    const id = idOf(field(ctx, 'deliveryId'));
    await d.queue.purge(id);
    redirectWithFlash(ctx, secure, '/console/operator/queue', { kind: 'ok', text: `Delivery ${id} was given up and recorded as failed.` });
  }));
}
