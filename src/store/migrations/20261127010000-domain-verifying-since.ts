import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// When a domain's DNS check under way began: a flag its process never cleared (killed in the
// middle of the check) reads as not verifying once no check can still be running. Null for flags
// set before this column existed.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table domains add column verifying_since text`.execute(db);
}
