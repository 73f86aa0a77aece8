import { rmSync } from 'node:fs';
import test from 'ava';
import { join } from 'node:path';
import { openStore } from '../../src/store/db.js';
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
