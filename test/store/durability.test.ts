import test from 'ava';
import { loadConfig } from '../../src/config/load.js';
import { openPgStore } from '../../src/store/pg/pg-store.js';
import { createTestDatabase, dropTestDatabase, testStoreKind } from '../helpers/pg-databases.js';
import { startMailWorld, sendBody } from '../helpers/mail-world.js';
import { sqliteStoreOf } from '../helpers/repositories.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

// store.durability reaches the store. full (the default): SQLite writes the log at every commit
// (synchronous=NORMAL) and Posthorn syncs it to disk before any write is reported stored, API
// sends, Kysely writes and delivery results alike. normal: no sync until a checkpoint.

/** PostgreSQL: what the pool's connections commit with. */
async function synchronousCommit(t0: TestApp): Promise<string> {
  const store = t0.app.store;
  if (store.kind !== 'postgres') throw new Error('not PostgreSQL');
  return (await store.pool.query<{ synchronous_commit: string }>('show synchronous_commit')).rows[0]!.synchronous_commit;
}

test('durability full by default: an accepted send and a stored result are synced to disk before they are answered', async (t) => {
  const w = await startMailWorld();
  try {
    t.is(w.t0.config.store.durability, 'full');
    if (w.t0.app.store.kind === 'postgres') {
      // PostgreSQL: a COMMIT returns once its WAL is flushed.
      t.is(await synchronousCommit(w.t0), 'on');
      return;
    }
    const app = { store: sqliteStoreOf(w.t0.app) };
    t.is(app.store.sqlite.pragma('synchronous', { simple: true }), 1);
    t.is(app.store.sqlite.pragma('journal_mode', { simple: true }), 'wal');
    const sync = app.store.walSync!;
    t.truthy(sync, 'the log is synced by Posthorn');
    // An API send (the group commit): synced before the 200.
    let before = sync.count;
    const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w) });
    t.is(res.status, 200);
    t.true(sync.count > before, 'the send was synced before it was answered');
    // A delivery result (the group commit with coalescing).
    before = sync.count;
    await w.settle();
    t.true(sync.count > before, 'the delivery result was synced');
    // A write through Kysely (a contact book): synced before the 200.
    before = sync.count;
    t.is((await w.t0.request('POST', '/v1/contactBooks', { body: { name: 'durable' } })).status, 200);
    t.true(sync.count > before, 'a Kysely write was synced');
    // A read alone syncs nothing.
    before = sync.count;
    t.is((await w.t0.request('GET', '/v1/contactBooks')).status, 200);
    t.is(sync.count, before);
  } finally {
    await w.close();
  }
});

test('durability normal, chosen in the config or the environment, leaves syncing to checkpoints', async (t) => {
  t.is(loadConfig({ env: { POSTHORN_STORE_DURABILITY: 'normal' } }).store.durability, 'normal');
  t.throws(() => loadConfig({ env: { POSTHORN_STORE_DURABILITY: 'sometimes' } }), { message: /store\.durability/ });
  const t0 = await startTestApp({ overrides: { store: { durability: 'normal' } } });
  try {
    if (t0.app.store.kind === 'postgres') {
      t.is(await synchronousCommit(t0), 'off');
      return;
    }
    const app = { store: sqliteStoreOf(t0.app) };
    t.is(app.store.sqlite.pragma('synchronous', { simple: true }), 1);
    t.is(app.store.walSync, undefined);
  } finally {
    await t0.close();
  }
});

test('PostgreSQL: server options given in store.url apply along with the durability, not instead of it', async (t) => {
  if (testStoreKind() !== 'postgres') {
    t.pass('PostgreSQL only');
    return;
  }
  const url = await createTestDatabase();
  try {
    // A search path, a statement timeout...: node-postgres takes `options` from the URL over the pool's own.
    const withOptions = new URL(url);
    withOptions.searchParams.set('options', '-c statement_timeout=61000');
    for (const [durability, expected] of [['full', 'on'], ['normal', 'off']] as const) {
      const store = await openPgStore({ url: withOptions.toString(), poolMax: 2, connectTimeoutMs: 10_000, durability });
      try {
        const show = async (name: string) => Object.values((await store.pool.query(`show ${name}`)).rows[0]!)[0];
        t.is(await show('synchronous_commit'), expected, `durability ${durability}`);
        t.is(await show('statement_timeout'), '61s', "the URL's own options still apply");
      } finally {
        await store.close();
      }
    }
  } finally {
    await dropTestDatabase(url);
  }
});
