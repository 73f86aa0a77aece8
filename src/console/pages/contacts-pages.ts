import type Router from '@koa/router';
import { contactBookCreateSchema, contactBookPatchSchema } from '../../core/contacts/contact-book-service.js';
import { contactCreateSchema, contactPatchSchema } from '../../core/contacts/contact-schema.js';
import { badRequest } from '../../core/errors.js';
import { route, type PageDeps } from '../console-deps.js';
import { field, parseWith, scopeOf, type ConsoleContext } from '../console-context.js';
import { isSecure, redirectWithFlash } from '../console-responses.js';
import { html, seg } from '../html.js';
import { actionButton, badge, checkbox, csrfField, definitionList, input, pager, renderPage, section, table, textarea, time } from '../layout.js';
import { ListQuery } from '../list-filters.js';
import { importSection } from './contact-import-pages.js';

// Contact books and their contacts: search, add, edit, delete (import and export are in
// contact-import-pages.ts).

/**
 * Properties are edited as name=value lines. A value may hold line breaks (the API and a CSV
 * import's quoted fields allow them), so a value is written with \n for LF, \r for CR and \\
 * for a backslash, and read back the same way: what the form shows saves as what it showed.
 */
const escapeValue = (v: string) => v.replace(/[\\\r\n]/g, (ch) => (ch === '\\' ? '\\\\' : ch === '\n' ? '\\n' : '\\r'));
const unescapeValue = (v: string) => v.replace(/\\([\\nr])/g, (_, ch: string) => (ch === 'n' ? '\n' : ch === 'r' ? '\r' : '\\'));

function propertiesText(properties: Record<string, string>): string {
  return Object.entries(properties).map(([k, v]) => `${k}=${escapeValue(v)}`).join('\n');
}

/**
 * "name=value" lines to properties; the contact schema checks the names. Spaces around a typed
 * value are dropped, but a value that reads as the one shown keeps its stored form: spaces the API
 * set at its edges survive an edit of another field.
 */
function propertiesFrom(text: string, shown: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  text.split(/\r\n|\r|\n/).forEach((line, i) => {
    if (!line.trim()) return;
    const eq = line.indexOf('=');
    if (eq < 1) throw badRequest(`properties: line ${i + 1} is not name=value`);
    const name = line.slice(0, eq).trim();
    const value = unescapeValue(line.slice(eq + 1).trim());
    const before = Object.hasOwn(shown, name) ? shown[name] : undefined;
    out[name] = before !== undefined && before.trim() === value ? before : value;
  });
  return out;
}

const optional = (v: string) => (v === '' ? null : v);

/**
 * The checkbox only when it was changed: left as shown, it says nothing. A contact awaiting its
 * double opt-in confirmation shows unticked, and an explicit "not subscribed" would record it
 * as unsubscribed, voiding its confirmation, whenever its name was edited.
 */
function subscribedOf(f: URLSearchParams): boolean | undefined {
  const ticked = f.has('subscribed');
  const shown = f.get('subscribedShown');
  return shown !== null && (shown === 'on') === ticked ? undefined : ticked;
}

export function contactsPages(r: Router, d: PageDeps): void {
  const secure = isSecure(d.publicUrl);
  const { contactBooks, contacts } = d.services;
  const bookPath = (ctx: ConsoleContext) => `/console/contacts/${seg(ctx.params.bookId!)}`;

  route(r, 'get', '/contacts', async (ctx) => {
    const books = await contactBooks.list(scopeOf(ctx));
    renderPage(ctx, d.assets, {
      title: 'Contacts',
      nav: 'contacts',
      body: html`${section('New contact book', html`<form method="post" action="/console/contacts" class="row-form">${csrfField(ctx)}
${input({ name: 'name', label: 'Name', required: true, placeholder: 'Newsletter' })}<button type="submit" class="btn primary">Create book</button></form>`)}
${table('Contact books', ['Book', 'Contacts', 'Double opt-in', 'Created'], books.map((b) => [
  html`<a href="/console/contacts/${seg(b.id)}">${b.name}</a>`,
  String(b._count.contacts),
  b.doubleOptInEnabled ? 'on' : 'off',
  time(b.createdAt),
]), 'No contact books yet.')}`,
    });
  });

  route(r, 'post', '/contacts', async (ctx) => {
    const book = await contactBooks.create(scopeOf(ctx), parseWith(contactBookCreateSchema, { name: field(ctx, 'name') }));
    redirectWithFlash(ctx, secure, `/console/contacts/${seg(book.id)}`, { kind: 'ok', text: `Contact book ${book.name} created.` });
  });

  route(r, 'get', '/contacts/:bookId', async (ctx) => {
    const scope = scopeOf(ctx);
    const book = await contactBooks.get(scope, ctx.params.bookId!);
    const q = new ListQuery(ctx.querystring);
    const search = q.text('q', 'Search');
    const p = q.page();
    const found = await contacts.search(scope, book.id, { search, offset: p.offset, limit: p.limit });
    renderPage(ctx, d.assets, {
      title: `${book.name}`,
      nav: 'contacts',
      crumbs: [['Contacts', '/console/contacts']],
      problems: q.problems,
      actions: html`<a class="btn secondary" href="/console/contacts/${seg(book.id)}/export.csv" download>Export CSV</a>`,
      body: html`<form method="get" class="filters" role="search" aria-label="Search contacts">${input({ name: 'q', label: 'Search by email or name', value: search, type: 'search' })}<button type="submit" class="btn secondary">Search</button></form>
${table('Contacts', ['Email', 'Name', 'Subscribed', 'Added'], found.items.map((c) => [
  html`<a href="/console/contacts/${seg(book.id)}/contacts/${seg(c.id)}">${c.email}</a>`,
  [c.firstName, c.lastName].filter(Boolean).join(' ') || html`<span class="muted">—</span>`,
  c.subscribed ? badge('SUBSCRIBED') : html`${badge(c.unsubscribeReason ?? 'PENDING')}`,
  time(c.createdAt),
]), search ? 'No contact matches.' : 'No contacts yet: add one or import a CSV file.')}
${pager(`/console/contacts/${seg(book.id)}`, { ...p, total: found.total }, { q: search })}
<div class="grid-2">${section('Add a contact', html`<form method="post" action="/console/contacts/${seg(book.id)}/contacts" class="stack">${csrfField(ctx)}
${input({ name: 'email', label: 'Email', type: 'email', required: true })}<div class="row">${input({ name: 'firstName', label: 'First name' })}${input({ name: 'lastName', label: 'Last name' })}</div>
<button type="submit" class="btn primary">Add contact</button></form>`)}
${await importSection(ctx, d, book.id)}</div>
${section('Book settings', html`<form method="post" action="/console/contacts/${seg(book.id)}/settings" class="stack">${csrfField(ctx)}
${input({ name: 'name', label: 'Name', value: book.name, required: true })}
${checkbox({ name: 'doubleOptInEnabled', label: 'Double opt-in: new contacts confirm by email first', checked: book.doubleOptInEnabled })}
${input({ name: 'doubleOptInFrom', label: 'Confirmation sender', value: book.doubleOptInFrom ?? '', placeholder: 'Newsletter <hello@example.com>', hint: 'An address on a verified domain; needed with double opt-in.' })}
<button type="submit" class="btn primary">Save</button></form>
<p>${actionButton(ctx, `/console/contacts/${seg(book.id)}/delete`, 'Delete this book', { kind: 'danger', confirm: `Delete ${book.name} and its ${book._count.contacts} contacts?` })}</p>`)}`,
    });
  });

  route(r, 'post', '/contacts/:bookId/settings', async (ctx) => {
    const f = ctx.state.console.form;
    await contactBooks.update(scopeOf(ctx), ctx.params.bookId!, parseWith(contactBookPatchSchema, {
      name: field(ctx, 'name'),
      doubleOptInEnabled: f.has('doubleOptInEnabled'),
      doubleOptInFrom: optional(field(ctx, 'doubleOptInFrom')),
    }));
    redirectWithFlash(ctx, secure, bookPath(ctx), { kind: 'ok', text: 'Book saved.' });
  });

  route(r, 'post', '/contacts/:bookId/delete', async (ctx) => {
    await contactBooks.remove(scopeOf(ctx), ctx.params.bookId!);
    redirectWithFlash(ctx, secure, '/console/contacts', { kind: 'ok', text: 'Contact book deleted.' });
  });

  route(r, 'post', '/contacts/:bookId/contacts', async (ctx) => {
    const body = parseWith(contactCreateSchema, { email: field(ctx, 'email'), firstName: optional(field(ctx, 'firstName')), lastName: optional(field(ctx, 'lastName')) });
    await contacts.create(scopeOf(ctx), ctx.params.bookId!, body);
    redirectWithFlash(ctx, secure, bookPath(ctx), { kind: 'ok', text: `${body.email} added.` });
  });

  route(r, 'get', '/contacts/:bookId/contacts/:contactId', async (ctx) => {
    const scope = scopeOf(ctx);
    const book = await contactBooks.get(scope, ctx.params.bookId!);
    const c = await contacts.get(scope, book.id, ctx.params.contactId!);
    const base = `/console/contacts/${seg(book.id)}/contacts/${seg(c.id)}`;
    renderPage(ctx, d.assets, {
      title: c.email,
      nav: 'contacts',
      crumbs: [['Contacts', '/console/contacts'], [`${book.name}`, `/console/contacts/${seg(book.id)}`]],
      body: html`${section('Contact', definitionList([
        ['Status', c.subscribed ? badge('SUBSCRIBED') : badge(c.unsubscribeReason ?? 'PENDING')],
        ['Added', time(c.createdAt)],
        ['Updated', time(c.updatedAt)],
        ['Id', html`<code>${c.id}</code>`],
      ]))}
${section('Edit', html`<form method="post" action="${base}" class="stack">${csrfField(ctx)}
<div class="row">${input({ name: 'firstName', label: 'First name', value: c.firstName })}${input({ name: 'lastName', label: 'Last name', value: c.lastName })}</div>
<input type="hidden" name="subscribedShown" value="${c.subscribed ? 'on' : 'off'}">${checkbox({ name: 'subscribed', label: 'Subscribed', checked: c.subscribed })}
${textarea({ name: 'properties', label: 'Properties', rows: 5, mono: true, value: propertiesText(c.properties), hint: 'One name=value per line; in a value, \\n is a line break and \\\\ a backslash.' })}
<button type="submit" class="btn primary">Save</button></form>`)}
${section('Delete', actionButton(ctx, `${base}/delete`, 'Delete contact', { kind: 'danger', confirm: `Delete ${c.email}?` }))}`,
    });
  });

  route(r, 'post', '/contacts/:bookId/contacts/:contactId', async (ctx) => {
    const scope = scopeOf(ctx);
    const current = await contacts.get(scope, ctx.params.bookId!, ctx.params.contactId!);
    const patch = parseWith(contactPatchSchema, {
      firstName: optional(field(ctx, 'firstName')),
      lastName: optional(field(ctx, 'lastName')),
      subscribed: subscribedOf(ctx.state.console.form),
      properties: propertiesFrom(ctx.state.console.form.get('properties') ?? '', current.properties),
    });
    await contacts.update(scope, ctx.params.bookId!, ctx.params.contactId!, patch);
    redirectWithFlash(ctx, secure, `${bookPath(ctx)}/contacts/${seg(ctx.params.contactId!)}`, { kind: 'ok', text: 'Contact saved.' });
  });

  route(r, 'post', '/contacts/:bookId/contacts/:contactId/delete', async (ctx) => {
    await contacts.remove(scopeOf(ctx), ctx.params.bookId!, ctx.params.contactId!);
    redirectWithFlash(ctx, secure, bookPath(ctx), { kind: 'ok', text: 'Contact deleted.' });
  });
}
