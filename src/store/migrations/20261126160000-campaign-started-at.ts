import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// When a campaign started sending: its audience is the book's contacts as of then, so a contact
// added while it runs is neither mailed by chance (ids are random) nor counted past its total.
// Null for campaigns started before this column existed (their audience stays open).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table campaigns add column started_at text`.execute(db);
}
