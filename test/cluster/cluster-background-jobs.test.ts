import { Writable } from 'node:stream';
import test from 'ava';
import { pino } from 'pino';
import { ManualClock } from '../../src/lib/clock.js';
import { heldTxtLookup } from '../helpers/held-txt-lookup.js';
import { createTestDatabase, dropTestDatabase } from '../helpers/pg-databases.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

// Background work of nodes sharing one PostgreSQL database (one injected clock), when a node
// stops or dies in the middle of it: what it leaves must be taken up by a node still running.

const clock = new ManualClock(Date.UTC(2026, 10, 26, 9, 0, 0));
let url: string;
let a: TestApp;
let b: TestApp;

/** Every node's log lines, each with its node. */
let onLine: (line: any) => void = () => undefined;
const stream = new Writable({
  write(chunk: Buffer, _enc, done) {
    for (const l of chunk.toString('utf8').split('\n').filter(Boolean)) onLine(JSON.parse(l));
    done();
  },
});
const loggerOf = (node: string) => pino({ level: 'debug', base: { node } }, stream);

test.before(async () => {
  url = await createTestDatabase();
  a = await startTestApp({ clock, logger: loggerOf('node-a'), overrides: { store: { url }, cluster: { nodeName: 'node-a' } } });
  b = await startTestApp({ zone: a.zone, clock, logger: loggerOf('node-b'), overrides: { store: { url }, cluster: { nodeName: 'node-b' } } });
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
    .values({ id: 'ci_freed', team_id: a.teamId, contact_book_id: book.id, file_name: 'f.csv', status: 'RUNNING', total_rows: 5, processed_rows: 0, created_count: 0, updated_count: 0, error_count: 0, errors_json: '[]', failure: null, created_at: now, updated_at: now, owner: 'node-gone' })
    .execute();
  await db.insertInto('contact_import_files').values({ import_id: 'ci_freed', team_id: a.teamId, content: csv }).execute();
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

test.serial('a daily cron run a node stopped partway is carried on by a live node in the same period, and nothing is done twice', async (t) => {
  const db = a.app.store.db;
  // The daily TLS reports of 20 policy domains (none publishes _smtp._tls): node-d's run is
  // held in the lookup of a domain of the second batch, and node-d stopped there.
  const day = '2026-11-25';
  const domains = Array.from({ length: 20 }, (_, i) => `d${String(i).padStart(2, '0')}.carry-on.test`);
  const held = heldTxtLookup(`_smtp._tls.${domains[9]}`);
  const d = await startTestApp({ zone: a.zone, clock, logger: loggerOf('node-d'), resolver: held.resolver, overrides: { store: { url }, cluster: { nodeName: 'node-d' } } });
  t.teardown(() => d.close());
  await Promise.all([a.app.cluster!.sweepNow(), b.app.cluster!.sweepNow()]);
  await db
    .insertInto('tls_session_counts')
    .values(domains.map((p) => ({ policy_domain: p, day, policy_key: 'no-policy-found', policy_type: 'no-policy-found', policy_json: '{}', result: 'success', sending_ip: '', mx_host: `mx.${p}`, receiving_ip: '', reason_code: '', count: 1 })))
    .execute();
  const finished: any[] = [];
  const takenUp: any[] = [];
  let carriedOn!: (line: any) => void;
  const carried = new Promise<any>((resolve) => (carriedOn = resolve));
  onLine = (line) => {
    if (line.event === 'cron.waiting' && line.node === 'node-d') held.release();
    if (line.event === 'cron.taken_up') takenUp.push(line);
    if (line.msg === 'cron job finished' && line.job === 'tls-reports') {
      finished.push(line);
      if (line.node !== 'node-d') carriedOn(line);
    }
  };
  const run = d.app.runCronJob('tls-reports');
  await held.reached;
  const stopping = d.stop();
  void stopping.then(held.release, held.release);
  await stopping;
  t.true(await run);
  const first: number = finished.find((l) => l.node === 'node-d').result.made.withoutRua;
  t.true(first < domains.length && first % 8 === 0, `node-d stopped after whole batches: ${first} of ${domains.length}`);
  const [left] = await db.selectFrom('job_runs').selectAll().where('job', '=', 'tls-reports').execute();
  // Unfinished and node-d's, unless a live node's heartbeat (every 2 s of real time, not the
  // test's clock) has seen node-d leave and carried the run on already.
  if (left!.node === 'node-d') t.is(left!.finished_at, null);
  else t.like(takenUp[0], { job: 'tls-reports', from: 'node-d', node: left!.node });

  // node-d has left: the live nodes' next sweeps see it gone, and one of them carries the run on.
  await Promise.all([a.app.cluster!.sweepNow(), b.app.cluster!.sweepNow()]);
  const line = await carried;
  t.is(line.result.made.withoutRua, domains.length - first, 'only the domains node-d did not get to');
  t.is(takenUp.length, 1, 'taken up by one node');
  t.like(takenUp[0], { job: 'tls-reports', period: left!.period, from: 'node-d', node: line.node });
  const reports = await db.selectFrom('tls_reports_out').select('policy_domain').where('day', '=', day).orderBy('policy_domain').execute();
  t.deepEqual(
    reports.map((r) => r.policy_domain),
    domains,
  );
  t.is((await db.selectFrom('tls_session_counts').select('policy_domain').where('day', '=', day).execute()).length, 0);
  const runs = await db.selectFrom('job_runs').selectAll().where('job', '=', 'tls-reports').execute();
  t.is(runs.length, 1, 'the same run, in its period');
  t.like(runs[0], { period: left!.period, node: line.node });
  t.truthy(runs[0]!.finished_at);
  t.is(finished.length, 2, 'no other run of the job');
});

test.serial("a daily cron run a dead node left unfinished is carried on by a live node", async (t) => {
  const db = a.app.store.db;
  const now = clock.now().toISOString();
  await db.insertInto('cluster_nodes').values({ id: 'node-dead', hostname: 'dead', pid: 3, started_at: now, heartbeat_at: Date.now() - 3600_000, listeners_json: '{}' }).execute();
  await db.insertInto('job_runs').values({ job: 'prune-queue-records', period: '2026-11-26T04:41:00.000Z', node: 'node-dead', started_at: now, finished_at: null }).execute();
  const carried = new Promise<any>((resolve) => {
    onLine = (line) => {
      if (line.msg === 'cron job finished' && line.job === 'prune-queue-records') resolve(line);
    };
  });
  await Promise.all([a.app.cluster!.sweepNow(), b.app.cluster!.sweepNow()]);
  const line = await carried;
  const [run] = await db.selectFrom('job_runs').selectAll().where('job', '=', 'prune-queue-records').execute();
  t.like(run, { node: line.node, period: '2026-11-26T04:41:00.000Z' });
  t.true(line.node === 'node-a' || line.node === 'node-b');
  t.truthy(run!.finished_at);
});
