import test from 'ava';
import Database from 'better-sqlite3';
import pg from 'pg';
import { createTestDatabase, dropTestDatabase, testStoreKind } from '../helpers/pg-databases.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

// A store held locked by someone else past the wait it allows (a CLI command writing to the
// SQLite file; on PostgreSQL a lock, a deadlock, a serialization failure or a statement
// timeout) is a transient failure of the storage, not a bug of the request: the caller is told
// plainly that nothing was stored and to retry, and the retry goes through.

const NOT_STORED = /could not store this request .*nothing was accepted, retry later/;

/** Holds the store's write lock from another connection until release() is called. */
async function holdWriteLock(t0: TestApp): Promise<() => Promise<void>> {
  if (t0.app.store.kind === 'sqlite') {
    const other = new Database(t0.app.store.describe());
    other.exec('begin immediate');
    return async () => {
      other.exec('rollback');
      other.close();
    };
  }
  const client = new pg.Client({ connectionString: t0.config.store.url });
  await client.connect();
  await client.query('begin');
  await client.query('lock table contact_books in access exclusive mode');
  return async () => {
    await client.query('rollback');
    await client.end();
  };
}

test('a store locked past its timeout: a write answers 500 "not stored, retry later"; the retry goes through', async (t) => {
  // SQLite waits its busy timeout (5 s); PostgreSQL here a lock_timeout given in store.url.
  let url: string | undefined;
  if (testStoreKind() === 'postgres') {
    const u = new URL(await createTestDatabase());
    u.searchParams.set('options', '-c lock_timeout=300');
    url = u.toString();
  }
  const t0 = await startTestApp(url ? { overrides: { store: { url } } } : {});
  t.teardown(async () => {
    await t0.close();
    if (url) await dropTestDatabase(url);
  });
  const release = await holdWriteLock(t0);
  let res;
  try {
    res = await t0.request('POST', '/v1/contactBooks', { body: { name: 'Newsletter' } });
  } finally {
    await release();
  }
  t.is(res.status, 500);
  t.is(res.body.error.code, 'INTERNAL_SERVER_ERROR');
  t.regex(res.body.error.message, NOT_STORED);
  t.deepEqual((await t0.request('GET', '/v1/contactBooks')).body, [], 'nothing was stored');
  const retry = await t0.request('POST', '/v1/contactBooks', { body: { name: 'Newsletter' } });
  t.is(retry.status, 200);
  t.is((await t0.request('GET', '/v1/contactBooks')).body.length, 1);
});
