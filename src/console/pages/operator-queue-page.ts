import type Router from '@koa/router';
import { badRequest } from '../../core/errors.js';
import { parseSelector, type SuspensionView } from '../../core/queue/queue-service.js';
import { route, type PageDeps } from '../console-deps.js';
import { field, type ConsoleContext } from '../console-context.js';
import { backTo, isSecure, redirectWithFlash } from '../console-responses.js';
import { html, queryString, seg, type HtmlValue } from '../html.js';
import { actionButton, badge, csrfField, definitionList, input, renderPage, section, table, time } from '../layout.js';
import { operatorActor, operatorOnly } from '../operator-access.js';

// Operator: the outbound queue, through core's queue service (the operator API's and
// `posthorn queue`'s): totals by state, one row per destination, active suspensions; suspend,
// resume, retry and bounce a destination; retry or give up one delivery. The service writes
// every change to the audit log, naming the console user.

const PAGE_SIZE = 50;
const QUEUE = '/console/operator/queue';
const destinationPath = (destination: string) => `${QUEUE}/destinations/${seg(destination)}`;

interface Reply {
  code: number | null;
  text: string;
  mxHost: string | null;
}
const reply = (r: Reply | null): HtmlValue => (r ? html`<code class="reply-inline">${r.code === null || r.text.startsWith(String(r.code)) ? r.text : `${r.code} ${r.text}`}</code>${r.mxHost ? html` <span class="muted">from ${r.mxHost}</span>` : ''}` : html`<span class="muted">none yet</span>`);

/** What a suspension holds, in words. */
function heldBy(s: SuspensionView): HtmlValue {
  const parts: HtmlValue[] = [];
  if (s.destination) parts.push(html`<a href="${destinationPath(s.destination)}">${s.destination}</a>`);
  if (s.teamId !== null) parts.push(`team ${s.teamId}`);
  if (s.campaignId) parts.push(`campaign ${s.campaignId}`);
  return html`${parts.map((p, i) => html`${i ? ', ' : ''}${p}`)}`;
}

/** The destination in the path, in its canonical form; 400 for a name that is not a domain. */
const destinationOf = (ctx: ConsoleContext) => parseSelector({ destination: ctx.params.destination! }).destination!;

function minutesOf(raw: string): number {
  if (!/^\d+(\.\d+)?$/.test(raw)) throw badRequest('minutes: must be a number of minutes');
  return Number(raw);
}

function suspendForm(ctx: ConsoleContext, destination?: string): HtmlValue {
  return html`<form method="post" action="${QUEUE}/suspensions" class="row-form">${csrfField(ctx)}
${destination === undefined ? input({ name: 'destination', label: 'Destination domain', required: true, placeholder: 'example.com' }) : html`<input type="hidden" name="destination" value="${destination}">`}
${input({ name: 'minutes', label: 'Minutes', type: 'number', min: 1, max: 43_200, value: 60, required: true })}
${input({ name: 'reason', id: 'f-suspend-reason', label: 'Reason', required: true, hint: 'Shown in the queue and written to the audit log.' })}
<button type="submit" class="btn primary">Suspend</button></form>`;
}

function suspensionsTable(ctx: ConsoleContext, list: SuspensionView[]): HtmlValue {
  return table(
    'Active suspensions',
    ['Holds', 'Reason', 'Until', 'By', ''],
    list.map((s) => [
      heldBy(s),
      s.reason,
      time(s.until),
      html`${s.createdBy}<br><span class="muted">${time(s.createdAt)}</span>`,
      actionButton(ctx, `${QUEUE}/suspensions/${seg(s.id)}/resume`, 'Resume', { confirm: 'End this suspension now? The mail it holds is due at once.' }),
    ]),
    'No suspension is active.',
  );
}

export function operatorQueuePage(r: Router, d: PageDeps): void {
  const secure = isSecure(d.publicUrl);
  const { queue } = d.services;
  const done = (ctx: ConsoleContext, to: string, text: string) => redirectWithFlash(ctx, secure, to, { kind: 'ok', text });

  route(r, 'get', '/operator/queue', operatorOnly(async (ctx) => {
    const { totals, destinations, suspensions } = await queue.summary();
    const counters: [string, number][] = [['ready', totals.ready], ['scheduled', totals.scheduled], ['deferred', totals.deferred], ['in flight', totals.inFlight], ['suspended', totals.suspended]];
    renderPage(ctx, d.assets, {
      title: 'Delivery queue',
      nav: 'operator-queue',
      body: html`${section('Queued deliveries by state', html`<ul class="counters">${counters.map(([name, n]) => html`<li><span class="n">${n}</span> ${name}</li>`)}</ul>`)}
${section('Destinations', table(
  'Queued mail by destination',
  ['Destination', 'Queued', 'In flight', 'Deferred', 'Suspended', 'Oldest due', 'Last reply', 'Connections', 'Suspension'],
  destinations.map((x) => [
    html`<a class="host" href="${destinationPath(x.destination)}"><strong>${x.destination}</strong></a>`,
    String(x.queued),
    String(x.inFlight),
    String(x.deferred),
    String(x.suspended),
    time(x.oldestDue),
    reply(x.lastReply),
    String(x.openConnections),
    x.suspension ? html`${badge('SUSPENDED')} until ${time(x.suspension.until)}<br><span class="muted">${x.suspension.reason}</span>` : html`<span class="muted">—</span>`,
  ]),
  'Nothing is queued.',
))}
${section('Active suspensions', suspensionsTable(ctx, suspensions))}
${section('Suspend a destination', html`<p class="hint">Mail to it is held, not attempted (no attempt is counted and no delay notice is sent), until the time is up or the suspension is resumed.</p>${suspendForm(ctx)}`)}`,
    });
  }));

  route(r, 'get', '/operator/queue/destinations/:destination', operatorOnly(async (ctx) => {
    const cursor = typeof ctx.query.cursor === 'string' ? ctx.query.cursor : undefined;
    const name = destinationOf(ctx);
    const [{ messages, nextCursor }, summary] = await Promise.all([queue.messages({ destination: name }, PAGE_SIZE, cursor), queue.summary()]);
    const row = summary.destinations.find((x) => x.destination === name);
    const suspensions = summary.suspensions.filter((s) => s.destination === name);
    const here = destinationPath(name);
    renderPage(ctx, d.assets, {
      title: name,
      nav: 'operator-queue',
      crumbs: [['Queue', QUEUE]],
      body: html`${section('Queued', row
        ? definitionList([
            ['Queued', String(row.queued)],
            ['In flight', String(row.inFlight)],
            ['Deferred', String(row.deferred)],
            ['Suspended', String(row.suspended)],
            ['Oldest due', time(row.oldestDue)],
            ['Open connections', String(row.openConnections)],
            ['Last reply', reply(row.lastReply)],
          ])
        : html`<p class="empty">Nothing is queued for ${name}.</p>`)}
${section('Suspension', suspensions.length ? suspensionsTable(ctx, suspensions) : html`<p class="hint">Hold mail to ${name} without attempting it.</p>${suspendForm(ctx, name)}`)}
${row ? section('All queued mail to this destination', html`<div class="row-form">${actionButton(ctx, `${here}/retry`, 'Retry all now', { kind: 'primary' })}</div>
<form method="post" action="${here}/bounce" class="row-form" data-confirm="${`Bounce all ${row.queued - row.inFlight} queued deliveries to ${name}? Each recipient is recorded as failed, with its webhook. This cannot be undone.`}">${csrfField(ctx)}
${input({ name: 'reason', id: 'f-bounce-reason', label: 'Reason for the bounce', required: true, hint: 'Recorded on each delivery as "bounced by the operator: <reason>". Mail on the wire is left alone.' })}
<button type="submit" class="btn danger">Bounce all</button></form>`) : ''}
${section('Deliveries', html`${table(
  `Queued deliveries to ${name}`,
  ['Delivery', 'Recipient', 'Team', 'State', 'Attempts', 'Next attempt', 'Last reply', ''],
  messages.map((m) => [
    String(m.deliveryId),
    m.teamId === ctx.state.console.user.teamId ? html`<a class="host" href="/console/emails/${seg(m.emailId)}">${m.recipient}</a>` : html`<span class="host">${m.recipient}</span>`,
    String(m.teamId),
    badge(m.state),
    String(m.attempts),
    time(m.nextAttemptAt),
    reply(m.lastReply),
    html`${actionButton(ctx, `${QUEUE}/deliveries/${seg(m.deliveryId)}/retry`, 'Retry now')}${actionButton(ctx, `${QUEUE}/deliveries/${seg(m.deliveryId)}/give-up`, 'Give up', { kind: 'danger', confirm: `Give up on ${m.recipient}? It is recorded as failed.` })}`,
  ]),
  'Nothing is queued for this destination.',
)}
${cursor || nextCursor ? html`<nav class="pager" aria-label="Pages">${cursor ? html`<a href="${here}">← First page</a>` : ''}${nextCursor ? html`<a rel="next" href="${here}${queryString({ cursor: nextCursor })}">Next →</a>` : ''}</nav>` : ''}`)}`,
    });
  }));

  route(r, 'post', '/operator/queue/suspensions', operatorOnly(async (ctx) => {
    const s = await queue.suspend(operatorActor(ctx), { destination: field(ctx, 'destination'), minutes: minutesOf(field(ctx, 'minutes')), reason: field(ctx, 'reason') });
    done(ctx, destinationPath(s.destination!), `${s.destination} is suspended until ${s.until.slice(0, 16).replace('T', ' ')} UTC (${s.parked} queued deliveries held now).`);
  }));

  route(r, 'post', '/operator/queue/suspensions/:id/resume', operatorOnly(async (ctx) => {
    const s = await queue.resume(operatorActor(ctx), ctx.params.id!);
    done(ctx, backTo(ctx, QUEUE), `The suspension of ${s.destination ?? 'that mail'} has ended; the mail it held is due now.`);
  }));

  route(r, 'post', '/operator/queue/destinations/:destination/retry', operatorOnly(async (ctx) => {
    const destination = destinationOf(ctx);
    const { retried, held } = await queue.retry(operatorActor(ctx), { destination });
    done(ctx, destinationPath(destination), `${retried - held} queued deliveries to ${destination} are due now.${held ? ` ${held} more stay held by a suspension until it ends or is resumed.` : ''}`);
  }));

  route(r, 'post', '/operator/queue/destinations/:destination/bounce', operatorOnly(async (ctx) => {
    const destination = destinationOf(ctx);
    const { bounced } = await queue.bounce(operatorActor(ctx), { destination, reason: field(ctx, 'reason') });
    done(ctx, destinationPath(destination), `${bounced} queued deliveries to ${destination} were bounced and recorded as failed.`);
  }));

  const deliveryIdOf = (ctx: ConsoleContext) => {
    const raw = ctx.params.id!;
    if (!/^\d{1,15}$/.test(raw)) throw badRequest('deliveryId: must be a delivery id');
    return Number(raw);
  };

  route(r, 'post', '/operator/queue/deliveries/:id/retry', operatorOnly(async (ctx) => {
    const id = deliveryIdOf(ctx);
    const r = await queue.retryDelivery(operatorActor(ctx), id);
    done(ctx, backTo(ctx, QUEUE), r.heldBy ? `Delivery ${id} is held by suspension ${r.heldBy.id} until ${r.heldBy.until}: it is attempted when that ends or is resumed.` : `Delivery ${id} is due now.`);
  }));

  route(r, 'post', '/operator/queue/deliveries/:id/give-up', operatorOnly(async (ctx) => {
    const id = deliveryIdOf(ctx);
    await queue.giveUp(operatorActor(ctx), id);
    done(ctx, backTo(ctx, QUEUE), `Delivery ${id} was given up and recorded as failed.`);
  }));
}
