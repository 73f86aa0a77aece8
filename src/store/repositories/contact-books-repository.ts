import { sql, type Selectable, type Transaction, type Updateable } from 'kysely';
import type { Db } from '../db.js';
import { isPostgres, transact } from '../store-context.js';
import { boundedRead } from '../bounded-read.js';
import type { ContactBooksTable, Database } from '../tables/database.js';
import { BLOCKERS_NAMED, type CampaignRef } from './segments-repository.js';
import type { ContactRow } from './contacts-repository.js';

/** A book as stored. */
export type ContactBook = Selectable<ContactBooksTable>;
/** A book with its contacts counted, for the views that show the count. */
export type ContactBookRow = ContactBook & { contact_count: number };
export type ContactBookChanges = Omit<Updateable<ContactBooksTable>, 'id' | 'team_id' | 'created_at'>;

/** Live campaigns that will still send to the book (scheduled, running or paused), named by a refused delete. */
function campaignsNeeding(q: Db | Transaction<Database>, teamId: number, bookId: string): Promise<CampaignRef[]> {
  return q
    .selectFrom('campaigns')
    .select(['id', 'name', 'status'])
    .where('team_id', '=', teamId)
    .where('contact_book_id', '=', bookId)
    .where('deleted_at', 'is', null)
    .where('status', 'in', ['SCHEDULED', 'RUNNING', 'PAUSED'])
    .orderBy('created_at')
    .orderBy('id')
    .limit(BLOCKERS_NAMED)
    .execute();
}

export function createContactBooksRepository(db: Db) {
  const withCount = (q: Db | Transaction<Database> = db) =>
    q
      .selectFrom('contact_books')
      .selectAll('contact_books')
      .select((eb) =>
        eb
          .selectFrom('contacts')
          .select((c) => c.fn.countAll<number>().as('n'))
          .whereRef('contacts.contact_book_id', '=', 'contact_books.id')
          .as('contact_count'),
      );

  const normalise = (r: Omit<ContactBookRow, 'contact_count'> & { contact_count: number | null }): ContactBookRow => ({ ...r, contact_count: Number(r.contact_count ?? 0) });

  return {
    async insert(row: ContactBooksTable): Promise<ContactBookRow> {
      await db.insertInto('contact_books').values(row).execute();
      return { ...row, contact_count: 0 };
    },

    /**
     * The book alone: what every contact write, a campaign's batches and the audience checks
     * need. Counting the contacts reads the whole book's index (~25 ms at 500,000 contacts),
     * so only the views that show the count pay for it (findCounted).
     */
    async findById(teamId: number, id: string): Promise<ContactBook | undefined> {
      return db.selectFrom('contact_books').selectAll().where('team_id', '=', teamId).where('id', '=', id).executeTakeFirst();
    },

    /** Served on behalf of requests only: bounded by store.statementTimeout, as list is. */
    async findCounted(teamId: number, id: string): Promise<ContactBookRow | undefined> {
      const r = await boundedRead(db, (rdb) => withCount(rdb).where('contact_books.team_id', '=', teamId).where('contact_books.id', '=', id).executeTakeFirst());
      return r && normalise(r);
    },

    /** Served on behalf of requests only (each book's contacts are counted): bounded by store.statementTimeout. */
    async list(teamId: number): Promise<ContactBookRow[]> {
      const rows = await boundedRead(db, (rdb) => withCount(rdb).where('contact_books.team_id', '=', teamId).orderBy(sql`contact_books.created_at desc, contact_books.rowid desc`).execute());
      return rows.map(normalise);
    },

    async update(teamId: number, id: string, changes: ContactBookChanges): Promise<ContactBookRow | undefined> {
      const res = await db.updateTable('contact_books').set(changes).where('team_id', '=', teamId).where('id', '=', id).executeTakeFirst();
      if (Number(res.numUpdatedRows) === 0) return undefined;
      return this.findCounted(teamId, id);
    },

    /**
     * The first step of a delete: unless a campaign needs the book, marks it as being deleted,
     * in the transaction that looked (on PostgreSQL with the row locked, as a schedule or a
     * create to send holds it: campaigns-repository), so no campaign is scheduled or created
     * to send on it while its contacts go in batches. A book already being deleted is marked
     * again (a delete that failed half-way is taken up). Undefined when the book is not there.
     */
    async beginDelete(teamId: number, id: string, nowIso: string): Promise<{ blockedBy: CampaignRef[] } | undefined> {
      return transact(db, async (trx) => {
        const book = await trx.selectFrom('contact_books').select('id').where('team_id', '=', teamId).where('id', '=', id).$if(isPostgres(db), (q) => q.forUpdate()).executeTakeFirst();
        if (!book) return undefined;
        const blockedBy = await campaignsNeeding(trx, teamId, id);
        if (!blockedBy.length) await trx.updateTable('contact_books').set({ deleting_since: nowIso }).where('team_id', '=', teamId).where('id', '=', id).execute();
        return { blockedBy };
      });
    },

    /**
     * Removes the book with whatever contacts it still has (segments go by cascade) in one
     * transaction; returns those contacts, or undefined when the book is not there.
     */
    /** inTransaction runs inside the deleting transaction with the contacts it deleted (the outbox). */
    async delete(teamId: number, id: string, inTransaction?: (deleted: ContactRow[]) => void): Promise<ContactRow[] | { blockedBy: CampaignRef[] } | undefined> {
      return transact(db, async (trx) => {
        // Locked first on PostgreSQL: a schedule that holds the row commits before the check below.
        const book = await trx.selectFrom('contact_books').select('id').where('team_id', '=', teamId).where('id', '=', id).$if(isPostgres(db), (q) => q.forUpdate()).executeTakeFirst();
        if (!book) return undefined;
        const blockedBy = await campaignsNeeding(trx, teamId, id);
        if (blockedBy.length) return { blockedBy };
        const contacts = await trx.deleteFrom('contacts').where('contact_book_id', '=', id).returningAll().execute();
        await trx.deleteFrom('segments').where('contact_book_id', '=', id).execute();
        await trx.deleteFrom('contact_books').where('id', '=', id).execute();
        inTransaction?.(contacts);
        return contacts;
      });
    },
  };
}
export type ContactBooksRepository = ReturnType<typeof createContactBooksRepository>;
