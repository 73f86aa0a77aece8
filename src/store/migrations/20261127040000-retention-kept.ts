import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// Content retention's emails past the age that still had to keep their content (scheduled, or a
// delivery queued): each run tries them again, so its scan of the rest moves on past them
// instead of reading all history again from the oldest one kept.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create table retention_kept (email_id text primary key)`.execute(db);
}
