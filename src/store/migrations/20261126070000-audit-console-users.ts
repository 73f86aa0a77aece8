import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// Operators act from the web console too: an audit entry names the console user (null for an
// operator key or the CLI), as key_id names the key.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table operator_audit add column console_user_id integer`.execute(db);
}
