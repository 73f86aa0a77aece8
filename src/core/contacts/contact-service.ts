import { z } from 'zod';
import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../lib/logger.js';
import type { ContactBook, ContactBooksRepository } from '../../store/repositories/contact-books-repository.js';
import type { ContactRow, ContactsRepository, ContactsStore } from '../../store/repositories/contacts-repository.js';
import type { ContactsTable } from '../../store/tables/database.js';
import type { FilterGroup } from '../../store/repositories/contact-filter-sql.js';
import type { DomainService } from '../domains/domain-service.js';
import { issuePath, plainIssues } from '../plain-issues.js';
import type { EmailService, SendContext, SendInTransaction, SendReadAhead } from '../emails/email-service.js';
import { lowerAddressTerm, mailboxKey, unquoted } from '../emails/addresses.js';
import { AppError, badRequest, notFound, notUnique } from '../errors.js';
import type { BusEvent, ContactEventType, EventBus } from '../events.js';
import { resolveSender, type BookScope } from './contact-book-service.js';
import { contactCreateSchema, normalizeContactEmail, type ContactCreateInput, type ContactPatchInput } from './contact-schema.js';
import { CONFIRMATION_TTL_MS, signConfirmationToken, verifyConfirmationToken } from './confirmation-token.js';
import { CONFIRM_URL_VARIABLE, LEGACY_CONFIRM_URL_VARIABLE, confirmationTemplate, personalize } from './double-opt-in-content.js';
import { isPending, type Fields, merge, newContact, changesOf } from './contact-rows.js';
import { isForeignKeyViolation, isUniqueViolation as isStoreUniqueViolation } from '../../store/store-errors.js';
import { orTooSlow } from '../query-too-slow.js';

/** Spec, Limits: bulk add and bulk delete take at most 1000 contacts per request. */
export const MAX_BULK_CONTACTS = 1000;
/** Book deletion removes contacts in batches of this many (one short transaction each). */
const DELETE_BATCH = 1000;
/** Why a contact is unsubscribed. A contact with subscribed = false and no reason is pending double opt-in. */
export type UnsubscribeReason = 'UNSUBSCRIBED' | 'BOUNCED' | 'COMPLAINED';

export interface ContactView {
  id: string;
  email: string;
  firstName: string | null;
  lastName: string | null;
  subscribed: boolean;
  /** Null while subscribed, and while a double opt-in confirmation is pending. */
  unsubscribeReason: UnsubscribeReason | null;
  properties: Record<string, string>;
  contactBookId: string;
  createdAt: string;
  updatedAt: string;
}

export const bulkDeleteSchema = z
  .object({ contactIds: z.array(z.string().min(1).max(100)).min(1, 'at least 1 contact id').max(MAX_BULK_CONTACTS, `at most ${MAX_BULK_CONTACTS} contact ids`) })
  .strict();

export function contactView(r: ContactRow): ContactView {
  return {
    id: r.id,
    email: r.email,
    firstName: r.first_name,
    lastName: r.last_name,
    subscribed: r.subscribed === 1,
    unsubscribeReason: r.unsubscribe_reason as UnsubscribeReason | null,
    properties: JSON.parse(r.properties_json) as Record<string, string>,
    contactBookId: r.contact_book_id,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

/**
 * A write found inside its transaction that it needs a confirmation nobody read ahead for (a
 * concurrent change of the book or the contact made one necessary only now): it is rolled back
 * and redone once the sender is checked and the confirmation's reads are made.
 */
class ConfirmationNeeded extends Error {}

/** What a write's confirmations need, read before its transaction: the checked sender, and the store reads of sends to `addresses`. */
interface ConfirmationReads {
  sender: string;
  addresses: Set<string>;
  ahead: SendReadAhead;
}

function isUniqueViolation(err: unknown): boolean {
  return isStoreUniqueViolation(err, 'contacts');
}

export type ConfirmationState =
  | { state: 'invalid' }
  | { state: 'expired' }
  | { state: 'gone' }
  | { state: 'unsubscribed'; bookName: string; email: string }
  | { state: 'pending'; bookName: string; email: string }
  | { state: 'confirmed'; bookName: string; email: string };

export interface ContactServiceDeps {
  books: ContactBooksRepository;
  contacts: ContactsRepository;
  domains: DomainService;
  /**
   * The one send path (architecture.md, House rules 1); double opt-in mail goes through it like
   * any other, written in its contact's transaction (the transactional outbox).
   */
  emails: Pick<EmailService, 'readAhead' | 'prepareInTransaction'>;
  events: EventBus;
  clock: Clock;
  logger: Logger;
  /** App secret: signs confirmation links. */
  secret: string;
  /** POSTHORN_PUBLIC_URL without a trailing slash: confirmation links point here. */
  publicUrl: string;
}

export interface BulkAddResult {
  message: string;
  /** Valid rows, each now in the book (added, updated or already as given). */
  count: number;
  created: number;
  updated: number;
  /** Rows refused, by their index in the request. */
  errors: { index: number; email: string | null; message: string }[];
}

export function createContactService(deps: ContactServiceDeps) {
  const { books, contacts, events, clock } = deps;

  function contactEvent(type: ContactEventType, r: ContactRow): BusEvent {
    const v = contactView(r);
    return {
      type,
      teamId: r.team_id,
      domainId: null,
      occurredAt: clock.now().toISOString(),
      data: { id: v.id, email: v.email, contactBookId: v.contactBookId, subscribed: v.subscribed, properties: v.properties, firstName: v.firstName, lastName: v.lastName, createdAt: v.createdAt, updatedAt: v.updatedAt },
    };
  }

  /**
   * A contact write and its events in one transaction: the events' transactional subscribers
   * (the webhook outbox) write inside it, so a process killed right after the commit still
   * has them; the after-commit handlers follow the commit (events.ts), and then `sent`'s
   * (confirmation emails queued in the same transaction).
   */
  async function announced<T>(write: (tx: ContactsStore) => Promise<{ value: T; events: BusEvent[]; sent?: SendInTransaction[] }>): Promise<T> {
    const done = await contacts.transaction(async (tx) => {
      const r = await write(tx);
      events.inTransaction(r.events);
      return r;
    });
    for (const e of done.events) events.emit(e);
    for (const m of done.sent ?? []) m.announce();
    return done.value;
  }

  /**
   * Runs a read-decide-write again when it lost a race on the (book, email) key: on PostgreSQL two
   * requests adding one new address both read "not in the book" and the second insert fails. Run
   * again, it reads the winner's row and updates it, as a request after it would (SQLite runs
   * one transaction at a time). A rolled-back run left nothing behind, its events included.
   */
  async function retryOnRace<T>(bookId: string, write: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await write();
      } catch (err) {
        // The book was deleted after it was read: answered as a request after the deletion is.
        if (isForeignKeyViolation(err, 'contacts')) throw notFound(`contact book ${bookId} not found`);
        if (attempt >= 3 || !isUniqueViolation(err)) throw err;
      }
    }
  }

  /** Contacts deleted by another service's transaction (a book's deletion), inside it. */
  function deletedEvents(rows: ContactRow[]): BusEvent[] {
    const list = rows.map((r) => contactEvent('contact.deleted', r));
    events.inTransaction(list);
    return list;
  }

  async function loadBook(teamId: number, bookId: string): Promise<ContactBook> {
    const book = await books.findById(teamId, bookId);
    if (!book) throw notFound(`contact book ${bookId} not found`);
    return book;
  }

  async function loadContact(teamId: number, bookId: string, id: string): Promise<ContactRow> {
    const c = await contacts.findById({ teamId, bookId }, id);
    if (!c) throw notFound(`contact ${id} not found in contact book ${bookId}`);
    return c;
  }

  function confirmUrl(contactId: string): string {
    const token = signConfirmationToken(deps.secret, contactId, clock.nowMs() + CONFIRMATION_TTL_MS);
    return `${deps.publicUrl}/confirm/${token}`;
  }

  /** Checked before writing when a confirmation will be needed, so a bad sender changes nothing. */
  async function senderFor(scope: BookScope, book: ContactBook): Promise<string> {
    if (!book.double_opt_in_from) throw badRequest(`contact book ${book.id}: double opt-in is on but doubleOptInFrom is not set`);
    return resolveSender(deps.domains, scope, book.double_opt_in_from, 'doubleOptInFrom');
  }

  /**
   * Made before a write that may need confirmations: a bad sender refuses it before anything is
   * written, and the sends' store reads (sending domain, suppressions) are not made inside it.
   */
  async function confirmationReads(scope: BookScope, book: ContactBook, addresses: string[]): Promise<ConfirmationReads> {
    const sender = await senderFor(scope, book);
    const ahead = await deps.emails.readAhead(confirmationContext(book), sender, addresses);
    return { sender, addresses: new Set(addresses), ahead };
  }

  function confirmationContext(book: ContactBook): SendContext {
    return { teamId: book.team_id, domainId: null, apiKeyId: null };
  }

  /**
   * Queues each row's confirmation email in the contact write's open transaction, through the
   * normal send checks (a suppressed address gets a SUPPRESSED email and no mail), so the
   * contact and its confirmation commit together or not at all (architecture.md, The
   * transactional outbox). `strict` decides only about a confirmation that can not be built (a
   * 400 of the send checks, nothing queued yet): strict rethrows it and the contact is not
   * written either (single adds: the caller sees why); otherwise it is logged and the contact is
   * stored without one (bulk adds: one bad row does not refuse the rest). A failure to store a
   * confirmation is never caught here: it fails the whole write.
   */
  async function queueConfirmations(reads: ConfirmationReads | null, book: ContactBook, rows: ContactRow[], strict: boolean): Promise<SendInTransaction[]> {
    if (!rows.length) return [];
    if (!reads || rows.some((r) => !reads.addresses.has(r.email))) throw new ConfirmationNeeded();
    const tpl = confirmationTemplate({ subject: book.double_opt_in_subject, content: book.double_opt_in_content });
    const ctx = confirmationContext(book);
    const sent: SendInTransaction[] = [];
    for (const r of rows) {
      const url = confirmUrl(r.id);
      const values: Record<string, string> = {
        ...(JSON.parse(r.properties_json) as Record<string, string>),
        email: r.email,
        firstName: r.first_name ?? '',
        lastName: r.last_name ?? '',
        [CONFIRM_URL_VARIABLE]: url,
        [LEGACY_CONFIRM_URL_VARIABLE]: url,
      };
      const mail = personalize(tpl, values);
      let prepared: SendInTransaction;
      try {
        prepared = await deps.emails.prepareInTransaction(ctx, { from: reads.sender, to: r.email, subject: mail.subject, html: mail.html, text: mail.text }, { contactId: r.id }, reads.ahead);
      } catch (err) {
        if (strict || !(err instanceof AppError)) throw err;
        deps.logger.warn({ err, contactId: r.id, contactBookId: book.id }, 'double opt-in confirmation could not be sent');
        continue;
      }
      prepared.queue();
      sent.push(prepared);
    }
    return sent;
  }

  /**
   * Runs a contact write with the reads its confirmations need, made first when `needed` says
   * so, or once the write finds inside its transaction that it needs them after all.
   */
  async function withConfirmationReads<T>(needed: boolean, read: () => Promise<ConfirmationReads>, write: (reads: ConfirmationReads | null) => Promise<T>): Promise<T> {
    let reads = needed ? await read() : null;
    for (;;) {
      try {
        return await write(reads);
      } catch (err) {
        if (!(err instanceof ConfirmationNeeded) || reads) throw err;
        reads = await read();
      }
    }
  }

  /**
   * Create-or-update of one contact by email (POST) or by id then email (PUT). Reads, decides
   * and writes in one transaction, the confirmation email and the events with it.
   */
  async function writeOne(scope: BookScope, bookId: string, input: ContactCreateInput, how: { putId?: string }): Promise<{ contactId: string }> {
    const book = await loadBook(scope.teamId, bookId);
    const email = normalizeContactEmail(input.email);
    const fields: Fields = { firstName: input.firstName, lastName: input.lastName, properties: input.properties, subscribed: input.subscribed };
    // POST of an address still pending re-sends its confirmation (the person asked again);
    // PUT never re-sends, so repeating it is harmless.
    const resend = how.putId === undefined;

    let needed = false;
    if (book.double_opt_in_enabled === 1) {
      const before = (how.putId && (await contacts.findById({ teamId: scope.teamId, bookId }, how.putId))) || (await contacts.findByEmail({ teamId: scope.teamId, bookId }, email));
      needed = input.subscribed !== false && (!before || (resend && isPending(before)));
    }

    const nowIso = clock.now().toISOString();
    try {
      const row = await withConfirmationReads(needed, () => confirmationReads(scope, book, [email]), (reads) => retryOnRace(bookId, () => announced(async (tx: ContactsStore) => {
        const result = async (r: { row: ContactRow; event: ContactEventType | null; confirm: boolean }) => ({
          value: r.row,
          events: r.event ? [contactEvent(r.event, r.row)] : [],
          sent: await queueConfirmations(reads, book, r.confirm ? [r.row] : [], true),
        });
        let existing = how.putId ? await tx.findById({ teamId: scope.teamId, bookId }, how.putId) : undefined;
        if (existing && existing.email !== email) {
          const clash = await tx.findByEmail({ teamId: scope.teamId, bookId }, email);
          if (clash) throw notUnique(`email: ${email} already belongs to contact ${clash.id} in this book`);
        }
        existing ??= await tx.findByEmail({ teamId: scope.teamId, bookId }, email);
        if (!existing) {
          const created = newContact(scope.teamId, book, email, fields, nowIso);
          await tx.insertMany([created.row]);
          return result({ row: created.row, event: 'contact.created', confirm: created.confirm });
        }
        const base = existing.email === email ? existing : { ...existing, email };
        const after = merge(base, fields, 'import', book, nowIso) ?? (base !== existing ? { ...base, updated_at: nowIso } : undefined);
        const confirm = resend && book.double_opt_in_enabled === 1 && isPending(after ?? existing);
        if (!after) return result({ row: existing, event: null, confirm });
        const saved = await tx.update({ teamId: scope.teamId, bookId }, existing.id, changesOf(after));
        return result({ row: saved ?? after, event: 'contact.updated', confirm });
      })));
      return { contactId: row.id };
    } catch (err) {
      if (isUniqueViolation(err)) throw notUnique(`email: ${email} already exists in contact book ${bookId}`);
      throw err;
    }
  }

  async function deleteAllInBook(teamId: number, bookId: string): Promise<void> {
    for (;;) {
      const rows = await announced(async (tx) => {
        const deleted = await tx.deleteBatchOfBook({ teamId, bookId }, DELETE_BATCH);
        return { value: deleted, events: deleted.map((r) => contactEvent('contact.deleted', r)) };
      });
      if (rows.length < DELETE_BATCH) return;
    }
  }


  async function resolveToken(token: string): Promise<{ state: ConfirmationState; contact?: ContactRow }> {
    const check = verifyConfirmationToken(deps.secret, token, clock.nowMs());
    if (!check.ok) return { state: { state: check.reason } };
    const contact = await contacts.findAnyBook(check.contactId);
    if (!contact) return { state: { state: 'gone' } };
    const book = await books.findById(contact.team_id, contact.contact_book_id);
    const bookName = book?.name ?? 'this list';
    if (contact.subscribed === 1) return { state: { state: 'confirmed', bookName, email: contact.email }, contact };
    if (contact.unsubscribe_reason !== null) return { state: { state: 'unsubscribed', bookName, email: contact.email }, contact };
    return { state: { state: 'pending', bookName, email: contact.email }, contact };
  }

  return {
    contactView,
    deletedEvents,
    deleteAllInBook,

    async create(scope: BookScope, bookId: string, input: ContactCreateInput): Promise<{ contactId: string }> {
      return writeOne(scope, bookId, input, {});
    },

    async upsert(scope: BookScope, bookId: string, contactId: string, input: ContactCreateInput): Promise<{ contactId: string }> {
      return writeOne(scope, bookId, input, { putId: contactId });
    },

    async get(scope: BookScope, bookId: string, id: string): Promise<ContactView> {
      await loadBook(scope.teamId, bookId);
      return contactView(await loadContact(scope.teamId, bookId, id));
    },

    async list(
      scope: BookScope,
      bookId: string,
      // Split, trimmed and deduplicated by the API (commaListQuery). Absent: no filter. Empty:
      // refused here too, since no caller asking for "these contacts" means "all of them".
      q: { emails?: string[]; ids?: string[]; offset: number; limit: number },
    ): Promise<ContactView[]> {
      await loadBook(scope.teamId, bookId);
      for (const [name, list] of [['emails', q.emails], ['ids', q.ids]] as const) {
        if (list?.length === 0) throw badRequest(`${name}: is empty; leave the parameter out not to filter by it`);
        if ((list?.length ?? 0) > MAX_BULK_CONTACTS) throw badRequest(`${name}: at most ${MAX_BULK_CONTACTS} ${name === 'emails' ? 'addresses' : 'contact ids'}`);
      }
      // Keyed as addresses are stored (lowercased, the domain in A-labels), not validated: an
      // address nobody has finds nobody.
      const emails = q.emails?.map(mailboxKey);
      return (await orTooSlow(contacts.list({ teamId: scope.teamId, bookId }, { emails, ids: q.ids, offset: q.offset, limit: q.limit }))).map(contactView);
    },

    /**
     * Contacts of a book whose email or name contains `search` (case ignored), newest
     * first, with the total: the same SQL path as segments, so the book's walls hold.
     */
    async search(scope: BookScope, bookId: string, q: { search?: string; offset: number; limit: number }): Promise<{ items: ContactView[]; total: number }> {
      await loadBook(scope.teamId, bookId);
      const term = q.search?.trim().slice(0, 200) ?? '';
      const filter: FilterGroup = term
        ? { match: 'any', conditions: [{ field: 'email', op: 'contains', value: lowerAddressTerm(unquoted(term)) }, { field: 'firstName', op: 'contains', value: term }, { field: 'lastName', op: 'contains', value: term }] }
        : { match: 'all', conditions: [] };
      const { rows, total } = await orTooSlow(contacts.listMatching({ teamId: scope.teamId, bookId }, filter, { offset: q.offset, limit: q.limit }));
      return { items: rows.map(contactView), total };
    },

    /** Every contact of a book, a page at a time (CSV export), newest first. */
    async *exportAll(scope: BookScope, bookId: string, pageSize = 1000): AsyncGenerator<ContactView[]> {
      await loadBook(scope.teamId, bookId);
      const all: FilterGroup = { match: 'all', conditions: [] };
      for (let offset = 0; ; offset += pageSize) {
        const { rows } = await orTooSlow(contacts.listMatching({ teamId: scope.teamId, bookId }, all, { offset, limit: pageSize }));
        if (rows.length) yield rows.map(contactView);
        if (rows.length < pageSize) return;
      }
    },

    async update(scope: BookScope, bookId: string, id: string, patch: ContactPatchInput): Promise<{ contactId: string }> {
      const book = await loadBook(scope.teamId, bookId);
      const nowIso = clock.now().toISOString();
      await announced(async (tx) => {
        const existing = await tx.findById({ teamId: scope.teamId, bookId }, id);
        if (!existing) throw notFound(`contact ${id} not found in contact book ${bookId}`);
        const after = merge(existing, patch, 'explicit', book, nowIso);
        const saved = after ? ((await tx.update({ teamId: scope.teamId, bookId }, id, changesOf(after))) ?? after) : undefined;
        return { value: saved, events: saved ? [contactEvent('contact.updated', saved)] : [] };
      });
      return { contactId: id };
    },

    async remove(scope: BookScope, bookId: string, id: string): Promise<{ success: boolean }> {
      await loadBook(scope.teamId, bookId);
      const deleted = await announced(async (tx) => {
        const rows = await tx.deleteMany({ teamId: scope.teamId, bookId }, [id]);
        return { value: rows, events: rows.map((r) => contactEvent('contact.deleted', r)) };
      });
      if (!deleted.length) throw notFound(`contact ${id} not found in contact book ${bookId}`);
      return { success: true };
    },

    async bulkRemove(scope: BookScope, bookId: string, contactIds: string[]): Promise<{ success: boolean; count: number }> {
      await loadBook(scope.teamId, bookId);
      const deleted = await announced(async (tx) => {
        const rows = await tx.deleteMany({ teamId: scope.teamId, bookId }, contactIds);
        return { value: rows, events: rows.map((r) => contactEvent('contact.deleted', r)) };
      });
      return { success: true, count: deleted.length };
    },

    /**
     * Bulk add: every valid row is written in one transaction (a row whose email is already in
     * the book updates that contact; a repeated email in the request updates its earlier row);
     * invalid rows are reported by index and change nothing. `inTransaction` runs with the
     * counts inside the write's transaction (a CSV import's progress record, so its chunk commits
     * only with its progress); it may throw to roll the write back, and runs again if the write
     * is retried.
     */
    async bulkAdd(scope: BookScope, bookId: string, body: unknown, inTransaction?: (outcome: Pick<BulkAddResult, 'created' | 'updated' | 'errors'>) => void): Promise<BulkAddResult> {
      if (!Array.isArray(body)) throw badRequest('body: must be an array of contacts');
      if (body.length === 0) throw badRequest('body: at least 1 contact is required');
      if (body.length > MAX_BULK_CONTACTS) throw badRequest(`body: at most ${MAX_BULK_CONTACTS} contacts per request (got ${body.length})`);
      const book = await loadBook(scope.teamId, bookId);

      const errors: BulkAddResult['errors'] = [];
      const valid: { email: string; fields: Fields }[] = [];
      body.forEach((raw, index) => {
        const rawEmail = raw && typeof raw === 'object' && typeof (raw as { email?: unknown }).email === 'string' ? (raw as { email: string }).email : null;
        const parsed = contactCreateSchema.safeParse(raw, plainIssues);
        if (!parsed.success) {
          const issue = parsed.error.issues[0]!;
          errors.push({ index, email: rawEmail, message: `${issuePath([index, ...issue.path])}: ${issue.message}` });
          return;
        }
        const email = addressOrNull(parsed.data.email);
        if (!email) {
          errors.push({ index, email: rawEmail, message: `[${index}].email: "${parsed.data.email}" is not a valid email address` });
          return;
        }
        const { firstName, lastName, properties, subscribed } = parsed.data;
        valid.push({ email, fields: { firstName, lastName, properties, subscribed } });
      });

      let needed = false;
      if (book.double_opt_in_enabled === 1 && valid.length) {
        // Any address not yet in the book will need a confirmation: check the sender first, so
        // a sender that cannot send refuses the request before anything is written.
        const known = await contacts.findByEmails({ teamId: scope.teamId, bookId }, valid.map((v) => v.email));
        needed = valid.some((v) => !known.has(v.email) && v.fields.subscribed !== false);
      }

      const nowIso = clock.now().toISOString();
      const addresses = [...new Set(valid.map((v) => v.email))];
      const result = await withConfirmationReads(needed, () => confirmationReads(scope, book, addresses), (reads) => retryOnRace(bookId, () => announced(async (tx) => {
        const existing = await tx.findByEmails({ teamId: scope.teamId, bookId }, valid.map((v) => v.email));
        const inserts = new Map<string, { row: ContactsTable; confirm: boolean }>();
        const updates = new Map<string, ContactRow>();
        for (const { email, fields } of valid) {
          const pendingInsert = inserts.get(email);
          if (pendingInsert) {
            // The same address twice in one request: later values win, as separate requests would.
            const merged = merge(pendingInsert.row, fields, 'import', book, nowIso) ?? pendingInsert.row;
            inserts.set(email, { row: merged, confirm: pendingInsert.confirm && isPending(merged) });
            continue;
          }
          const current = existing.get(email);
          if (!current) {
            inserts.set(email, newContact(scope.teamId, book, email, fields, nowIso));
            continue;
          }
          const after = merge(updates.get(current.id) ?? current, fields, 'import', book, nowIso);
          if (after) updates.set(current.id, after);
        }
        // Rows are written in one order for every request (new ones by email, updated ones by
        // id): on PostgreSQL two imports of the same rows in different orders would each wait
        // for a row the other wrote (a deadlock). Events keep the request's order.
        await tx.insertMany([...inserts.values()].map((i) => i.row).sort((a, b) => compare(a.email, b.email)));
        const written = new Map<string, ContactRow>();
        for (const after of [...updates.values()].sort((a, b) => compare(a.id, b.id))) {
          written.set(after.id, (await tx.update({ teamId: scope.teamId, bookId }, after.id, changesOf(after))) ?? after);
        }
        const saved = [...updates.keys()].map((id) => written.get(id)!);
        const value = { inserts: [...inserts.values()], saved };
        // Built inside the write (no store reads: `reads` made them), in the request's order.
        const sent = await queueConfirmations(reads, book, value.inserts.filter((i) => i.confirm).map((i) => i.row), false);
        inTransaction?.({ created: value.inserts.length, updated: saved.length, errors });
        return {
          value,
          events: [...value.inserts.map((i) => contactEvent('contact.created', i.row)), ...saved.map((r) => contactEvent('contact.updated', r))],
          sent,
        };
      })));
      const created = result.inserts.length;
      const updated = result.saved.length;
      return {
        message: `Added ${created} contacts, updated ${updated}${errors.length ? `, rejected ${errors.length}` : ''}`,
        count: valid.length,
        created,
        updated,
        errors,
      };
    },

    /** For unsubscribe links, bounces and complaints: never resubscribed by an import afterwards. */
    async unsubscribe(teamId: number, contactId: string, reason: UnsubscribeReason): Promise<ContactView | undefined> {
      const row = await announced(async (tx) => {
        const marked = await tx.unsubscribe(teamId, contactId, reason, clock.now().toISOString());
        // A write that changes nothing announces nothing (a second click on the link).
        return { value: marked?.row, events: marked?.changed ? [contactEvent('contact.updated', marked.row)] : [] };
      });
      return row && contactView(row);
    },

    /** The unsubscribe page's "Subscribe again": undoes only the contact's own unsubscribe, never a bounce or a complaint. */
    async resubscribe(teamId: number, contactId: string): Promise<ContactView | undefined> {
      const row = await announced(async (tx) => {
        const marked = await tx.resubscribe(teamId, contactId, clock.now().toISOString());
        return { value: marked?.row, events: marked?.changed ? [contactEvent('contact.updated', marked.row)] : [] };
      });
      return row && contactView(row);
    },

    /** A book's contact at an address (an unsubscribe link whose contact was deleted since). */
    async findInBook(teamId: number, bookId: string, address: string): Promise<ContactView | undefined> {
      const email = addressOrNull(address);
      const row = email === null ? undefined : await contacts.findByEmail({ teamId, bookId }, email);
      return row && contactView(row);
    },

    /** GET on a confirmation link: what the page should say. Changes nothing (link scanners fetch it). */
    async confirmationState(token: string): Promise<ConfirmationState> {
      return (await resolveToken(token)).state;
    },

    /** POST on a confirmation link: subscribes a pending contact, never one who unsubscribed. */
    async confirm(token: string): Promise<ConfirmationState> {
      const { state, contact } = await resolveToken(token);
      if (state.state !== 'pending' || !contact) return state;
      const updated = await announced(async (tx) => {
        const changed = await tx.confirmPending(contact.id, clock.now().toISOString());
        return { value: changed, events: changed ? [contactEvent('contact.updated', changed)] : [] };
      });
      if (!updated) return (await resolveToken(token)).state; // changed meanwhile: report what it is now
      return { state: 'confirmed', bookName: state.bookName, email: updated.email };
    },

    /** A confirmation URL for a contact (tests and the CLI print one). */
    confirmUrl,
  };
}

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function addressOrNull(raw: string): string | null {
  try {
    return normalizeContactEmail(raw);
  } catch {
    return null;
  }
}

export type ContactService = ReturnType<typeof createContactService>;
