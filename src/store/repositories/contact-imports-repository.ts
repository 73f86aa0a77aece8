import type { Selectable, Updateable } from 'kysely';
import type { Db } from '../db.js';
import { groupCommitOf } from '../group-commit.js';
import { isPostgres, transact, withDialect } from '../store-context.js';
import type { ContactImportsTable } from '../tables/database.js';

export type ContactImportRow = Selectable<ContactImportsTable>;
export type ContactImportChanges = Updateable<ContactImportsTable>;

/** An import's columns as callers see it: not the node that runs it (owner); its file is a table of its own. */
const IMPORT_COLUMNS = ['id', 'team_id', 'contact_book_id', 'file_name', 'status', 'total_rows', 'processed_rows', 'created_count', 'updated_count', 'error_count', 'errors_json', 'failure', 'created_at', 'updated_at'] as const;

/** A progress record inside a chunk's transaction found the import no longer this node's: the chunk rolls back with it. */
export class ImportNotOwnedError extends Error {
  constructor(readonly importId: string) {
    super(`contact import ${importId} is no longer this node's to run (another node took it over, or it ended)`);
    this.name = 'ImportNotOwnedError';
  }
}

/** The progress write, while the import is still RUNNING and `owner`'s (both engines compile it from here). */
export function recordQuery(db: Db, id: string, owner: string, changes: ContactImportChanges) {
  return db.updateTable('contact_imports').set(changes).where('id', '=', id).where('status', '=', 'RUNNING').where('owner', '=', owner);
}

/** Whether `changes` end the import (done or failed): its file then goes in the same transaction. */
export function endsImport(changes: ContactImportChanges): boolean {
  return changes.status !== undefined && changes.status !== 'RUNNING';
}

/** Deletes an ended import's file; run only after recordQuery ended it, in the same transaction. */
export function dropFileQuery(db: Db, id: string) {
  return db.deleteFrom('contact_import_files').where('import_id', '=', id);
}

/** Background CSV imports of contacts (the console's import page). */
export function createContactImportsRepository(db: Db) {
  // recordInOpenTransaction writes inside a chunk's contacts transaction: on SQLite a synchronous
  // statement on the one connection lands in the transaction open on it; PostgreSQL queues it and
  // writes it before that transaction commits (store/pg/pg-contact-imports.ts).
  const sync = groupCommitOf(db);
  return withDialect(db, 'contactImports', {
    /**
     * Inserts the import unless its team already has `max` running; false then. `owner`: the node
     * that runs it (several nodes may share the store). On PostgreSQL the team's row is locked
     * first, so two nodes' starts for one team count one after the other.
     */
    async insertIfRoom(row: ContactImportRow, file: string, owner: string, max: number): Promise<boolean> {
      return transact(db, async (trx) => {
        if (isPostgres(db)) await trx.selectFrom('teams').select('id').where('id', '=', row.team_id).forUpdate().execute();
        const { n } = await trx
          .selectFrom('contact_imports')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('team_id', '=', row.team_id)
          .where('status', '=', 'RUNNING')
          .executeTakeFirstOrThrow();
        if (Number(n) >= max) return false;
        await trx.insertInto('contact_imports').values({ ...row, owner }).execute();
        // The file apart: each chunk's progress update then rewrites a small row, not the file.
        await trx.insertInto('contact_import_files').values({ import_id: row.id, team_id: row.team_id, content: file }).execute();
        return true;
      });
    },
    async findById(teamId: number, id: string): Promise<ContactImportRow | undefined> {
      return db
        .selectFrom('contact_imports')
        .select(IMPORT_COLUMNS)
        .where('team_id', '=', teamId)
        .where('id', '=', id)
        .executeTakeFirst();
    },
    /** A running import's uploaded file (undefined once it ended: its file went with its end). */
    async readFile(teamId: number, id: string): Promise<string | undefined> {
      const r = await db.selectFrom('contact_import_files').select('content').where('team_id', '=', teamId).where('import_id', '=', id).executeTakeFirst();
      return r?.content;
    },
    /** The latest imports into a book. */
    async listForBook(teamId: number, bookId: string, limit: number): Promise<ContactImportRow[]> {
      return db
        .selectFrom('contact_imports')
        .select(IMPORT_COLUMNS)
        .where('team_id', '=', teamId)
        .where('contact_book_id', '=', bookId)
        .orderBy('created_at', 'desc')
        .orderBy('id')
        .limit(limit)
        .execute();
    },
    /**
     * The unfinished imports `owner` is to run: with `any`, every one (a lone node: they were
     * all its own); otherwise those nobody runs (their node died) or already its own, or with
     * 'unowned' only those nobody runs; taken in one statement so two nodes never take the same.
     */
    async claimRunning(owner: string, any: boolean | 'unowned'): Promise<ContactImportRow[]> {
      let q = db.updateTable('contact_imports').set({ owner }).where('status', '=', 'RUNNING');
      if (any === 'unowned') q = q.where('owner', 'is', null);
      else if (!any) q = q.where((eb) => eb.or([eb('owner', 'is', null), eb('owner', '=', owner)]));
      const rows = await q.returning(IMPORT_COLUMNS).execute();
      return rows.sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : 0));
    },
    /** The import, while it is still RUNNING and `owner`'s to run. */
    async findRunning(id: string, owner: string): Promise<ContactImportRow | undefined> {
      return db
        .selectFrom('contact_imports')
        .select(IMPORT_COLUMNS)
        .where('id', '=', id)
        .where('status', '=', 'RUNNING')
        .where('owner', '=', owner)
        .executeTakeFirst();
    },
    /**
     * Records a run's progress or end, only while the import is still RUNNING and `owner`'s: false
     * when another node took it over (this one was taken for dead), so that one's work stands.
     */
    async record(id: string, owner: string, changes: ContactImportChanges): Promise<boolean> {
      if (!endsImport(changes)) return (await recordQuery(db, id, owner, changes).executeTakeFirst()).numUpdatedRows > 0n;
      // The end and the file's delete commit together: an import is never ended with its file kept, nor running without it.
      return transact(db, async (trx) => {
        if ((await recordQuery(trx, id, owner, changes).executeTakeFirst()).numUpdatedRows === 0n) return false;
        await dropFileQuery(trx, id).execute();
        return true;
      });
    },
    /**
     * The same record inside the write transaction the caller has open (a chunk's contacts, which
     * then commit only with their progress): throws ImportNotOwnedError, failing that transaction,
     * when the import is no longer RUNNING and `owner`'s. Throws outside a transaction.
     */
    recordInOpenTransaction(id: string, owner: string, changes: ContactImportChanges): void {
      if (!sync.sqlite.inTransaction) throw new Error('recordInOpenTransaction: no transaction is open');
      const q = recordQuery(db, id, owner, changes).compile();
      // prepared statements are cached by their text (statement-cache.ts)
      if (sync.sqlite.prepare(q.sql).run(...q.parameters).changes === 0) throw new ImportNotOwnedError(id);
      if (endsImport(changes)) {
        const d = dropFileQuery(db, id).compile();
        sync.sqlite.prepare(d.sql).run(...d.parameters);
      }
    },
  });
}
export type ContactImportsRepository = ReturnType<typeof createContactImportsRepository>;
