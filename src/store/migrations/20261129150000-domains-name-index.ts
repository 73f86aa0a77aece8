import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// Adding a domain reads every domain of its name, deleted ones included (their DKIM records may
// still be published): the partial index on live names could not serve that, and each create
// read the whole table. One index on the name serves both kinds of lookup (a name has few rows,
// live or deleted). Idempotent, for a store set back to an earlier migration.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create index if not exists domains_name_any on domains(name)`.execute(db);
  await sql`drop index if exists domains_name`.execute(db);
}
