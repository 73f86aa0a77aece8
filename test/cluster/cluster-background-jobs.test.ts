import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { createTestDatabase, dropTestDatabase } from '../helpers/pg-databases.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

// Background work of nodes sharing one PostgreSQL database (one injected clock), when a node
// stops or dies in the middle of it: what it leaves must be taken up by a node still running.

const clock = new ManualClock(Date.UTC(2026, 10, 26, 9, 0, 0));
let url: string;
let a: TestApp;
let b: TestApp;

test.before(async () => {
  url = await createTestDatabase();
  a = await startTestApp({ clock, overrides: { store: { url }, cluster: { nodeName: 'node-a' } } });
  b = await startTestApp({ zone: a.zone, clock, overrides: { store: { url }, cluster: { nodeName: 'node-b' } } });
});
test.after.always(async () => {
  await b?.close();
  await a?.close();
  if (url) await dropTestDatabase(url);
});

test.serial('a dead node\'s contact import freed by a node that was stopping is taken up by a live node', async (t) => {
  const db = a.app.store.db;
  const c = await startTestApp({ zone: a.zone, clock, overrides: { store: { url }, cluster: { nodeName: 'node-c' } } });
  t.teardown(() => c.close());
  // The live nodes have seen node-c join (their sweeps run again when the live set changes).
  await Promise.all([a.app.cluster!.sweepNow(), b.app.cluster!.sweepNow()]);
  const book = (await a.request('POST', '/v1/contactBooks', { body: { name: 'Freed while stopping' } })).body;
  const csv = ['email', ...Array.from({ length: 5 }, (_, i) => `freed${i}@example.org`)].join('\n');
  const now = clock.now().toISOString();
  await db.insertInto('cluster_nodes').values({ id: 'node-gone', hostname: 'gone', pid: 2, started_at: now, heartbeat_at: Date.now() - 3600_000, listeners_json: '{}' }).execute();
  await db
    .insertInto('contact_imports')
    .values({ id: 'ci_freed', team_id: a.teamId, contact_book_id: book.id, file_name: 'f.csv', csv, status: 'RUNNING', total_rows: 5, processed_rows: 0, created_count: 0, updated_count: 0, error_count: 0, errors_json: '[]', failure: null, created_at: now, updated_at: now, owner: 'node-gone' })
    .execute();
  // A third node is being stopped (a rolling restart) when its sweep finds the dead node's
  // import: it frees it, and takes up nothing, on its way out.
  const stopping = c.stop();
  await c.app.cluster!.sweepNow();
  await stopping;
  t.is((await db.selectFrom('contact_imports').select('owner').where('id', '=', 'ci_freed').executeTakeFirstOrThrow()).owner, null, 'freed, and run by nobody');
  // The live nodes' next sweeps (node-c has left: the live set changed).
  await Promise.all([a.app.cluster!.sweepNow(), b.app.cluster!.sweepNow()]);
  await Promise.all([a.app.services.contactImports.whenFinished('ci_freed'), b.app.services.contactImports.whenFinished('ci_freed')]);
  const row = await db.selectFrom('contact_imports').selectAll().where('id', '=', 'ci_freed').executeTakeFirstOrThrow();
  t.like(row, { status: 'DONE', processed_rows: 5, created_count: 5 });
  t.true(row.owner === 'node-a' || row.owner === 'node-b', `run by ${row.owner}`);
});
