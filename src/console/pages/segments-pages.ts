import type Router from '@koa/router';
import { segmentCreateSchema, type SegmentView } from '../../core/segments/segment-service.js';
import { MAX_FILTER_DEPTH, type FilterCondition, type FilterGroup, type FilterNode } from '../../core/segments/segment-filters.js';
import { AppError, badRequest } from '../../core/errors.js';
import { route, type PageDeps } from '../console-deps.js';
import { field, parseWith, scopeOf, type ConsoleContext } from '../console-context.js';
import { isSecure, redirectWithFlash } from '../console-responses.js';
import { html, queryString, seg, type SafeHtml } from '../html.js';
import { ListQuery } from '../list-filters.js';
import { actionButton, checkbox, csrfField, input, pager, renderPage, section, select, table, textarea, time } from '../layout.js';

// Segments: a filter builder over a book's contacts that shows the live member count (the
// count comes from segments.preview, the same validation and SQL as the saved segment).

const FIELDS = [['email', 'Email'], ['firstName', 'First name'], ['lastName', 'Last name'], ['subscribed', 'Subscribed'], ['createdAt', 'Added on'], ['property', 'Property…']] as const;
const OPS = [
  ['eq', 'is'], ['neq', 'is not'], ['contains', 'contains'], ['startsWith', 'starts with'], ['endsWith', 'ends with'],
  ['exists', 'has a value'], ['notExists', 'is empty'], ['in', 'is one of (comma-separated)'],
  ['gt', 'greater than'], ['gte', 'at least'], ['lt', 'less than'], ['lte', 'at most'],
] as const;

interface Row {
  field: string;
  prop: string;
  op: string;
  value: string;
}

const isGroup = (n: FilterNode): n is FilterGroup => (n as FilterGroup).conditions !== undefined;

/**
 * A value the builder's row would not read back as it is: the row's value is trimmed and an
 * `in` value split at commas, so spaces around a value or a comma inside an `in` item would
 * change the segment on its next save.
 */
function rowCannotHold(c: FilterCondition): boolean {
  const items = Array.isArray(c.value) ? c.value : [c.value];
  return items.some((v) => typeof v === 'string' && (v !== v.trim() || (Array.isArray(c.value) && v.includes(','))));
}

/** The builder's rows of a flat filter; null (edited as JSON) when it nests groups or a row could not hold it. */
function rowsOf(filters: FilterGroup): Row[] | null {
  if (filters.conditions.some(isGroup)) return null;
  if ((filters.conditions as FilterCondition[]).some(rowCannotHold)) return null;
  return (filters.conditions as FilterCondition[]).map((c) => {
    const prop = c.field.startsWith('properties.') ? c.field.slice('properties.'.length) : '';
    const value = c.value === undefined ? '' : Array.isArray(c.value) ? c.value.join(', ') : String(c.value);
    return { field: prop ? 'property' : c.field, prop, op: c.op, value };
  });
}

/** The index a builder row gets among the conditions (blank rows are none). */
function conditionsBefore(fields: string[], props: string[], values: string[], row: number): number {
  let n = 0;
  for (let i = 0; i < row; i++) if (fields[i] || (values[i] ?? '').trim() || (props[i] ?? '').trim()) n++;
  return n;
}

/**
 * True when a filter holds every contact whatever its fields: `all` of none, `any` of such a
 * group. A group without `match` is `all`, as core reads it. Groups nested deeper than core
 * allows are not looked into (core refuses them, naming the depth): a filter of thousands of
 * levels, posted as JSON, must be a 400, not a stack overflow.
 */
function holdsEveryone(node: unknown, depth = 1): boolean {
  if (!node || typeof node !== 'object' || !Array.isArray((node as FilterGroup).conditions)) return false;
  if (depth > MAX_FILTER_DEPTH) return false;
  const g = node as FilterGroup;
  const match: unknown = g.match ?? 'all';
  const inner = (n: FilterNode) => holdsEveryone(n, depth + 1);
  if (match === 'any') return g.conditions.some(inner);
  return match === 'all' && g.conditions.every(inner);
}

const EVERYONE_LABEL = 'Every contact of the book, when no condition narrows it';

/**
 * The builder's filter, refused when it would hold the whole book and the form does not say so:
 * removing the last row is easy, and a campaign to that segment mails everyone.
 */
function savedFilters(f: URLSearchParams): unknown {
  const filters = filtersFrom(f);
  if (holdsEveryone(filters) && !f.has('everyone')) {
    throw badRequest(`filters: no condition narrows this segment, so it holds every contact of the book. Add a condition, or tick "${EVERYONE_LABEL}" to save it so`);
  }
  return filters;
}

/** The builder's form as a filter for core to validate (it names the bad condition). */
function filtersFrom(f: URLSearchParams): unknown {
  if (f.get('mode') === 'json') {
    try {
      return JSON.parse(f.get('filtersJson') ?? '');
    } catch (err) {
      throw badRequest(`filters: not valid JSON (${(err as Error).message})`);
    }
  }
  const [fields, props, ops, values] = [f.getAll('field'), f.getAll('prop'), f.getAll('op'), f.getAll('value')];
  const conditions = fields.flatMap((name, i) => {
    const raw = (values[i] ?? '').trim();
    // A row left blank is the builder's spare one. A row with a value but no field is a
    // mistake: dropped, it would widen the segment (to the whole book, were it the only one).
    if (!name && !raw && !(props[i] ?? '').trim()) return [];
    if (!name) throw badRequest(`filters.conditions[${conditionsBefore(fields, props, values, i)}].field: choose a field for this condition`);
    const op = ops[i] ?? 'eq';
    const fieldName = name === 'property' ? `properties.${(props[i] ?? '').trim()}` : name;
    if (op === 'exists' || op === 'notExists') return [{ field: fieldName, op }];
    if (op === 'in') return [{ field: fieldName, op, value: raw.split(',').map((v) => v.trim()).filter(Boolean) }];
    if (name === 'subscribed') return [{ field: fieldName, op, value: raw.toLowerCase() !== 'false' && raw.toLowerCase() !== 'no' && raw !== '0' }];
    return [{ field: fieldName, op, value: raw }];
  });
  return { match: f.get('match') === 'any' ? 'any' : 'all', conditions };
}

function conditionRow(row: Row, i: number | string): SafeHtml {
  const n = typeof i === 'number' ? i + 1 : i;
  return html`<li class="condition"><select name="field" aria-label="Condition ${n}: field"><option value="">—</option>${FIELDS.map(([v, l]) => html`<option value="${v}"${v === row.field ? html` selected` : ''}>${l}</option>`)}</select>
<input name="prop" aria-label="Condition ${n}: property name" placeholder="property name" value="${row.prop}">
<select name="op" aria-label="Condition ${n}: comparison">${OPS.map(([v, l]) => html`<option value="${v}"${v === row.op ? html` selected` : ''}>${l}</option>`)}</select>
<input name="value" aria-label="Condition ${n}: value" placeholder="value" value="${row.value}">
<button type="button" class="btn small secondary remove-condition" aria-label="Remove condition ${n}">Remove</button></li>`;
}

export function segmentsPages(r: Router, d: PageDeps): void {
  const secure = isSecure(d.publicUrl);
  const { segments, contactBooks } = d.services;

  interface BuilderState {
    action: string;
    segmentId?: string;
    name: string;
    bookId: string;
    match: 'all' | 'any';
    rows: Row[] | null;
    json: string;
    count?: { total: number } | { error: string };
    /** The segment is saved, or was posted, as the whole book on purpose. */
    everyone: boolean;
  }

  function builder(ctx: ConsoleContext, s: BuilderState, bookName: string): SafeHtml {
    const json = s.rows === null;
    const count = s.count === undefined ? '' : 'error' in s.count ? s.count.error : `${s.count.total} contact${s.count.total === 1 ? '' : 's'} match`;
    const empty: Row = { field: '', prop: '', op: 'eq', value: '' };
    return html`<form method="post" action="${s.action}" class="stack segment-builder" data-preview="/console/segments/preview">${csrfField(ctx)}
<input type="hidden" name="contactBookId" value="${s.bookId}"><input type="hidden" name="mode" value="${json ? 'json' : 'builder'}">${s.segmentId ? html`<input type="hidden" name="segmentId" value="${s.segmentId}">` : ''}
${input({ name: 'name', label: 'Segment name', value: s.name, required: true })}
<p class="hint">Contacts of <strong>${bookName}</strong></p>
${json
  ? textarea({ name: 'filtersJson', label: 'Filter (JSON)', value: s.json, rows: 10, mono: true, hint: '{"match": "all" | "any", "conditions": [{"field", "op", "value"} or nested groups]}' })
  : html`<fieldset><legend>Contacts who match</legend>
${select({ name: 'match', label: 'Match', value: s.match, options: [['all', 'all of these conditions'], ['any', 'any of these conditions']] })}
<ol class="conditions">${[...s.rows!, empty].map((row, i) => conditionRow(row, i))}</ol>
<template id="condition-template">${conditionRow(empty, 'new')}</template>
<button type="button" class="btn small secondary add-condition">Add condition</button></fieldset>`}
${checkbox({ name: 'everyone', label: EVERYONE_LABEL, checked: s.everyone })}
<p class="count-line"><output id="segment-count" aria-live="polite" class="${s.count && 'error' in s.count ? 'error' : ''}">${count}</output></p>
<div class="button-row"><button type="submit" class="btn primary">Save segment</button>
<button type="submit" class="btn secondary" formaction="/console/segments/preview">Count members</button></div></form>`;
  }

  async function preview(ctx: ConsoleContext, bookId: string, filters: unknown): Promise<{ total: number } | { error: string }> {
    try {
      const r = await segments.preview(scopeOf(ctx).teamId, { contactBookId: bookId, filters }, { offset: 0, limit: 1 });
      return { total: r.total };
    } catch (err) {
      if (err instanceof AppError && err.code === 'BAD_REQUEST') return { error: err.message };
      throw err;
    }
  }

  route(r, 'get', '/segments', async (ctx) => {
    const scope = scopeOf(ctx);
    const q = new ListQuery(ctx.querystring);
    const p = q.page();
    const [list, books] = await Promise.all([segments.list(scope.teamId, { offset: p.offset, limit: p.limit }), contactBooks.list(scope)]);
    const bookName = new Map(books.map((b) => [b.id, `${b.name}`]));
    renderPage(ctx, d.assets, {
      title: 'Segments',
      nav: 'segments',
      problems: q.problems,
      body: html`${books.length
        ? section('New segment', html`<form method="get" action="/console/segments/new" class="row-form">${select({ name: 'book', label: 'Contact book', options: books.map((b) => [b.id, `${b.name}`] as const) })}<button type="submit" class="btn primary">Build a segment</button></form>`)
        : html`<p class="hint">Segments filter a contact book: <a href="/console/contacts">create a book</a> first.</p>`}
${table('Segments', ['Segment', 'Contact book', 'Updated'], list.items.map((s) => [html`<a href="/console/segments/${seg(s.id)}">${s.name}</a>`, bookName.get(s.contactBookId) ?? s.contactBookId, time(s.updatedAt)]), 'No segments yet.')}
${pager('/console/segments', { ...p, total: list.total })}`,
    });
  });

  route(r, 'get', '/segments/new', async (ctx) => {
    const book = await contactBooks.get(scopeOf(ctx), String(ctx.query.book ?? ''));
    const rows: Row[] = [{ field: 'subscribed', prop: '', op: 'eq', value: 'true' }];
    renderPage(ctx, d.assets, {
      title: 'New segment',
      nav: 'segments',
      crumbs: [['Segments', '/console/segments']],
      body: section('Filter', builder(ctx, { action: '/console/segments', name: '', bookId: book.id, match: 'all', rows, json: '', everyone: false, count: await preview(ctx, book.id, { match: 'all', conditions: [{ field: 'subscribed', op: 'eq', value: true }] }) }, `${book.name}`)),
    });
  });

  route(r, 'post', '/segments/preview', async (ctx) => {
    const f = ctx.state.console.form;
    const bookId = field(ctx, 'contactBookId');
    const book = await contactBooks.get(scopeOf(ctx), bookId);
    let filters: unknown;
    let count: { total: number } | { error: string };
    try {
      filters = filtersFrom(f);
      count = await preview(ctx, book.id, filters);
    } catch (err) {
      if (!(err instanceof AppError) || err.code !== 'BAD_REQUEST') throw err;
      count = { error: err.message };
    }
    if (/application\/json/.test(ctx.get('accept'))) {
      ctx.body = count;
      return;
    }
    // Without script, "Count members" shows the same builder again with the count.
    const segmentId = field(ctx, 'segmentId');
    const rows = f.get('mode') === 'json' ? null : filters && typeof filters === 'object' ? rowsOf(filters as FilterGroup) : [];
    renderPage(ctx, d.assets, {
      title: segmentId ? 'Edit segment' : 'New segment',
      nav: 'segments',
      crumbs: [['Segments', '/console/segments']],
      body: section('Filter', builder(ctx, { action: segmentId ? `/console/segments/${seg(segmentId)}` : '/console/segments', segmentId: segmentId || undefined, name: field(ctx, 'name'), bookId: book.id, match: f.get('match') === 'any' ? 'any' : 'all', rows, json: f.get('filtersJson') ?? '', everyone: f.has('everyone'), count }, `${book.name}`)),
    });
  });

  route(r, 'post', '/segments', async (ctx) => {
    const body = parseWith(segmentCreateSchema, { name: field(ctx, 'name'), contactBookId: field(ctx, 'contactBookId'), filters: savedFilters(ctx.state.console.form) });
    const created = await segments.create(scopeOf(ctx).teamId, body);
    redirectWithFlash(ctx, secure, `/console/segments/${seg(created.id)}`, { kind: 'ok', text: `Segment ${created.name} saved.` });
  });

  route(r, 'get', '/segments/:id', async (ctx) => {
    const scope = scopeOf(ctx);
    const s: SegmentView = await segments.get(scope.teamId, ctx.params.id!);
    const book = await contactBooks.get(scope, s.contactBookId).catch(() => null);
    const q = new ListQuery(ctx.querystring);
    const p = q.page();
    const members = await segments.contacts(scope.teamId, s.id, { offset: p.offset, limit: p.limit });
    const rows = q.raw('mode') === 'json' ? null : rowsOf(s.filters);
    const form = builder(ctx, { action: `/console/segments/${seg(s.id)}`, segmentId: s.id, name: s.name, bookId: s.contactBookId, match: s.filters.match, rows, json: JSON.stringify(s.filters, null, 2), everyone: holdsEveryone(s.filters), count: { total: members.total } }, book ? `${book.name}` : 'a deleted book');
    renderPage(ctx, d.assets, {
      title: s.name,
      nav: 'segments',
      crumbs: [['Segments', '/console/segments']],
      problems: q.problems,
      actions: actionButton(ctx, `/console/segments/${seg(s.id)}/delete`, 'Delete segment', { kind: 'danger', confirm: `Delete the segment ${s.name}? Its contacts stay.` }),
      body: html`${section('Filter', html`${form}${rows !== null ? html`<p class="hint"><a href="/console/segments/${seg(s.id)}${queryString({ mode: 'json' })}">Edit as JSON</a> (for nested groups)</p>` : ''}`)}
${section(`Members now (${members.total})`, html`${table('Members', ['Email', 'Name', 'Added'], members.items.map((c) => [html`<a href="/console/contacts/${seg(c.contactBookId)}/contacts/${seg(c.id)}">${c.email}</a>`, [c.firstName, c.lastName].filter(Boolean).join(' '), time(c.createdAt)]), 'No contact matches now.')}
${pager(`/console/segments/${seg(s.id)}`, { ...p, total: members.total })}`)}`,
    });
  });

  route(r, 'post', '/segments/:id', async (ctx) => {
    const updated = await segments.update(scopeOf(ctx).teamId, ctx.params.id!, { name: field(ctx, 'name'), filters: savedFilters(ctx.state.console.form) });
    redirectWithFlash(ctx, secure, `/console/segments/${seg(updated.id)}`, { kind: 'ok', text: 'Segment saved.' });
  });

  route(r, 'post', '/segments/:id/delete', async (ctx) => {
    await segments.remove(scopeOf(ctx).teamId, ctx.params.id!);
    redirectWithFlash(ctx, secure, '/console/segments', { kind: 'ok', text: 'Segment deleted.' });
  });
}
