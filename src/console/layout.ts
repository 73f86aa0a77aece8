import type { ConsoleAssets } from './console-assets.js';
import type { ConsoleContext } from './console-context.js';
import { html, joinHtml, queryString, type HtmlValue, type SafeHtml } from './html.js';

// The page shell and the small components every page uses.

interface NavItem {
  href: string;
  label: string;
  key: string;
}

const TEAM_NAV: NavItem[] = [
  { key: 'overview', href: '/console', label: 'Overview' },
  { key: 'emails', href: '/console/emails', label: 'Emails' },
  { key: 'domains', href: '/console/domains', label: 'Domains' },
  { key: 'api-keys', href: '/console/api-keys', label: 'API keys' },
  { key: 'contacts', href: '/console/contacts', label: 'Contacts' },
  { key: 'segments', href: '/console/segments', label: 'Segments' },
  { key: 'templates', href: '/console/templates', label: 'Templates' },
  { key: 'campaigns', href: '/console/campaigns', label: 'Campaigns' },
  { key: 'suppressions', href: '/console/suppressions', label: 'Suppressions' },
  { key: 'webhooks', href: '/console/webhooks', label: 'Webhooks' },
  { key: 'received', href: '/console/received', label: 'Received' },
];
const OPERATOR_NAV: NavItem[] = [
  { key: 'operator-teams', href: '/console/operator/teams', label: 'Teams' },
  { key: 'operator-queue', href: '/console/operator/queue', label: 'Queue' },
];

export interface PageOptions {
  title: string;
  /** Which navigation entry is current. */
  nav: string;
  body: HtmlValue;
  status?: number;
  /** Actions shown beside the title. */
  actions?: HtmlValue;
  /** A trail above the title: [label, href] pairs. */
  crumbs?: [string, string][];
  /** Filters of the query string left out, each said in a sentence (ListQuery): the page answers 400. */
  problems?: readonly string[];
}

function navList(items: NavItem[], current: string): SafeHtml {
  return html`<ul>${items.map((i) => html`<li><a href="${i.href}"${i.key === current ? html` aria-current="page"` : ''}>${i.label}</a></li>`)}</ul>`;
}

function shell(assets: ConsoleAssets, title: string, inner: HtmlValue, bodyClass = ''): SafeHtml {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${title} · Posthorn</title><link rel="stylesheet" href="${assets.css.path}"><link rel="icon" href="${assets.icon.path}" type="image/svg+xml">
<script type="module" src="${assets.js.path}"></script></head>
<body class="${bodyClass}">${inner}</body></html>`;
}

export function renderPage(ctx: ConsoleContext, assets: ConsoleAssets, o: PageOptions): void {
  const s = ctx.state.console;
  const flash = s.flash ? html`<div class="flash flash-${s.flash.kind}" role="${s.flash.kind === 'error' ? 'alert' : 'status'}">${s.flash.text}</div>` : '';
  const crumbs = o.crumbs?.length
    ? html`<nav class="crumbs" aria-label="Breadcrumb"><ol>${o.crumbs.map(([label, href]) => html`<li><a href="${href}">${label}</a></li>`)}</ol></nav>`
    : '';
  const problems = o.problems?.length ? html`<div class="flash flash-error" role="alert">${joinHtml(o.problems, ' ')}</div>` : '';
  ctx.status = o.status ?? (o.problems?.length ? 400 : 200);
  ctx.type = 'html';
  ctx.body = shell(
    assets,
    o.title,
    html`<a class="skip" href="#main">Skip to content</a>
<header class="top"><a class="brand" href="/console">Posthorn</a><span class="team" title="Your team">${s.teamName}</span>
<form method="post" action="/console/logout" class="signout"><input type="hidden" name="_csrf" value="${s.csrfToken}"><a href="/console/account">${s.user.email}</a> <button type="submit" class="link">Sign out</button></form></header>
<div class="frame"><nav class="side" aria-label="Console">${navList(TEAM_NAV, o.nav)}${s.user.operator ? html`<p class="nav-group">Operator</p>${navList(OPERATOR_NAV, o.nav)}` : ''}</nav>
<main id="main" tabindex="-1">${crumbs}<div class="title-row"><h1>${o.title}</h1>${o.actions ? html`<div class="actions">${o.actions}</div>` : ''}</div>${flash}${problems}${o.body}</main></div>
<footer class="foot"><a href="/v1/openapi.json">API reference (OpenAPI)</a> · <a href="/health">Health</a></footer>`,
  ).value;
}

/** A page without the console's navigation (sign-in, errors before sign-in). */
export function renderBarePage(ctx: { status: number; type: string; body: unknown }, assets: ConsoleAssets, title: string, body: HtmlValue, status = 200): void {
  ctx.status = status;
  ctx.type = 'html';
  ctx.body = shell(assets, title, html`<main id="main" class="bare"><h1>${title}</h1>${body}</main>`, 'bare-body').value;
}

// ---------------------------------------------------------------------------
// Components

export const csrfField = (ctx: ConsoleContext) => html`<input type="hidden" name="_csrf" value="${ctx.state.console.csrfToken}">`;

/** A one-button form for an action (POST, CSRF-protected); `confirm` asks first (with script). */
export function actionButton(ctx: ConsoleContext, action: string, label: string, o: { confirm?: string; kind?: 'danger' | 'secondary' | 'primary'; fields?: Record<string, string> } = {}): SafeHtml {
  return html`<form method="post" action="${action}" class="inline"${o.confirm ? html` data-confirm="${o.confirm}"` : ''}>${csrfField(ctx)}${Object.entries(o.fields ?? {}).map(([k, v]) => html`<input type="hidden" name="${k}" value="${v}">`)}<button type="submit" class="btn ${o.kind ?? 'secondary'}">${label}</button></form>`;
}

const STATUS_TONE: Record<string, string> = {
  DELIVERED: 'good', SUCCESS: 'good', SENT: 'info', OPENED: 'good', CLICKED: 'good', SUCCEEDED: 'good', ACTIVE: 'good', DONE: 'good', delivered: 'good',
  QUEUED: 'info', SCHEDULED: 'info', RUNNING: 'info', PENDING: 'warn', NOT_STARTED: 'muted', DRAFT: 'muted', PAUSED: 'warn', DISCARDED: 'muted', queued: 'info',
  DELIVERY_DELAYED: 'warn', TEMPORARY_FAILURE: 'warn', CANCELLED: 'muted', MANUAL: 'muted', cancelled: 'muted',
  BOUNCED: 'bad', FAILED: 'bad', COMPLAINED: 'bad', REJECTED: 'bad', SUPPRESSED: 'bad', RENDERING_FAILURE: 'bad', AUTO_DISABLED: 'bad', HARD_BOUNCE: 'bad', COMPLAINT: 'bad', bounced: 'bad', failed: 'bad', suppressed: 'bad',
};

export function badge(status: string | null | undefined): SafeHtml {
  if (!status) return html`<span class="badge muted">none</span>`;
  return html`<span class="badge ${STATUS_TONE[status] ?? 'muted'}">${status.replace(/_/g, ' ')}</span>`;
}

/** A timestamp in UTC, readable and machine-readable. */
export function time(iso: string | null | undefined): SafeHtml {
  if (!iso) return html`<span class="muted">—</span>`;
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return html`${iso}`;
  return html`<time datetime="${d.toISOString()}">${d.toISOString().slice(0, 16).replace('T', ' ')} UTC</time>`;
}

/** A table in a scrollable, focusable region (narrow screens scroll it, not the page). */
export function table(label: string, headers: HtmlValue[], rows: HtmlValue[][], empty = 'Nothing here yet.'): SafeHtml {
  if (rows.length === 0) return html`<p class="empty">${empty}</p>`;
  return html`<div class="table-wrap" role="region" aria-label="${label}" tabindex="0"><table><thead><tr>${headers.map((h) => html`<th scope="col">${h}</th>`)}</tr></thead>
<tbody>${rows.map((r) => html`<tr>${r.map((c) => html`<td>${c}</td>`)}</tr>`)}</tbody></table></div>`;
}

export interface PageInfo {
  page: number;
  limit: number;
  total: number;
}

/** Previous / next links keeping the other query parameters. */
export function pager(path: string, p: PageInfo, query: Record<string, string | undefined | readonly string[]> = {}): SafeHtml {
  const pages = Math.max(1, Math.ceil(p.total / p.limit));
  if (pages <= 1) return html`<p class="count">${p.total} in all</p>`;
  const link = (n: number, label: string, rel: string) => html`<a rel="${rel}" href="${path}${queryString({ ...query, page: String(n) })}">${label}</a>`;
  return html`<nav class="pager" aria-label="Pages">${p.page > 1 ? link(p.page - 1, '← Previous', 'prev') : ''}<span>Page ${p.page} of ${pages} · ${p.total} in all</span>${p.page < pages ? link(p.page + 1, 'Next →', 'next') : ''}</nav>`;
}

// Form fields: every input has a visible label; hints are tied with aria-describedby.

interface FieldOptions {
  name: string;
  label: string;
  value?: string | number | null;
  type?: string;
  required?: boolean;
  hint?: string;
  autocomplete?: string;
  placeholder?: string;
  min?: number;
  max?: number;
  id?: string;
  pattern?: string;
}

const idOf = (o: { name: string; id?: string }) => o.id ?? `f-${o.name.replace(/[^A-Za-z0-9_-]/g, '-')}`;

export function input(o: FieldOptions): SafeHtml {
  const id = idOf(o);
  return html`<div class="field"><label for="${id}">${o.label}${o.required ? html` <span class="req" aria-hidden="true">*</span>` : ''}</label>
<input id="${id}" name="${o.name}" type="${o.type ?? 'text'}"${o.value !== undefined && o.value !== null ? html` value="${String(o.value)}"` : ''}${o.required ? html` required` : ''}${o.autocomplete ? html` autocomplete="${o.autocomplete}"` : ''}${o.placeholder ? html` placeholder="${o.placeholder}"` : ''}${o.min !== undefined ? html` min="${o.min}"` : ''}${o.max !== undefined ? html` max="${o.max}"` : ''}${o.pattern ? html` pattern="${o.pattern}"` : ''}${o.hint ? html` aria-describedby="${id}-hint"` : ''}>
${o.hint ? html`<p class="hint" id="${id}-hint">${o.hint}</p>` : ''}</div>`;
}

export function textarea(o: FieldOptions & { rows?: number; mono?: boolean }): SafeHtml {
  const id = idOf(o);
  return html`<div class="field"><label for="${id}">${o.label}</label>
<textarea id="${id}" name="${o.name}" rows="${o.rows ?? 8}"${o.mono ? html` class="mono"` : ''}${o.required ? html` required` : ''}${o.placeholder ? html` placeholder="${o.placeholder}"` : ''}${o.hint ? html` aria-describedby="${id}-hint"` : ''}>${o.value ?? ''}</textarea>
${o.hint ? html`<p class="hint" id="${id}-hint">${o.hint}</p>` : ''}</div>`;
}

export function select(o: FieldOptions & { options: readonly (readonly [string, string])[] }): SafeHtml {
  const id = idOf(o);
  const current = o.value === undefined || o.value === null ? undefined : String(o.value);
  return html`<div class="field"><label for="${id}">${o.label}</label>
<select id="${id}" name="${o.name}"${o.required ? html` required` : ''}${o.hint ? html` aria-describedby="${id}-hint"` : ''}>${o.options.map(([v, l]) => html`<option value="${v}"${v === current ? html` selected` : ''}>${l}</option>`)}</select>
${o.hint ? html`<p class="hint" id="${id}-hint">${o.hint}</p>` : ''}</div>`;
}

export function checkbox(o: { name: string; label: string; checked: boolean; hint?: string; value?: string }): SafeHtml {
  const id = idOf(o);
  return html`<div class="field check"><input id="${id}" type="checkbox" name="${o.name}" value="${o.value ?? 'on'}"${o.checked ? html` checked` : ''}${o.hint ? html` aria-describedby="${id}-hint"` : ''}><label for="${id}">${o.label}</label>
${o.hint ? html`<p class="hint" id="${id}-hint">${o.hint}</p>` : ''}</div>`;
}

/** A section with a heading; `id` makes it a live region target. */
export function section(title: string, body: HtmlValue, o: { id?: string } = {}): SafeHtml {
  return html`<section class="card"${o.id ? html` id="${o.id}"` : ''}><h2>${title}</h2>${body}</section>`;
}

export function definitionList(items: [string, HtmlValue][]): SafeHtml {
  return html`<dl class="facts">${items.map(([k, v]) => html`<div><dt>${k}</dt><dd>${v}</dd></div>`)}</dl>`;
}

export { joinHtml };
