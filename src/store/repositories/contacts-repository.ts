import { sql, type Selectable, type Transaction, type Updateable } from 'kysely';
import type { Db } from '../db.js';
import { transact } from '../store-context.js';
import type { ContactsTable, Database } from '../tables/database.js';
import type { FilterNode } from './contact-filter-sql.js';
import { contactsInBook, type BookKey } from './contacts-scope.js';
import { boundedRead } from '../bounded-read.js';

export type ContactRow = Selectable<ContactsTable>;
export type ContactChanges = Omit<Updateable<ContactsTable>, 'id' | 'team_id' | 'contact_book_id' | 'created_at'>;

type Executor = Db | Transaction<Database>;

// SQLite bounds the number of bound parameters per statement; 11 columns x 500 rows stays far
// below it and keeps each statement's size reasonable.
const INSERT_CHUNK = 500;
const LOOKUP_CHUNK = 900;

/** Newest first; rowid breaks ties between contacts created in the same millisecond (bulk adds). */
const NEWEST_FIRST = sql`contacts.created_at desc, contacts.rowid desc`;

function chunks<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/**
 * The contact an id was merged into: contacts stored twice for one mailbox under two keys were
 * merged by migrations 20261129060000-address-keys and 20261130010000-contact-unquoted-keys, and
 * links in mail sent before name the other.
 * Asked only when no contact has the id, so the usual path costs nothing more.
 */
async function mergedInto(db: Executor, id: string): Promise<string | undefined> {
  return (await db.selectFrom('contact_aliases').select('contact_id').where('id', '=', id).executeTakeFirst())?.contact_id;
}

/**
 * A link's change to a contact (unsubscribe, subscribe again): `update` changes the row and
 * returns it, or nothing when it is already so (changed: false). The id may be one the contact
 * was merged from (mail sent before the merge); undefined when neither is there.
 */
async function markLinked(db: Executor, teamId: number, id: string, update: (contactId: string) => Promise<ContactRow | undefined>): Promise<{ row: ContactRow; changed: boolean } | undefined> {
  const mark = async (contactId: string) => {
    const row = await update(contactId);
    if (row) return { row, changed: true };
    const same = await db.selectFrom('contacts').selectAll().where('team_id', '=', teamId).where('id', '=', contactId).executeTakeFirst();
    return same && { row: same, changed: false };
  };
  const marked = await mark(id);
  if (marked) return marked;
  const merged = await mergedInto(db, id);
  return merged === undefined ? undefined : mark(merged);
}

function build(db: Executor) {
  return {
    async findById(book: BookKey, id: string): Promise<ContactRow | undefined> {
      return db.selectFrom('contacts').selectAll().where('team_id', '=', book.teamId).where('contact_book_id', '=', book.bookId).where('id', '=', id).executeTakeFirst();
    },

    async findByEmail(book: BookKey, email: string): Promise<ContactRow | undefined> {
      return db.selectFrom('contacts').selectAll().where('team_id', '=', book.teamId).where('contact_book_id', '=', book.bookId).where('email', '=', email).executeTakeFirst();
    },

    /** Contacts of the book with these (normalised) emails, keyed by email. */
    async findByEmails(book: BookKey, emails: string[]): Promise<Map<string, ContactRow>> {
      const found = new Map<string, ContactRow>();
      for (const part of chunks([...new Set(emails)], LOOKUP_CHUNK)) {
        const rows = await db.selectFrom('contacts').selectAll().where('team_id', '=', book.teamId).where('contact_book_id', '=', book.bookId).where('email', 'in', part).execute();
        for (const r of rows) found.set(r.email, r);
      }
      return found;
    },

    async insertMany(rows: ContactsTable[]): Promise<void> {
      for (const part of chunks(rows, INSERT_CHUNK)) await db.insertInto('contacts').values(part).execute();
    },

    async update(book: BookKey, id: string, changes: ContactChanges): Promise<ContactRow | undefined> {
      return db.updateTable('contacts').set(changes).where('team_id', '=', book.teamId).where('contact_book_id', '=', book.bookId).where('id', '=', id).returningAll().executeTakeFirst();
    },

    /** Deletes and returns what was deleted (nothing when already gone). */
    async deleteMany(book: BookKey, ids: string[]): Promise<ContactRow[]> {
      const out: ContactRow[] = [];
      for (const part of chunks([...new Set(ids)], LOOKUP_CHUNK)) {
        out.push(...(await db.deleteFrom('contacts').where('team_id', '=', book.teamId).where('contact_book_id', '=', book.bookId).where('id', 'in', part).returningAll().execute()));
      }
      return out;
    },

    /** Deletes up to `limit` contacts of a book and returns them (book deletion works in bounded batches). */
    async deleteBatchOfBook(book: BookKey, limit: number): Promise<ContactRow[]> {
      return db
        .deleteFrom('contacts')
        .where('id', 'in', (eb) => eb.selectFrom('contacts').select('id').where('team_id', '=', book.teamId).where('contact_book_id', '=', book.bookId).limit(limit))
        .returningAll()
        .execute();
    },

    /** `emails` and `ids` narrow the list; an empty one matches nothing (never every contact, never `in ()`). */
    async list(book: BookKey, f: { emails?: string[]; ids?: string[]; offset: number; limit: number }): Promise<ContactRow[]> {
      if (f.emails?.length === 0 || f.ids?.length === 0) return [];
      return boundedRead(db, async (rdb) => {
        let q = rdb.selectFrom('contacts').selectAll().where('team_id', '=', book.teamId).where('contact_book_id', '=', book.bookId);
        if (f.emails) q = q.where('email', 'in', f.emails);
        if (f.ids) q = q.where('id', 'in', f.ids);
        return q.orderBy(NEWEST_FIRST).limit(f.limit).offset(f.offset).execute();
      });
    },

    /** A segment evaluated now: the filter runs in SQL, with the total for the page envelope. */
    async listMatching(scope: BookKey, filter: FilterNode, page: { offset: number; limit: number }): Promise<{ rows: ContactRow[]; total: number }> {
      // Served on behalf of requests only (members, previews, searches, exports): bounded by store.statementTimeout.
      return boundedRead(db, async (rdb) => {
        const base = contactsInBook(rdb, scope, filter);
        const rows = await base.selectAll().orderBy(NEWEST_FIRST).limit(page.limit).offset(page.offset).execute();
        const total = await base.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
        return { rows, total: Number(total.n) };
      });
    },

    /**
     * Marks a contact unsubscribed with a reason (unsubscribe links, bounces, complaints). The id
     * may be one the contact was merged from (a link in mail sent before the merge). `changed` is
     * false for a contact already unsubscribed for that reason (a second click, a second
     * bounce): its row is left as it was.
     */
    async unsubscribe(teamId: number, id: string, reason: string, nowIso: string): Promise<{ row: ContactRow; changed: boolean } | undefined> {
      return markLinked(db, teamId, id, (contactId) =>
        db
          .updateTable('contacts')
          .set({ subscribed: 0, unsubscribe_reason: reason, updated_at: nowIso })
          .where('team_id', '=', teamId)
          .where('id', '=', contactId)
          .where((eb) => eb.or([eb('subscribed', '<>', 0), eb('unsubscribe_reason', 'is', null), eb('unsubscribe_reason', '<>', reason)]))
          .returningAll()
          .executeTakeFirst(),
      );
    },

    /**
     * Undoes the contact's own unsubscribe (reason UNSUBSCRIBED), never a bounce's or a
     * complaint's. `changed` is false when there was nothing to undo; undefined when there is no
     * such contact (the id may be one it was merged from, as for unsubscribe).
     */
    async resubscribe(teamId: number, id: string, nowIso: string): Promise<{ row: ContactRow; changed: boolean } | undefined> {
      return markLinked(db, teamId, id, (contactId) =>
        db
          .updateTable('contacts')
          .set({ subscribed: 1, unsubscribe_reason: null, updated_at: nowIso })
          .where('team_id', '=', teamId)
          .where('id', '=', contactId)
          .where('subscribed', '=', 0)
          .where('unsubscribe_reason', '=', 'UNSUBSCRIBED')
          .returningAll()
          .executeTakeFirst(),
      );
    },

    /**
     * Double opt-in confirmation: subscribes the contact only while it is pending, never one
     * who unsubscribed in the meantime. Returns the row when it changed.
     */
    async confirmPending(id: string, nowIso: string): Promise<ContactRow | undefined> {
      return db
        .updateTable('contacts')
        .set({ subscribed: 1, updated_at: nowIso })
        .where('id', '=', id)
        .where('subscribed', '=', 0)
        .where('unsubscribe_reason', 'is', null)
        .returningAll()
        .executeTakeFirst();
    },

    /** The contact of a link (double opt-in): the id may be one it was merged from, as for unsubscribe. */
    async findAnyBook(id: string): Promise<ContactRow | undefined> {
      const find = (contactId: string) => db.selectFrom('contacts').selectAll().where('id', '=', contactId).executeTakeFirst();
      const row = await find(id);
      if (row) return row;
      const merged = await mergedInto(db, id);
      return merged === undefined ? undefined : find(merged);
    },
  };
}

export type ContactsStore = ReturnType<typeof build>;

export function createContactsRepository(db: Db) {
  return {
    ...build(db),
    /** Runs fn in one transaction with the same functions bound to it (read-decide-write stays atomic). */
    async transaction<T>(fn: (tx: ContactsStore) => Promise<T>): Promise<T> {
      return transact(db, (trx) => fn(build(trx)));
    },
  };
}
export type ContactsRepository = ReturnType<typeof createContactsRepository>;
