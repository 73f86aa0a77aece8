import type { Selectable, Updateable } from 'kysely';
import type { Db } from '../db.js';
import type { ContactImportsTable } from '../tables/database.js';

export type ContactImportRow = Selectable<ContactImportsTable>;

/** Background CSV imports of contacts (the console's import page). */
export function createContactImportsRepository(db: Db) {
  return {
    async insert(row: ContactImportRow): Promise<void> {
      await db.insertInto('contact_imports').values(row).execute();
    },
    async findById(teamId: number, id: string): Promise<ContactImportRow | undefined> {
      return db.selectFrom('contact_imports').selectAll().where('team_id', '=', teamId).where('id', '=', id).executeTakeFirst();
    },
    /** The latest imports into a book, without their files. */
    async listForBook(teamId: number, bookId: string, limit: number): Promise<Omit<ContactImportRow, 'csv'>[]> {
      return db
        .selectFrom('contact_imports')
        .select(['id', 'team_id', 'contact_book_id', 'file_name', 'status', 'total_rows', 'processed_rows', 'created_count', 'updated_count', 'error_count', 'errors_json', 'failure', 'created_at', 'updated_at'])
        .where('team_id', '=', teamId)
        .where('contact_book_id', '=', bookId)
        .orderBy('created_at', 'desc')
        .orderBy('id')
        .limit(limit)
        .execute();
    },
    async listRunning(): Promise<ContactImportRow[]> {
      return db.selectFrom('contact_imports').selectAll().where('status', '=', 'RUNNING').orderBy('created_at').execute();
    },
    async update(id: string, changes: Updateable<ContactImportsTable>): Promise<void> {
      await db.updateTable('contact_imports').set(changes).where('id', '=', id).execute();
    },
  };
}
export type ContactImportsRepository = ReturnType<typeof createContactImportsRepository>;
