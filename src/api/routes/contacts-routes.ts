import type Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import { contactCreateSchema, contactPatchSchema } from '../../core/contacts/contact-schema.js';
import { bulkDeleteSchema, MAX_BULK_CONTACTS, type ConfirmationState, type ContactService } from '../../core/contacts/contact-service.js';
import { escapeHtml } from '../../render/html-escape.js';
import { commaListQuery, optionalLimitQuery, pageQueries, stringPath } from '../params.js';
import { pageOf } from '../pagination.js';
import { defineRoute, type RouteDef } from '../route-types.js';
import { bulkCountSchema } from '../schemas/common-schemas.js';
import { contactBulkAddSchema, contactDeletedSchema, contactIdSchema, contactSchema } from '../schemas/contact-schemas.js';
import { bookScope, contactBookIdParam } from './contact-books-routes.js';

/** The bulk import body as documented; the service checks it row by row with contactCreateSchema. */
const bulkAddBody = z.array(contactCreateSchema).min(1).max(MAX_BULK_CONTACTS);

export function contactsRoutes(contacts: ContactService): RouteDef[] {
  const base = '/contactBooks/:contactBookId/contacts';
  const tag = 'Contacts';
  const bookParams = { contactBookId: contactBookIdParam };
  const params = { contactBookId: contactBookIdParam, contactId: stringPath('Contact id.') };
  const list = (what: string) =>
    commaListQuery(`Only these ${what}: comma-separated, or the parameter repeated (1 to ${MAX_BULK_CONTACTS}; given empty is 400).`, MAX_BULK_CONTACTS, what);
  return [
    defineRoute({
      method: 'POST',
      path: base,
      access: 'full',
      tag,
      summary: 'Add a contact (an address already in the book updates that contact).',
      request: { params: bookParams, body: contactCreateSchema },
      response: contactIdSchema,
      errors: [404],
      handler: async ({ auth, input }) => contacts.create(bookScope(auth), input.params.contactBookId, input.body),
    }),
    defineRoute({
      method: 'GET',
      path: base,
      access: 'full',
      tag,
      summary: 'List contacts, newest first (a bare array); filter by emails or ids (comma-separated): without a limit, every match.',
      request: { params: bookParams, query: { ...pageQueries(), limit: optionalLimitQuery('Page size, 1 to 100: by default 25, or with emails or ids every match.'), emails: list('addresses'), ids: list('contact ids') } },
      response: z.array(contactSchema),
      errors: [404],
      handler: async ({ auth, input: { params, query } }) => {
        // A lookup by emails or ids is answered whole (useSend's list had no 25-row page), and a
        // bare array has no hasMore to say a page was cut: each value matches at most one
        // contact, so the filter's size bounds the answer (at most 1000). Unfiltered, page by 25.
        const sizes = [query.emails, query.ids].flatMap((values) => (values ? [values.length] : []));
        const page = pageOf({ page: query.page, limit: query.limit ?? (sizes.length > 0 ? Math.min(...sizes) : 25) });
        return contacts.list(bookScope(auth), params.contactBookId, { emails: query.emails, ids: query.ids, offset: page.offset, limit: page.limit });
      },
    }),
    // The bulk routes come before /:contactId so "bulk" is never read as a contact id.
    defineRoute({
      method: 'POST',
      path: `${base}/bulk`,
      access: 'full',
      tag,
      summary: 'Add up to 1000 contacts in one transaction; invalid rows are reported, valid ones written.',
      request: { params: bookParams, body: bulkAddBody, bodyParsedBy: 'service' },
      response: contactBulkAddSchema,
      errors: [404],
      handler: async (req) => contacts.bulkAdd(bookScope(req.auth), req.input.params.contactBookId, req.body),
    }),
    defineRoute({
      method: 'DELETE',
      path: `${base}/bulk`,
      access: 'full',
      tag,
      summary: 'Delete up to 1000 contacts by id ({contactIds}, a JSON body on DELETE as the SDK sends it).',
      request: { params: bookParams, body: bulkDeleteSchema },
      response: bulkCountSchema,
      errors: [404],
      handler: async ({ auth, input }) => contacts.bulkRemove(bookScope(auth), input.params.contactBookId, input.body.contactIds),
    }),
    defineRoute({
      method: 'GET',
      path: `${base}/:contactId`,
      access: 'full',
      tag,
      summary: 'Get a contact.',
      request: { params },
      response: contactSchema,
      errors: [404],
      handler: async ({ auth, input }) => contacts.get(bookScope(auth), input.params.contactBookId, input.params.contactId),
    }),
    defineRoute({
      method: 'PATCH',
      path: `${base}/:contactId`,
      access: 'full',
      tag,
      summary: 'Change a contact (firstName, lastName, properties, subscribed).',
      request: { params, body: contactPatchSchema },
      response: contactIdSchema,
      errors: [404],
      handler: async ({ auth, input }) => contacts.update(bookScope(auth), input.params.contactBookId, input.params.contactId, input.body),
    }),
    defineRoute({
      method: 'PUT',
      path: `${base}/:contactId`,
      access: 'full',
      tag,
      summary: 'Upsert a contact (by id, then by email); safe to repeat.',
      request: { params, body: contactCreateSchema },
      response: contactIdSchema,
      errors: [404],
      handler: async ({ auth, input }) => contacts.upsert(bookScope(auth), input.params.contactBookId, input.params.contactId, input.body),
    }),
    defineRoute({
      method: 'DELETE',
      path: `${base}/:contactId`,
      access: 'full',
      tag,
      summary: 'Delete a contact (404 when already deleted).',
      request: { params },
      response: contactDeletedSchema,
      errors: [404],
      handler: async ({ auth, input }) => contacts.remove(bookScope(auth), input.params.contactBookId, input.params.contactId),
    }),
  ];
}

// ---------------------------------------------------------------------------
// Double opt-in confirmation pages, outside /v1 (mounted through createHttpApp's `extra`).
// GET only shows a button: mail scanners and link previewers fetch links, and a GET that
// confirmed would subscribe people who never clicked (useSend #412). POST confirms.

const PAGE_STATUS: Record<ConfirmationState['state'], number> = {
  pending: 200,
  confirmed: 200,
  unsubscribed: 409,
  invalid: 400,
  expired: 410,
  gone: 404,
};

function page(title: string, body: string): string {
  return [
    '<!DOCTYPE html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    '<meta name="robots" content="noindex">',
    `<title>${escapeHtml(title)}</title>`,
    '</head>',
    '<body style="margin:0;padding:48px 16px;background:#f4f4f5;font-family:-apple-system,BlinkMacSystemFont,Segoe UI,Roboto,Helvetica,Arial,sans-serif;color:#374151">',
    '<main style="max-width:480px;margin:0 auto;background:#ffffff;border-radius:8px;padding:32px;text-align:center">',
    `<h1 style="font-size:22px;color:#111827;margin:0 0 16px">${escapeHtml(title)}</h1>`,
    body,
    '</main>',
    '</body>',
    '</html>',
    '',
  ].join('\n');
}

function renderState(s: ConfirmationState, justConfirmed: boolean): string {
  const p = (text: string) => `<p style="line-height:24px;margin:0 0 16px">${text}</p>`;
  switch (s.state) {
    case 'pending':
      return page(
        'Confirm your subscription',
        p(`Confirm that <strong>${escapeHtml(s.email)}</strong> wants to receive email from <strong>${escapeHtml(s.bookName)}</strong>.`) +
          // No action attribute: the form posts back to this same URL, whatever host or prefix served it.
          '<form method="post"><button type="submit" style="background:#2563eb;color:#ffffff;border:0;border-radius:6px;padding:12px 24px;font-size:16px;cursor:pointer">Confirm subscription</button></form>',
      );
    case 'confirmed':
      return justConfirmed
        ? page('Subscription confirmed', p(`Thank you. <strong>${escapeHtml(s.email)}</strong> is now subscribed to <strong>${escapeHtml(s.bookName)}</strong>.`))
        : page('Already confirmed', p(`<strong>${escapeHtml(s.email)}</strong> is already subscribed to <strong>${escapeHtml(s.bookName)}</strong>.`));
    case 'unsubscribed':
      return page('Cannot confirm', p(`<strong>${escapeHtml(s.email)}</strong> has unsubscribed from <strong>${escapeHtml(s.bookName)}</strong>, so this link no longer subscribes it. To receive these emails again, ask the sender to add you back.`));
    case 'expired':
      return page('Link expired', p('This confirmation link has expired. Sign up again to get a new one.'));
    case 'gone':
      return page('Nothing to confirm', p('This subscription no longer exists.'));
    case 'invalid':
      return page('Invalid link', p('This confirmation link is not valid. Check that you copied the whole link from the email.'));
  }
}

function send(ctx: Context, state: ConfirmationState, justConfirmed: boolean): void {
  ctx.status = PAGE_STATUS[state.state];
  ctx.type = 'text/html; charset=utf-8';
  ctx.set('Cache-Control', 'no-store');
  // The token is in the URL: never leak it through Referer, never let the page be framed
  // (a framed confirm button could be clickjacked), and allow nothing but inline styles.
  ctx.set('Referrer-Policy', 'no-referrer');
  ctx.set('X-Frame-Options', 'DENY');
  ctx.set('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'");
  ctx.set('X-Robots-Tag', 'noindex');
  ctx.body = renderState(state, justConfirmed);
}

export function contactConfirmationPages(router: Router, contacts: ContactService): void {
  router.get('/confirm/:token', async (ctx) => {
    send(ctx, await contacts.confirmationState(ctx.params.token ?? ''), false);
  });
  router.post('/confirm/:token', async (ctx) => {
    const state = await contacts.confirm(ctx.params.token ?? '');
    send(ctx, state, state.state === 'confirmed');
  });
}
