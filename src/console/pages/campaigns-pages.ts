import type Router from '@koa/router';
import { campaignCreateSchema, campaignPatchSchema, campaignScheduleSchema } from '../../core/campaigns/campaign-schema.js';
import { AppError, badRequest } from '../../core/errors.js';
import { route, type PageDeps } from '../console-deps.js';
import { field, parseWith, scopeOf, type ConsoleContext } from '../console-context.js';
import { isSecure, redirectWithFlash } from '../console-responses.js';
import { html, seg, type SafeHtml } from '../html.js';
import { actionButton, badge, csrfField, definitionList, input, pager, renderPage, section, select, table, time } from '../layout.js';
import { ListQuery } from '../list-filters.js';
import { contentFields, contentFromForm, editableContent, previewFrame, sendFrame } from './content-editor.js';

// Campaigns: compose (from a template or from scratch), schedule or send now, pause, resume,
// and watch the counters move.

const STATUSES = ['DRAFT', 'SCHEDULED', 'RUNNING', 'PAUSED', 'SENT'] as const;
const COUNTERS = ['sent', 'delivered', 'opened', 'clicked', 'bounced', 'complained', 'unsubscribed'] as const;
const optional = (v: string) => (v === '' ? null : v);
/** Opens and clicks made by machines (docs/api.md, "Machine opens and clicks") are counted apart. */
const MACHINE = { opened: 'machineOpened', clicked: 'machineClicked' } as const;
const machineNote = (key: string, n: number): SafeHtml => html` (+<span data-counter="${key}">${n}</span> by machines)`;

export function campaignsPages(r: Router, d: PageDeps): void {
  const secure = isSecure(d.publicUrl);
  const { campaigns, contactBooks, segments, templates, domains } = d.services;

  async function choices(ctx: ConsoleContext) {
    const scope = scopeOf(ctx);
    const [books, segs, tpls, doms] = await Promise.all([
      contactBooks.list(scope),
      segments.list(scope.teamId, { offset: 0, limit: 200 }),
      templates.list(scope.teamId, { offset: 0, limit: 200 }),
      domains.list(scope),
    ]);
    return { books, segs: segs.items as { id: string; name: string }[], tpls: tpls.items, verified: doms.filter((x) => x.status === 'SUCCESS') };
  }

  function audienceFields(c: Awaited<ReturnType<typeof choices>>, bookId?: string, segmentId?: string | null): SafeHtml {
    return html`<div class="row">${select({ name: 'contactBookId', label: 'Contact book', value: bookId, options: c.books.map((b) => [b.id, `${b.name} (${b._count.contacts})`] as const) })}
${select({ name: 'segmentId', label: 'Segment', value: segmentId ?? '', hint: 'A segment of the chosen book, or everyone subscribed in it.', options: [['', 'Everyone in the book'], ...c.segs.map((s) => [s.id, s.name] as const)] })}</div>`;
  }

  route(r, 'get', '/campaigns', async (ctx) => {
    const q = new ListQuery(ctx.querystring);
    const status = q.oneOf('status', 'Status', STATUSES);
    const p = q.page();
    const [list, c] = await Promise.all([campaigns.list(scopeOf(ctx), { status, offset: p.offset, limit: p.limit }), choices(ctx)]);
    const ready = c.books.length > 0 && c.verified.length > 0;
    renderPage(ctx, d.assets, {
      title: 'Campaigns',
      nav: 'campaigns',
      problems: q.problems,
      body: html`${ready
        ? section('New campaign', html`<form method="post" action="/console/campaigns" class="stack">${csrfField(ctx)}
<div class="row">${input({ name: 'name', label: 'Name', required: true })}${input({ name: 'from', label: 'From', required: true, value: `Newsletter <news@${c.verified[0]!.name}>`, hint: 'An address on a verified domain.' })}</div>
${audienceFields(c)}
${select({ name: 'templateId', label: 'Start from', options: [['', 'Empty content'], ...c.tpls.map((t) => [t.id, `Template: ${t.name}`] as const)] })}
${input({ name: 'subject', label: 'Subject', hint: 'Left empty, the template\'s subject is used.' })}
<button type="submit" class="btn primary">Create draft</button></form>`)
        : html`<p class="hint">A campaign needs a <a href="/console/domains">verified domain</a> and a <a href="/console/contacts">contact book</a>.</p>`}
<form method="get" class="filters" aria-label="Filter campaigns">${select({ name: 'status', label: 'Status', value: status ?? '', options: [['', 'Any status'], ...STATUSES.map((s) => [s, s.toLowerCase()] as const)] })}<button type="submit" class="btn secondary">Filter</button></form>
${table('Campaigns', ['Campaign', 'Status', 'Sent', 'Delivered', 'Updated'], list.items.map((x) => [
  html`<a href="/console/campaigns/${seg(x.id)}">${x.name}</a>`,
  badge(x.status),
  `${x.sent} / ${x.total}`,
  String(x.delivered),
  time(x.updatedAt),
]), 'No campaigns yet.')}${pager('/console/campaigns', { ...p, total: list.total }, { status })}`,
    });
  });

  route(r, 'post', '/campaigns', async (ctx) => {
    const templateId = field(ctx, 'templateId');
    const template = templateId ? await templates.get(scopeOf(ctx).teamId, templateId) : undefined;
    const subject = field(ctx, 'subject') || template?.subject || '';
    if (!subject) throw badRequest('subject: required (or start from a template)');
    const body = parseWith(campaignCreateSchema, {
      name: field(ctx, 'name'),
      from: field(ctx, 'from'),
      subject,
      contactBookId: field(ctx, 'contactBookId'),
      segmentId: optional(field(ctx, 'segmentId')),
      content: template?.content ?? JSON.stringify({ type: 'doc', content: [{ type: 'paragraph', content: [{ type: 'text', text: 'Hello {{firstName}},' }] }] }),
    });
    const created = await campaigns.create(scopeOf(ctx), body);
    redirectWithFlash(ctx, secure, `/console/campaigns/${seg(created.id)}`, { kind: 'ok', text: 'Draft created. Check the content, then send or schedule it.' });
  });

  route(r, 'get', '/campaigns/:id', async (ctx) => {
    const x = await campaigns.get(scopeOf(ctx), ctx.params.id!);
    const base = `/console/campaigns/${seg(x.id)}`;
    // Sent is not settled: the counters move until its mail is sent and then delivered or
    // bounced, so the section keeps refreshing, more slowly, while any of its email is on its
    // way (a suppressed or failed recipient never counts as sent, so the counters alone would
    // never settle). SENT comes when the last batch is queued, often before the first message is.
    const delivering = await campaigns.stillDelivering(scopeOf(ctx), x.id);
    const live = x.status === 'RUNNING' || x.status === 'SCHEDULED' ? '1500' : delivering ? '5000' : '';
    const actions = html`${x.status === 'RUNNING' ? actionButton(ctx, `${base}/pause`, 'Pause') : ''}${x.status === 'PAUSED' ? actionButton(ctx, `${base}/resume`, 'Resume', { kind: 'primary' }) : ''}`;
    const counters = html`<div id="live-campaign"${live ? html` data-live="${live}"` : ''}>${section('Progress', html`${definitionList([
      ['Status', badge(x.status)],
      ['Scheduled for', time(x.scheduledAt)],
      ['Recipients', String(x.total)],
    ])}
${x.total > 0 ? html`<p><label for="campaign-progress">${x.sent} of ${x.total} sent</label></p><progress id="campaign-progress" max="${x.total}" value="${x.sent}">${x.sent} of ${x.total}</progress>` : ''}
<ul class="counters">${COUNTERS.map((k) => html`<li><span class="n" data-counter="${k}">${x[k]}</span> ${k}${k === 'opened' || k === 'clicked' ? machineNote(MACHINE[k], x[MACHINE[k]]) : ''}</li>`)}</ul>
<p class="hint">Opened and clicked count people, each email once. Opens and clicks made by machines (privacy proxies and link scanners, which fetch at delivery) are counted apart.</p>`)}</div>`;
    let editor: SafeHtml | string = '';
    if (x.status === 'DRAFT') {
      const c = await choices(ctx);
      // The draft's own segment is always an option, or the select would show (and the next
      // save would send) "Everyone in the book": past the first 200 segments, or deleted.
      if (x.segmentId && !c.segs.some((s) => s.id === x.segmentId)) {
        const own = await segments.get(scopeOf(ctx).teamId, x.segmentId).catch((err: unknown) => {
          if (err instanceof AppError && err.code === 'NOT_FOUND') return { id: x.segmentId!, name: 'A deleted segment (matches nobody): choose another' };
          throw err;
        });
        c.segs = [{ id: own.id, name: own.name }, ...c.segs];
      }
      // The same for its book: a deleted one would show, and save, another book.
      if (!c.books.some((b) => b.id === x.contactBookId)) c.books = [{ id: x.contactBookId, name: 'A deleted contact book: choose another', _count: { contacts: 0 } } as (typeof c.books)[number], ...c.books];
      editor = html`<div class="grid-2">${section('Content', html`<form method="post" action="${base}" class="stack">${csrfField(ctx)}
<div class="row">${input({ name: 'name', label: 'Name', value: x.name, required: true })}${input({ name: 'from', label: 'From', value: x.from, required: true })}</div>
${input({ name: 'subject', label: 'Subject', value: x.subject, required: true })}${input({ name: 'previewText', label: 'Preview text', value: x.previewText ?? '' })}
${audienceFields(c, x.contactBookId, x.segmentId)}
${contentFields(editableContent(x.content), 'campaign-preview')}
<button type="submit" class="btn primary">Save draft</button></form>`)}
${section('Preview', html`<p class="hint">Every message gets its own unsubscribe link; the footer is added when it is sent.</p>${previewFrame('campaign-preview', `${base}/preview.html`)}`)}</div>
${section('Send', html`<form method="post" action="${base}/schedule" class="stack">${csrfField(ctx)}
${input({ name: 'scheduledAt', label: 'Send at (UTC)', type: 'datetime-local', hint: 'Leave empty to send now.' })}
${input({ name: 'batchSize', label: 'Messages per batch', type: 'number', min: 1, value: x.batchSize, hint: `One batch every ${x.batchWindowMinutes} minute(s).` })}
<button type="submit" class="btn primary">Send or schedule</button></form>`)}`;
    } else {
      editor = section('Message', html`${definitionList([['From', x.from], ['Subject', x.subject]])}${previewFrame('campaign-preview', `${base}/preview.html`)}`);
    }
    renderPage(ctx, d.assets, {
      title: x.name,
      nav: 'campaigns',
      crumbs: [['Campaigns', '/console/campaigns']],
      actions,
      body: html`${counters}${editor}${x.status === 'DRAFT' || x.status === 'SENT' || x.status === 'PAUSED' ? section('Delete', actionButton(ctx, `${base}/delete`, 'Delete campaign', { kind: 'danger', confirm: `Delete ${x.name}?` })) : ''}`,
    });
  });

  route(r, 'get', '/campaigns/:id/preview.html', async (ctx) => {
    sendFrame(ctx, (await campaigns.get(scopeOf(ctx), ctx.params.id!)).html ?? '');
  });

  route(r, 'post', '/campaigns/:id', async (ctx) => {
    const patch = parseWith(campaignPatchSchema, {
      name: field(ctx, 'name'),
      from: field(ctx, 'from'),
      subject: field(ctx, 'subject'),
      previewText: optional(field(ctx, 'previewText')),
      contactBookId: field(ctx, 'contactBookId'),
      segmentId: optional(field(ctx, 'segmentId')),
      content: contentFromForm(ctx.state.console.form),
    });
    await campaigns.update(scopeOf(ctx), ctx.params.id!, patch);
    redirectWithFlash(ctx, secure, `/console/campaigns/${seg(ctx.params.id!)}`, { kind: 'ok', text: 'Draft saved.' });
  });

  route(r, 'post', '/campaigns/:id/schedule', async (ctx) => {
    const at = field(ctx, 'scheduledAt');
    if (at && !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$/.test(at)) throw badRequest('scheduledAt: a date and time such as 2026-01-31T09:00');
    const batch = field(ctx, 'batchSize');
    const body = parseWith(campaignScheduleSchema, { scheduledAt: at ? `${at.length === 16 ? `${at}:00` : at}Z` : null, ...(batch ? { batchSize: Number(batch) } : {}) });
    const res = await campaigns.schedule(scopeOf(ctx), ctx.params.id!, body);
    redirectWithFlash(ctx, secure, `/console/campaigns/${seg(ctx.params.id!)}`, { kind: 'ok', text: at ? `Scheduled for ${res.campaign.scheduledAt}.` : 'Sending now.' });
  });

  for (const action of ['pause', 'resume'] as const) {
    route(r, 'post', `/campaigns/:id/${action}`, async (ctx) => {
      await campaigns[action](scopeOf(ctx), ctx.params.id!);
      redirectWithFlash(ctx, secure, `/console/campaigns/${seg(ctx.params.id!)}`, { kind: 'ok', text: action === 'pause' ? 'Paused.' : 'Resumed.' });
    });
  }

  route(r, 'post', '/campaigns/:id/delete', async (ctx) => {
    await campaigns.remove(scopeOf(ctx), ctx.params.id!);
    redirectWithFlash(ctx, secure, '/console/campaigns', { kind: 'ok', text: 'Campaign deleted.' });
  });
}
