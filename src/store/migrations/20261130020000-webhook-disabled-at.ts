import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// When a webhook endpoint was paused or auto-disabled (null while active; endpoints stopped
// before this migration have none on record), and the attempts log's entries for calls that
// were discarded, never sent, while their endpoint was stopped (discarded = 1: no HTTP attempt).
// A run again (a store set back to an earlier migration) finds the columns and adds nothing.
export async function up(db: Kysely<unknown>): Promise<void> {
  const tables = await db.introspection.getTables();
  const has = (table: string, column: string) => tables.find((t) => t.name === table)?.columns.some((c) => c.name === column) ?? false;
  if (!has('webhooks', 'disabled_at')) await sql`alter table webhooks add column disabled_at text`.execute(db);
  if (!has('webhook_attempts', 'discarded')) await sql`alter table webhook_attempts add column discarded integer not null default 0`.execute(db);
}
