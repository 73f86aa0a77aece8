import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// When a contact book's delete began (null for a book not being deleted): set in the
// transaction that finds no campaign needing the book, before its contacts go in batches, so a
// campaign scheduled or created to send on it meanwhile is refused instead of left needing a
// book whose contacts are gone. A run again finds the column and adds nothing.
export async function up(db: Kysely<unknown>): Promise<void> {
  const tables = await db.introspection.getTables();
  const has = tables.find((t) => t.name === 'contact_books')?.columns.some((c) => c.name === 'deleting_since') ?? false;
  if (!has) await sql`alter table contact_books add column deleting_since text`.execute(db);
}
