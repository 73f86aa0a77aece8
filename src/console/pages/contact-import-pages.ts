import { Readable } from 'node:stream';
import type Router from '@koa/router';
import { contactsCsvHeader, contactsCsvLines, MAX_CSV_BYTES } from '../../core/contacts/contact-csv.js';
import { badRequest, notFound } from '../../core/errors.js';
import { route, type PageDeps } from '../console-deps.js';
import { scopeOf, type ConsoleContext } from '../console-context.js';
import { isSecure, redirectWithFlash } from '../console-responses.js';
import { html, seg, type SafeHtml } from '../html.js';
import { badge, csrfField, definitionList, renderPage, section, table, time } from '../layout.js';

// CSV import (a background job in core, shown with a progress bar and, at the end, every
// refused row with its line) and CSV export of a contact book.

export async function importSection(ctx: ConsoleContext, d: PageDeps, bookId: string): Promise<SafeHtml> {
  const recent = await d.services.contactImports.listForBook(scopeOf(ctx), bookId, 5);
  return section('Import a CSV file', html`<form method="post" action="/console/contacts/${seg(bookId)}/import" enctype="multipart/form-data" class="stack">${csrfField(ctx)}
<div class="field"><label for="f-file">CSV file</label><input id="f-file" name="file" type="file" accept=".csv,text/csv" required aria-describedby="f-file-hint">
<p class="hint" id="f-file-hint">The first line names the columns: <code>email</code> (required), <code>firstName</code>, <code>lastName</code>, <code>subscribed</code>; any other column becomes a property. An address already in the book is updated.</p></div>
<button type="submit" class="btn primary">Import</button></form>
${recent.length ? html`<h3>Recent imports</h3><ul class="plain">${recent.map((i) => html`<li><a href="/console/contacts/${seg(bookId)}/imports/${seg(i.id)}">${i.fileName}</a> ${badge(i.status)} ${i.processedRows}/${i.totalRows} rows, ${i.errorCount} refused · ${time(i.createdAt)}</li>`)}</ul>` : ''}`);
}

/** The upload route, under /console: the one request whose form may be as large as CSV_IMPORT_BODY_LIMIT. */
export const CSV_IMPORT_ROUTE = '/contacts/:bookId/import';
/** A CSV file of MAX_CSV_BYTES with room for the multipart framing and the other fields. */
export const CSV_IMPORT_BODY_LIMIT = MAX_CSV_BYTES + 64 * 1024;

export function contactImportPages(r: Router, d: PageDeps): void {
  const secure = isSecure(d.publicUrl);
  const { contactImports, contactBooks, contacts } = d.services;

  route(r, 'post', CSV_IMPORT_ROUTE, async (ctx) => {
    const file = ctx.state.console.file;
    if (!file || !file.text.trim()) throw badRequest('file: choose a CSV file to import');
    const job = await contactImports.start(scopeOf(ctx), ctx.params.bookId!, file.name, file.text);
    redirectWithFlash(ctx, secure, `/console/contacts/${seg(ctx.params.bookId!)}/imports/${seg(job.id)}`, { kind: 'ok', text: `Importing ${job.totalRows} rows from ${job.fileName}.` });
  });

  route(r, 'get', '/contacts/:bookId/imports/:importId', async (ctx) => {
    const scope = scopeOf(ctx);
    const book = await contactBooks.get(scope, ctx.params.bookId!);
    const job = await contactImports.get(scope, ctx.params.importId!);
    if (job.contactBookId !== book.id) throw notFound(`import ${job.id} not found`);
    const running = job.status === 'RUNNING';
    const shown = job.errors.length;
    renderPage(ctx, d.assets, {
      title: `Import of ${job.fileName}`,
      nav: 'contacts',
      crumbs: [['Contacts', '/console/contacts'], [`${book.name}`, `/console/contacts/${seg(book.id)}`]],
      body: html`<div id="live-import"${running ? html` data-live="700"` : ''}>
${section('Progress', html`<p><label for="import-progress">${job.processedRows} of ${job.totalRows} rows processed</label></p>
<progress id="import-progress" max="${Math.max(1, job.totalRows)}" value="${job.processedRows}">${job.processedRows} of ${job.totalRows}</progress>
${definitionList([
  ['Status', badge(job.status)],
  ['Added', String(job.created)],
  ['Updated', String(job.updated)],
  ['Refused', String(job.errorCount)],
  ['Started', time(job.createdAt)],
])}${job.failure ? html`<p class="flash flash-error" role="alert">The import stopped: ${job.failure}</p>` : ''}`)}
${!running && job.errorCount > 0 ? section('Refused rows', html`${table('Refused rows', ['Line', 'Email', 'Why'], job.errors.map((e) => [String(e.line), e.email || html`<span class="muted">—</span>`, e.message]))}
${job.errorCount > shown ? html`<p class="hint">And ${job.errorCount - shown} more not listed.</p>` : ''}`, { id: 'import-errors' }) : ''}
${!running && job.errorCount === 0 && job.status === 'DONE' ? html`<p class="all-good">Every row was imported.</p>` : ''}
</div>`,
    });
  });

  route(r, 'get', '/contacts/:bookId/export.csv', async (ctx) => {
    const scope = scopeOf(ctx);
    const book = await contactBooks.get(scope, ctx.params.bookId!);
    // Properties differ between contacts: one pass finds every column, the second writes.
    const keys = new Set<string>();
    for await (const page of contacts.exportAll(scope, book.id)) for (const c of page) for (const k of Object.keys(c.properties)) keys.add(k);
    const columns = [...keys].sort();
    async function* lines() {
      yield '\uFEFF' + contactsCsvHeader(columns); // the BOM makes spreadsheets read UTF-8
      for await (const page of contacts.exportAll(scope, book.id)) yield contactsCsvLines(page, columns);
    }
    ctx.set('Content-Disposition', `attachment; filename="contacts-${book.id}.csv"`);
    ctx.type = 'text/csv; charset=utf-8';
    ctx.body = Readable.from(lines());
  });
}
