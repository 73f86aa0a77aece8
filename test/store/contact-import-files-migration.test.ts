import test from 'ava';
import { sql } from 'kysely';
import { migrateToLatest } from '../../src/store/migrate.js';
import { startTestApp } from '../helpers/test-app.js';
import { storeAtMigration } from '../helpers/store-at-migration.js';
import { tempDir } from '../helpers/temp-dir.js';
import { addBook, addTeam, SEEDED_AT } from '../helpers/migration-seeds.js';

// Imports stored before their files had a table of their own kept the file in the import's row
// (csv). An upgrade moves the file of each unfinished import to contact_import_files and drops
// the column: an import a previous release left half done carries on from its last recorded
// chunk after the upgrade, and a second run changes nothing.

const BEFORE = '20261130170000-campaign-machine-counts';
const ROWS = 250;

const importRow = (id: string, team: number, csv: string, status: string, processed: number) =>
  ({ id, team_id: team, contact_book_id: 'cb_1', file_name: `${id}.csv`, csv, status, total_rows: ROWS, processed_rows: processed, created_count: processed, updated_count: 0, error_count: 0, errors_json: '[]', failure: null, created_at: SEEDED_AT, updated_at: SEEDED_AT, owner: null });

test('an upgrade moves the files of unfinished imports to their own table and drops the column; one left half done finishes after it', async (t) => {
  const dir = tempDir(t, 'posthorn-import-files-');
  const { db, url, close } = await storeAtMigration(t, dir, BEFORE);
  const team = await addTeam(db, 'one');
  await addBook(db, team, 'cb_1');
  const csv = `email\n${Array.from({ length: ROWS }, (_, i) => `old${i}@example.org`).join('\n')}\n`;
  // Half done: its first chunk was recorded by the release before (those contacts are not seeded,
  // so the book shows which rows the resumed import wrote).
  await db.insertInto('contact_imports').values(importRow('ci_half', team, csv, 'RUNNING', 100)).execute();
  await db.insertInto('contact_imports').values(importRow('ci_done', team, '', 'DONE', ROWS)).execute();
  await migrateToLatest(db);

  t.deepEqual(await db.selectFrom('contact_import_files').selectAll().execute(), [{ import_id: 'ci_half', team_id: team, content: csv }]);
  const tables = await db.introspection.getTables();
  t.false(tables.find((x) => x.name === 'contact_imports')!.columns.some((c) => c.name === 'csv'), 'the column is gone');

  // Run again, as a store set back to before it has it on record: nothing changes.
  await sql`delete from kysely_migration where name >= '20261130190000-contact-import-files'`.execute(db);
  await migrateToLatest(db);
  t.is((await db.selectFrom('contact_import_files').selectAll().execute()).length, 1);
  await close();

  const t0 = await startTestApp({ dataDir: dir, overrides: { store: { url } } });
  t.teardown(() => t0.close());
  t.is(t0.teamId, team);
  await t0.app.services.contactImports.whenFinished('ci_half');
  const scope = { teamId: team, domainId: null };
  t.like(await t0.app.services.contactImports.get(scope, 'ci_half'), { status: 'DONE', processedRows: ROWS, created: ROWS, errorCount: 0 });
  t.is((await t0.app.services.contacts.search(scope, 'cb_1', { offset: 0, limit: 1 })).total, ROWS - 100, 'it carried on after the chunk it had recorded');
  t.deepEqual(await t0.app.store.db.selectFrom('contact_import_files').selectAll().execute(), [], 'the finished import kept no file');
});
