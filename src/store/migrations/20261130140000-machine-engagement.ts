import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// Opens and clicks flagged as a machine's (a privacy proxy or link scanner) are counted apart
// from people's in the daily rollups: each email once per kind, as opened and clicked are. A
// run again finds the columns and adds nothing.
export async function up(db: Kysely<unknown>): Promise<void> {
  const tables = await db.introspection.getTables();
  const columns = tables.find((t) => t.name === 'email_daily_stats')?.columns.map((c) => c.name) ?? [];
  for (const column of ['machine_opened', 'machine_clicked']) {
    if (!columns.includes(column)) await sql`alter table email_daily_stats add column ${sql.raw(column)} integer not null default 0`.execute(db);
  }
}
