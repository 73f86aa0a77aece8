import test, { type ExecutionContext } from 'ava';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { openStore } from '../../src/store/db.js';
import { tempDir } from '../helpers/temp-dir.js';

// The server's store checkpoints its WAL from a worker thread; its own connection only past
// a large safety net. Proven on a real file: the worker's checkpoints move the pages the main
// connection wrote into the database, and closing stops the worker and leaves a clean file.

function fresh(t: ExecutionContext): string {
  return join(tempDir(t, 'posthorn-wal-'), 'x.db');
}

function writeRows(store: ReturnType<typeof openStore>, n: number): void {
  store.sqlite.exec('create table if not exists t (id integer primary key, body text)');
  const insert = store.sqlite.prepare('insert into t (body) values (?)');
  store.sqlite.transaction(() => {
    for (let i = 0; i < n; i++) insert.run('x'.repeat(500));
  })();
}

test('the worker checkpoints what the main connection wrote, and the main connection keeps only a safety net', async (t) => {
  const file = fresh(t);
  const store = openStore(file, { backgroundCheckpoints: true });
  t.teardown(() => store.close());
  t.truthy(store.checkpointer);
  t.is(store.sqlite.pragma('wal_autocheckpoint', { simple: true }), 16384, 'SQLite checkpoints in a COMMIT only past 64 MiB');
  writeRows(store, 4000); // ~2 MB: some 500 pages in the WAL, below SQLite's own 1000-page threshold
  let report = await (store.checkpointer!.checkpointNow(), store.checkpointer!.nextCheckpoint());
  // a report can be of a tick that started before the write; wait for one that saw the pages
  while (report.ok && report.log === 0) report = await store.checkpointer!.nextCheckpoint();
  t.true(report.ok);
  if (!report.ok) return;
  t.true(report.log > 100, `WAL frames seen by the worker: ${report.log}`);
  t.is(report.checkpointed, report.log, 'all of them copied into the database file');
  t.true(statSync(file).size > 1_000_000, 'the database file holds the rows now');
});

test('close() stops the worker first: the WAL is folded in and removed, and the rows are there', async (t) => {
  const file = fresh(t);
  const store = openStore(file, { backgroundCheckpoints: true });
  writeRows(store, 1000);
  await store.close();
  t.false(existsSync(`${file}-wal`), 'the last connection to close removed the WAL');
  const check = new BetterSqlite3(file, { readonly: true });
  t.is((check.prepare('select count(*) as n from t').get() as { n: number }).n, 1000);
  check.close();
});

test('without backgroundCheckpoints (CLI commands) nothing is started and SQLite checkpoints as usual', async (t) => {
  const store = openStore(fresh(t));
  t.teardown(() => store.close());
  t.is(store.checkpointer, undefined);
  t.is(store.sqlite.pragma('wal_autocheckpoint', { simple: true }), 1000);
});
