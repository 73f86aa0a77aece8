import type Router from '@koa/router';
import { BOUNCE_THRESHOLDS, COMPLAINT_THRESHOLDS, type AttentionItem } from '../../core/overview/overview-service.js';
import { rateGauge, timeSeriesChart } from '../charts.js';
import { route, type PageDeps } from '../console-deps.js';
import { scopeOf } from '../console-context.js';
import { html, seg, type SafeHtml } from '../html.js';
import { renderPage, section, time } from '../layout.js';

function attentionLine(a: AttentionItem, sandbox: boolean): SafeHtml {
  switch (a.kind) {
    case 'domain-unverified':
      return html`<li class="warn">Domain <a href="/console/domains/${seg(a.domainId)}">${a.name}</a> is not verified (${a.status.replace(/_/g, ' ').toLowerCase()})${a.detail ? html`: ${a.detail}` : ''}. ${sandbox ? 'In sandbox mode it sends anyway, to the capture mailbox; without sandbox mode, mail from it is refused until its DNS records are published.' : 'Mail from it is refused until its DNS records are published.'}</li>`;
    case 'webhook-failing':
      return html`<li class="bad">Webhook <a href="/console/webhooks/${seg(a.webhookId)}">${a.url}</a> ${a.autoDisabled ? 'was disabled after too many failures in a row (send it a test event, then re-enable it)' : 'is failing'}: its last attempt ${a.lastStatus !== null ? html`got HTTP ${a.lastStatus}` : html`failed (${a.lastError ?? 'no response'})`} at ${time(a.at)}.</li>`;
    case 'bounce-spike':
      return html`<li class="bad">Bounce spike on ${a.date}: ${a.bounced} bounces, ${a.ratePercent}% of attempts (usually ${a.baselinePercent}%). Check the list that was sent that day.</li>`;
    case 'complaint-rate':
      return html`<li class="${a.level === 'max' ? 'bad' : 'warn'}">Complaint rate ${a.ratePercent}% is ${a.level === 'max' ? 'at or above 0.3%, where Gmail and Yahoo reject bulk mail' : 'above 0.1%, the rate Gmail and Yahoo ask senders to stay under'}.</li>`;
    case 'bounce-rate':
      return html`<li class="${a.level === 'max' ? 'bad' : 'warn'}">Hard bounce rate ${a.ratePercent}% is high${a.level === 'max' ? ' (5% or more puts a sender under review at most providers)' : ' (above 2%)'}: clean the lists you send to.</li>`;
    case 'port25-blocked':
      return html`<li class="bad">Outbound port ${a.port} looks blocked on this server: no connection to any MX host has succeeded since ${time(a.since)} (${a.attempts} attempts to ${a.failedHosts} hosts failed to connect). Mail to every domain waits in the queue. Many cloud providers block port 25: ask yours to open it, or send through a relay (the <code>[outbound.relay]</code> settings, <code>POSTHORN_OUTBOUND_RELAY_HOST</code> and the rest; docs/outbound.md, "Relay").</li>`;
  }
}

export function overviewPage(r: Router, d: PageDeps): void {
  route(r, 'get', '/', async (ctx) => {
    const o = await d.services.overview.overview(scopeOf(ctx));
    const rep = o.reputation;
    const attention = o.attention.length
      ? html`<ul class="attention">${o.attention.map((a) => attentionLine(a, d.sandbox ?? false))}</ul>`
      : o.domains.length
        ? html`<p class="all-good">Nothing needs your attention: every domain is verified, webhooks are answering, and bounces look normal.</p>`
        : html`<p>Nothing yet: add a domain to start sending.</p>`;
    const firstSteps = o.domains.length === 0
      ? html`<p class="lead">Start by <a href="/console/domains">adding a sending domain</a>, then publish its DNS records.</p>`
      : '';
    renderPage(ctx, d.assets, {
      title: 'Overview',
      nav: 'overview',
      body: html`${firstSteps}${section('Needs attention', attention)}
<div class="grid-2">${section('Last 7 days', timeSeriesChart('Emails per day, last 7 days', o.week.result))}
${section('Last 30 days', timeSeriesChart('Emails per day, last 30 days', o.month.result))}</div>
${section(
  'Reputation',
  html`<p class="hint">All time: ${rep.delivered} delivered, ${rep.hardBounced} hard bounces, ${rep.complained} complaints.</p>
<div class="grid-2">${rateGauge('complaint rate', rep.complaintRate, [
    { value: COMPLAINT_THRESHOLDS.warn, label: 'Gmail and Yahoo: stay below' },
    { value: COMPLAINT_THRESHOLDS.max, label: 'never reach' },
  ], 0.5)}${rateGauge('hard bounce rate', rep.bounceRate, [
    { value: BOUNCE_THRESHOLDS.warn, label: 'keep below' },
    { value: BOUNCE_THRESHOLDS.max, label: 'review at most providers' },
  ], 8)}</div>`,
)}`,
    });
  });
}
