import type Router from '@koa/router';
import { badRequest } from '../../core/errors.js';
import { route, type PageDeps } from '../console-deps.js';
import { field, scopeOf, sendContextOf, type ConsoleContext } from '../console-context.js';
import { isSecure, redirectWithFlash } from '../console-responses.js';
import { html, queryString, seg, type SafeHtml } from '../html.js';
import { actionButton, badge, csrfField, definitionList, input, pager, renderPage, section, select, table, textarea, time } from '../layout.js';
import { emailFrameCsp, setPageHeaders } from '../security-headers.js';
import { ListQuery } from '../list-filters.js';

// Emails: the list with the API's filters, a test send, and one email's story (events,
// recipients with their MX replies, the message as sent, rendered in a sandboxed frame).

/** Statuses after which nothing more happens on its own (opens and clicks aside). */
const SETTLED = new Set(['DELIVERED', 'BOUNCED', 'FAILED', 'COMPLAINED', 'SUPPRESSED', 'CANCELLED', 'REJECTED', 'RENDERING_FAILURE', 'OPENED', 'CLICKED']);

const list = (v: string | string[] | null | undefined) => (v === null || v === undefined ? [] : Array.isArray(v) ? v : [v]);

/** Why a hit was a machine's, in words (core/tracking/machine-hits.ts; docs/api.md, "Machine opens and clicks"). */
const MACHINE_REASONS: Record<string, string> = {
  network: 'from a listed network',
  scanner_user_agent: 'privacy proxy or scanner (user agent)',
  no_user_agent: 'no user agent',
  soon_after_delivery: 'seconds after delivery',
  link_burst: 'several links at once',
};

function eventDetail(data: Record<string, unknown> | null): SafeHtml {
  if (!data) return html``;
  const parts: SafeHtml[] = [];
  const str = (k: string) => (typeof data[k] === 'string' || typeof data[k] === 'number' ? String(data[k]) : undefined);
  if (data.machine === true) {
    const reason = str('machineReason');
    parts.push(html`<span><span class="badge muted">by a machine</span>${reason ? html` ${MACHINE_REASONS[reason] ?? reason}` : ''}</span>`);
  }
  if (str('recipient')) parts.push(html`<span>to <strong>${str('recipient')}</strong></span>`);
  if (str('mxHost')) parts.push(html`<span>via ${str('mxHost')}</span>`);
  if (str('smtpCode')) parts.push(html`<span>SMTP ${str('smtpCode')}</span>`);
  if (str('nextAttemptAt')) parts.push(html`<span>next attempt ${time(str('nextAttemptAt'))}</span>`);
  if (str('scheduledAt')) parts.push(html`<span>scheduled for ${time(str('scheduledAt'))}</span>`);
  const bounce = data.bounce as { type?: string; subType?: string } | undefined;
  if (bounce?.type) parts.push(html`<span>${bounce.type} bounce${bounce.subType ? ` (${bounce.subType})` : ''}</span>`);
  const reply = str('response') ?? (data.failed as { reason?: string } | undefined)?.reason ?? (data.suppressed as { reason?: string } | undefined)?.reason ?? str('error');
  const dropped = Array.isArray(data.suppressedRecipients) ? (data.suppressedRecipients as string[]).join(', ') : undefined;
  return html`<div class="event-meta">${parts}</div>${reply ? html`<pre class="reply">${reply}</pre>` : ''}${dropped ? html`<p class="hint">Suppressed and left out: ${dropped}</p>` : ''}`;
}

export function emailsPages(r: Router, d: PageDeps): void {
  const secure = isSecure(d.publicUrl);
  const { emails, domains, deliveries } = d.services;

  route(r, 'get', '/emails', async (ctx) => {
    const q = new ListQuery(ctx.querystring);
    const p = q.page();
    const teamDomains = await domains.list(scopeOf(ctx));
    const domainId = q.idOf('domainId', 'Domain', teamDomains);
    const tag = q.text('tag', 'Tag', 64);
    const since = q.date('since', 'Sent since');
    const until = q.date('until', 'Sent until');
    const result = await emails.list(sendContextOf(ctx), {
      offset: p.offset,
      limit: p.limit,
      domainIds: domainId ? [Number(domainId)] : undefined,
      tags: tag ? [tag] : undefined,
      startDate: since ? `${since}T00:00:00.000Z` : undefined,
      endDate: until ? `${until}T23:59:59.999Z` : undefined,
    });
    const rows = result.data ?? [];
    if (result.items) for await (const item of result.items) rows.push(item);
    // In sandbox mode a domain sends before it verifies, as emails.submit allows it.
    const sending = d.sandbox ? teamDomains : teamDomains.filter((x) => x.status === 'SUCCESS');
    const sendForm = sending.length
      ? html`<details class="card"${q.raw('compose') ? html` open` : ''}><summary>Send a test email</summary>
<form method="post" action="/console/emails/send" class="stack">${csrfField(ctx)}
${d.sandbox ? html`<p class="hint">Sandbox mode: the email goes to the capture mailbox on this server (<code>GET /v1/sandbox/messages</code>), not to the recipient.</p>` : ''}
<div class="row">${input({ name: 'fromLocal', label: 'From (name before @)', value: 'hello', required: true })}${select({ name: 'fromDomain', label: 'Domain', options: sending.map((x) => [x.name, `@${x.name}`] as const) })}</div>
${input({ name: 'to', label: 'To', type: 'email', required: true, autocomplete: 'email' })}
${input({ name: 'subject', label: 'Subject', required: true, value: 'A test from Posthorn' })}
${textarea({ name: 'text', label: 'Message', rows: 4, value: 'This is a test message sent from the Posthorn console.' })}
<button type="submit" class="btn primary">Send</button></form></details>`
      : html`<p class="hint">To send, first <a href="/console/domains">add and verify a domain</a>.</p>`;
    renderPage(ctx, d.assets, {
      title: 'Emails',
      nav: 'emails',
      problems: q.problems,
      body: html`${sendForm}
<form method="get" action="/console/emails" class="filters" role="search" aria-label="Filter emails">
${select({ name: 'domainId', label: 'Domain', value: domainId, options: [['', 'All domains'], ...teamDomains.map((x) => [String(x.id), x.name] as const)] })}
${input({ name: 'tag', label: 'Tag', value: tag })}${input({ name: 'since', label: 'Sent since', type: 'date', value: since })}${input({ name: 'until', label: 'Sent until', type: 'date', value: until })}
<button type="submit" class="btn secondary">Filter</button></form>
${table(
  'Emails',
  ['Subject', 'To', 'Status', 'Created'],
  rows.map((e) => [html`<a href="/console/emails/${seg(e.id)}">${e.subject || '(no subject)'}</a>`, list(e.to).join(', '), badge(e.latestStatus), time(e.createdAt)]),
  'No emails match.',
)}${pager('/console/emails', { ...p, total: result.count }, { domainId, tag, since, until })}`,
    });
  });

  route(r, 'post', '/emails/send', async (ctx) => {
    const local = field(ctx, 'fromLocal');
    const domain = field(ctx, 'fromDomain');
    if (!/^[A-Za-z0-9._%+-]{1,64}$/.test(local)) throw badRequest('From: the part before @ may use letters, digits and . _ % + -');
    const result = await emails.submit(sendContextOf(ctx), { from: `${local}@${domain}`, to: field(ctx, 'to'), subject: field(ctx, 'subject'), text: field(ctx, 'text') || undefined });
    redirectWithFlash(ctx, secure, `/console/emails/${seg(result.emailId)}`, { kind: 'ok', text: 'The email was accepted and queued.' });
  });

  type EmailDetail = Awaited<ReturnType<typeof emails.get>>;
  /** The email's own tracking choice, where it made one (the domain's switches decide the rest). */
  const trackingText = (e: EmailDetail): string => {
    if (e.openTracking !== null && e.openTracking === e.clickTracking) return `${e.openTracking ? 'on' : 'off'} for this email`;
    const parts = ([['opens', e.openTracking], ['clicks', e.clickTracking]] as const).filter(([, v]) => v !== null).map(([what, v]) => `${what} ${v ? 'on' : 'off'}`);
    return `${parts.join(', ')} for this email`;
  };
  async function detail(ctx: ConsoleContext, e: EmailDetail): Promise<SafeHtml> {
    const recipients = await deliveries.recipientsOf(ctx.state.console.user.teamId, e.id);
    const live = !SETTLED.has(e.latestStatus) || recipients.some((x) => x.state === 'queued');
    const events = [...e.emailEvents].reverse();
    return html`<div id="live-email"${live ? html` data-live="1500"` : ''}>
${section('Status', definitionList([
  ['Status', badge(e.latestStatus)],
  ['From', e.from],
  ['To', list(e.to).join(', ')],
  ...(e.cc ? ([['Cc', list(e.cc).join(', ')]] as [string, string][]) : []),
  ...(e.bcc ? ([['Bcc', list(e.bcc).join(', ')]] as [string, string][]) : []),
  ['Created', time(e.createdAt)],
  ...(e.scheduledAt ? ([['Scheduled for', time(e.scheduledAt)]] as [string, SafeHtml][]) : []),
  ...(e.openTracking !== null || e.clickTracking !== null ? ([['Tracking', trackingText(e)]] as [string, string][]) : []),
  ['Tags', e.tags.length ? e.tags.join(', ') : html`<span class="muted">none</span>`],
  ['Id', html`<code>${e.id}</code>`],
]))}
${section('Recipients', table('Recipients', ['Recipient', 'State', 'Attempts', 'MX host', 'Last reply', 'Next attempt'], recipients.map((x) => [
  html`${x.recipient}${x.kind !== 'to' ? html` <span class="muted">(${x.kind})</span>` : ''}`,
  badge(x.state),
  String(x.attempts),
  x.mxHost ?? '—',
  x.lastResponse ? html`<code class="reply-inline">${x.lastResponse}</code>` : '—',
  time(x.nextAttemptAt),
]), 'No recipient is left to deliver to (all were suppressed).'))}
${section('Timeline', html`<ol class="timeline">${events.map((ev) => html`<li><div class="event-head">${badge(ev.status)} ${time(ev.createdAt)}</div>${eventDetail(ev.data)}</li>`)}</ol>`)}
</div>`;
  }

  route(r, 'get', '/emails/:id', async (ctx) => {
    const e = await emails.get(sendContextOf(ctx), ctx.params.id!);
    const images = ctx.query.images === '1';
    const actions = e.latestStatus === 'SCHEDULED' ? actionButton(ctx, `/console/emails/${seg(e.id)}/cancel`, 'Cancel sending', { kind: 'danger', confirm: 'Cancel this scheduled email?' }) : '';
    renderPage(ctx, d.assets, {
      title: e.subject || '(no subject)',
      nav: 'emails',
      crumbs: [['Emails', '/console/emails']],
      actions,
      body: html`${await detail(ctx, e)}
${section('Message', html`${e.html ? html`<p class="hint">Shown as sent, in a sandbox: no scripts run and ${images ? 'remote images are loaded' : html`remote images are blocked (<a href="/console/emails/${seg(e.id)}${queryString({ images: '1' })}">load them</a>)`}.</p>
<iframe class="email-frame" sandbox title="Message body" src="/console/emails/${seg(e.id)}/body.html${images ? '?images=1' : ''}"></iframe>` : ''}
${e.text ? html`<details${e.html ? '' : html` open`}><summary>Plain text</summary><pre class="text-body">${e.text}</pre></details>` : ''}
${e.html === null && e.text === null ? html`<p class="hint">The content of this email is no longer kept: this server keeps mail content for a set number of days (<code>retention.contentDays</code>).</p>` : ''}`)}`,
    });
  });

  route(r, 'get', '/emails/:id/body.html', async (ctx) => {
    const e = await emails.get(sendContextOf(ctx), ctx.params.id!);
    setPageHeaders(ctx, emailFrameCsp(ctx.query.images === '1'));
    ctx.type = 'html';
    ctx.body = e.html ?? '';
  });

  route(r, 'post', '/emails/:id/cancel', async (ctx) => {
    await emails.cancel(sendContextOf(ctx), ctx.params.id!);
    redirectWithFlash(ctx, secure, `/console/emails/${seg(ctx.params.id!)}`, { kind: 'ok', text: 'The email was cancelled.' });
  });
}
