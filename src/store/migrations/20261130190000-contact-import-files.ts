import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// A contact import's uploaded file (up to 20 MB) moves out of its progress row into a table of
// its own, written once with the import: each chunk's progress update then rewrites a small row
// instead of the file (SQLite rewrites a whole record on UPDATE). The files of unfinished imports
// are copied, so they carry on after the upgrade; finished ones kept none. A run again finds the
// column gone and copies nothing.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create table if not exists contact_import_files (
    import_id text primary key references contact_imports(id) on delete cascade,
    team_id integer not null references teams(id) on delete cascade,
    content text not null
  )`.execute(db);
  const tables = await db.introspection.getTables();
  const hasCsv = tables.find((t) => t.name === 'contact_imports')?.columns.some((c) => c.name === 'csv') ?? false;
  if (!hasCsv) return;
  await sql`insert into contact_import_files (import_id, team_id, content)
    select id, team_id, csv from contact_imports where status = 'RUNNING'
    on conflict (import_id) do nothing`.execute(db);
  await sql`alter table contact_imports drop column csv`.execute(db);
}
