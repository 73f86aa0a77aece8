import { rmSync } from 'node:fs';
import test from 'ava';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { openStore } from '../../src/store/db.js';
import { groupCommitOf } from '../../src/store/group-commit.js';
import { migrateToLatest } from '../../src/store/migrate.js';
import { MIGRATIONS } from '../../src/store/migrations/index.js';
import { startTestApp } from '../helpers/test-app.js';
import { tempDir } from '../helpers/temp-dir.js';

test('migrations run on an empty database, once, in WAL mode', async (t) => {
  const dir = tempDir(t, 'posthorn-store-');
  const store = openStore(join(dir, 'x.db'));
  const first = await migrateToLatest(store.db);
  t.deepEqual(first.applied, Object.keys(MIGRATIONS).sort());
  const second = await migrateToLatest(store.db);
  t.deepEqual(second.applied, []);
  t.is(store.sqlite.pragma('journal_mode', { simple: true }), 'wal');
  t.is(store.sqlite.pragma('foreign_keys', { simple: true }), 1);
  await store.close();
});

test('migration names are timestamped and sorted', (t) => {
  for (const name of Object.keys(MIGRATIONS)) t.regex(name, /^\d{14}-[a-z0-9-]+$/);
  // Each its own timestamp: the order is the timestamps' (store/migrate.ts, nameComparator).
  const stamps = Object.keys(MIGRATIONS).map((name) => name.slice(0, 14));
  t.is(new Set(stamps).size, stamps.length);
});

test('a restart keeps data', async (t) => {
  const first = await startTestApp();
  const created = await first.request('POST', '/v1/apiKeys', { body: { name: 'survivor' } });
  await first.stop();
  const second = await startTestApp({ dataDir: first.dataDir, zone: first.zone });
  try {
    const res = await second.request('GET', '/v1/apiKeys', { key: created.body.token });
    t.is(res.status, 200);
    t.true(res.body.some((k: any) => k.name === 'survivor'));
  } finally {
    await second.close();
    await first.zone.close();
    rmSync(first.dataDir, { recursive: true, force: true });
  }
});

test('group commit: a write lock held elsewhere past the busy timeout fails the whole batch at the first wait, not one wait per write', async (t) => {
  const dir = tempDir(t, 'posthorn-store-');
  const file = join(dir, 'x.db');
  const store = openStore(file);
  t.teardown(() => store.close());
  store.sqlite.exec('create table t (x integer)');
  store.sqlite.pragma('busy_timeout = 20');
  const other = new Database(file);
  other.exec('begin immediate');
  const sync = groupCommitOf(store.db);
  const tries = [0, 0, 0];
  const writes = tries.map((_, i) =>
    sync.write(() => {
      tries[i]!++;
      return store.sqlite.prepare('insert into t (x) values (?)').run(i).changes;
    }),
  );
  const outcomes = await Promise.allSettled(writes);
  t.deepEqual(outcomes.map((o) => o.status === 'rejected' && (o.reason as { code?: string }).code), ['SQLITE_BUSY', 'SQLITE_BUSY', 'SQLITE_BUSY']);
  // Only the first write met the lock; redone one by one, each would wait the busy timeout again
  // (seconds in production, with the event loop blocked).
  t.deepEqual(tries, [1, 0, 0]);
  other.exec('rollback');
  other.close();
  t.is(await sync.write(() => store.sqlite.prepare('insert into t (x) values (?)').run(9).changes), 1);
  t.is((store.sqlite.prepare('select count(*) as n from t').get() as { n: number }).n, 1);
});
