import type Router from '@koa/router';
import { route, type PageDeps } from '../console-deps.js';
import { scopeOf } from '../console-context.js';
import { html, queryString, seg } from '../html.js';
import { definitionList, pager, renderPage, section, table, time } from '../layout.js';
import { emailFrameCsp, setPageHeaders } from '../security-headers.js';
import { ListQuery } from '../list-filters.js';

// Received mail: what arrived for the team's receiving domains, with its authentication
// verdicts; the HTML only ever in a sandboxed frame, the raw message as a download.

const verdict = (result: string) => html`<span class="badge ${result === 'pass' ? 'good' : result === 'none' || result === 'neutral' ? 'muted' : 'bad'}">${result}</span>`;

export function receivedPages(r: Router, d: PageDeps): void {
  const { received, domains } = d.services;

  route(r, 'get', '/received', async (ctx) => {
    const scope = scopeOf(ctx);
    const q = new ListQuery(ctx.querystring);
    const p = q.page();
    const teamDomains = await domains.list(scope);
    const domainId = q.idOf('domainId', 'Domain', teamDomains);
    const list = await received.list(scope, { offset: p.offset, limit: p.limit, domainIds: domainId ? [Number(domainId)] : undefined });
    const receiving = teamDomains.filter((x) => x.receiving);
    renderPage(ctx, d.assets, {
      title: 'Received mail',
      nav: 'received',
      problems: q.problems,
      body: html`${receiving.length ? '' : html`<p class="hint">No domain receives mail yet: turn on "Receive mail" in a verified <a href="/console/domains">domain's settings</a> and publish its MX record.</p>`}
${table('Received mail', ['Subject', 'From', 'To', 'SPF / DKIM / DMARC', 'Received'], list.items.map((m) => [
  html`<a href="/console/received/${seg(m.id)}">${m.subject || '(no subject)'}</a>`,
  m.from ?? '—',
  m.envelope.rcptTo.join(', '),
  html`${verdict(m.authResults.spf.result)} ${verdict(m.authResults.dkim.result)} ${verdict(m.authResults.dmarc.result)}`,
  time(m.createdAt),
]), 'Nothing received yet.')}${pager('/console/received', { ...p, total: list.total }, { domainId })}`,
    });
  });

  route(r, 'get', '/received/:id', async (ctx) => {
    const scope = scopeOf(ctx);
    const [m, hasRaw] = await Promise.all([received.get(scope, ctx.params.id!), received.hasRaw(scope, ctx.params.id!)]);
    const images = ctx.query.images === '1';
    const base = `/console/received/${seg(m.id)}`;
    renderPage(ctx, d.assets, {
      title: m.subject || '(no subject)',
      nav: 'received',
      crumbs: [['Received mail', '/console/received']],
      actions: hasRaw ? html`<a class="btn secondary" href="${base}/raw.eml" download>Download .eml</a>` : '',
      body: html`${hasRaw ? '' : html`<p class="hint">The message's content is no longer kept: received mail keeps its body for a set number of days (<code>retention.contentDays</code>); its addresses, headers and verdicts stay.</p>`}${section('Message', definitionList([
        ['From', m.from ?? '—'],
        ['To', m.to.join(', ') || '—'],
        ['Envelope', html`MAIL FROM ${m.envelope.mailFrom ?? '<>'} · RCPT TO ${m.envelope.rcptTo.join(', ')}`],
        ['Date', m.date ?? '—'],
        ['Received', time(m.createdAt)],
        ['Authentication', html`SPF ${verdict(m.authResults.spf.result)} DKIM ${verdict(m.authResults.dkim.result)} DMARC ${verdict(m.authResults.dmarc.result)}`],
        ['Connection', html`${m.remote.ip ?? '?'} (HELO ${m.remote.helo ?? '?'}), ${m.remote.tls ? 'TLS' : 'no TLS'}`],
      ]))}
${m.html ? section('HTML', html`<p class="hint">In a sandbox: no scripts run and ${images ? 'remote images are loaded' : html`remote images are blocked (<a href="${base}${queryString({ images: '1' })}">load them</a>)`}.</p>
<iframe class="email-frame" sandbox title="Received message" src="${base}/body.html${images ? '?images=1' : ''}"></iframe>`) : ''}
${m.text ? section('Text', html`<pre class="text-body">${m.text}</pre>`) : ''}
${m.attachments.length ? section('Attachments', table('Attachments', ['File', 'Type', 'Size'], m.attachments.map((a) => [a.filename ?? '(unnamed)', a.contentType, `${Math.ceil(a.size / 1024)} KB`]))) : ''}
${section('Headers', html`<details><summary>${m.headers.length} headers</summary><pre class="code">${m.headers.map((h) => `${h.name}: ${h.value}\n`).join('')}</pre></details>`)}`,
    });
  });

  route(r, 'get', '/received/:id/body.html', async (ctx) => {
    const m = await received.get(scopeOf(ctx), ctx.params.id!);
    setPageHeaders(ctx, emailFrameCsp(ctx.query.images === '1'));
    ctx.type = 'html';
    ctx.body = m.html ?? '';
  });

  route(r, 'get', '/received/:id/raw.eml', async (ctx) => {
    const { id, raw } = await received.raw(scopeOf(ctx), ctx.params.id!);
    ctx.set('Content-Disposition', `attachment; filename="${id}.eml"`);
    ctx.type = 'message/rfc822';
    ctx.body = raw;
  });
}
