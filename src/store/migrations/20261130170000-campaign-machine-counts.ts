import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// A campaign's opens and clicks made by machines (a privacy proxy or link scanner) are counted
// apart from people's, each email once per kind, as the daily rollups do. A run again finds the
// columns and adds nothing.
export async function up(db: Kysely<unknown>): Promise<void> {
  const tables = await db.introspection.getTables();
  const columns = tables.find((t) => t.name === 'campaigns')?.columns.map((c) => c.name) ?? [];
  for (const column of ['machine_opened', 'machine_clicked']) {
    if (!columns.includes(column)) await sql`alter table campaigns add column ${sql.raw(column)} integer not null default 0`.execute(db);
  }
}
