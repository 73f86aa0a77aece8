import { Writable } from 'node:stream';
import test from 'ava';
import pg from 'pg';
import { pino } from 'pino';
import { createApp } from '../../src/app.js';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld, sendBody, type MailWorld } from '../helpers/mail-world.js';
import { createClusterRepository } from '../../src/store/repositories/cluster-repository.js';
import { createTestDatabase, dropTestDatabase } from '../helpers/pg-databases.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

// Two nodes in one process, sharing one PostgreSQL database (whatever POSTHORN_TEST_STORE says):
// what they must agree on (rate limits, idempotency keys, campaign batches, cron runs, the
// connection limit of a destination) and what a dead node leaves to the living. They share one
// ManualClock, so "the same second" is exact. The real-process proof with three `posthorn serve`
// nodes, kills included, is test/proof/cluster-sigkill.test.ts.

const clock = new ManualClock(Date.UTC(2026, 10, 26, 9, 0, 0));
let url: string;
let w: MailWorld;
let b: TestApp;
/** Called with the node's name when its pool is refused a session by the cluster's limit. */
let onRefusal: (node: string) => void = () => undefined;

/** A debug logger that reports the node's cluster.connection_limit lines to onRefusal. */
function refusalLogger(node: string) {
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) if (JSON.parse(line).event === 'cluster.connection_limit') onRefusal(node);
      done();
    },
  });
  return pino({ level: 'debug' }, stream);
}

test.before(async () => {
  url = await createTestDatabase();
  const shared = { store: { url }, campaigns: { batchWindowSeconds: 60 }, outbound: { maxConnectionsPerHost: 2 }, webhooks: { allowPrivate: true } };
  w = await startMailWorld({ clock, overrides: { ...shared, cluster: { nodeName: 'node-a' } }, logger: refusalLogger('node-a') });
  b = await startTestApp({
    zone: w.zone,
    clock,
    logger: refusalLogger('node-b'),
    overrides: { ...shared, cluster: { nodeName: 'node-b' }, outbound: { ...w.t0.config.outbound, maxConnectionsPerHost: 2 } },
  });
  // Both nodes serve the same team: b's test key belongs to the team a created.
  (b as { key: string }).key = w.t0.key;
});
test.after.always(async () => {
  await b?.close();
  await w?.close();
  if (url) await dropTestDatabase(url);
});

const nodes = () => [w.t0, b];

test.serial('both nodes see each other; /health names the node and the members', async (t) => {
  await w.t0.app.cluster!.sweepNow();
  await b.app.cluster!.sweepNow();
  for (const [node, name] of [[w.t0, 'node-a'], [b, 'node-b']] as const) {
    const h = await node.request('GET', '/health', { key: null });
    t.is(h.status, 200);
    t.is(h.body.node, name);
    t.deepEqual(h.body.cluster, ['node-a', 'node-b']);
  }
});

test.serial('each node names its PostgreSQL sessions "posthorn <node>" (pg_stat_activity), so an operator can tell them apart', async (t) => {
  // Both pools hold connections now (the apps started and answered).
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    const names = (await admin.query<{ name: string }>('select distinct application_name as name from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() order by 1')).rows.map((r) => r.name);
    t.deepEqual(names, ['posthorn node-a', 'posthorn node-b']);
  } finally {
    await admin.end();
  }
});

test.serial('the rate limit is the team\'s, not the node\'s: a burst over both nodes gets the one-node number of 429s', async (t) => {
  await w.t0.app.services.teams.setRateLimit(w.t0.teamId, 10);
  clock.advance(1000); // a window nothing else has counted in
  try {
    const results = await Promise.all(Array.from({ length: 30 }, (_, i) => nodes()[i % 2]!.request('GET', '/v1/domains')));
    const ok = results.filter((r) => r.status === 200).length;
    const limited = results.filter((r) => r.status === 429);
    t.is(ok, 10, 'one second, one team: 10 in all');
    t.is(limited.length, 20);
    t.true(limited.every((r) => r.body.error.code === 'RATE_LIMITED' && r.headers.get('retry-after') !== null));
    t.true(limited.some((r) => r.headers.get('x-ratelimit-remaining') === '0'));
  } finally {
    await w.t0.app.services.teams.setRateLimit(w.t0.teamId, null);
    clock.advance(1000);
  }
});

test.serial('an Idempotency-Key replayed on the other node answers the first response and sends nothing new', async (t) => {
  const body = sendBody(w, { to: 'idem@example.net', subject: 'once' });
  const headers = { 'Idempotency-Key': 'cluster-key-1' };
  const first = await w.t0.request('POST', '/v1/emails', { body, headers });
  t.is(first.status, 200);
  const second = await b.request('POST', '/v1/emails', { body, headers });
  t.is(second.status, 200);
  t.deepEqual(second.body, first.body);
  const other = await b.request('POST', '/v1/emails', { body: { ...body, subject: 'another body' }, headers });
  t.is(other.status, 409);
  // The same key on both nodes at once: one send, the other is a replay or a 409 (in flight).
  const raced = await Promise.all(nodes().map((n) => n.request('POST', '/v1/emails', { body: { ...body, subject: 'raced' }, headers: { 'Idempotency-Key': 'cluster-key-2' } })));
  const ids = new Set(raced.filter((r) => r.status === 200).map((r) => r.body.emailId));
  t.is(ids.size, 1, JSON.stringify(raced.map((r) => [r.status, r.body])));
  t.true(raced.every((r) => r.status === 200 || r.status === 409));
  const stored = await w.t0.app.store.db.selectFrom('emails').select('id').where('subject', 'in', ['once', 'raced', 'another body']).execute();
  t.is(stored.length, 2, 'one email per key');
  await w.settle();
});

test.serial('a campaign\'s batches are sent once while both nodes run the scheduler', async (t) => {
  const bookRes = await w.t0.request('POST', '/v1/contactBooks', { body: { name: 'Cluster' } });
  const contacts = Array.from({ length: 23 }, (_, i) => ({ email: `cl${i}@example.org` }));
  t.is((await w.t0.request('POST', `/v1/contactBooks/${bookRes.body.id}/contacts/bulk`, { body: contacts })).status, 200);
  const c = await w.t0.request('POST', '/v1/campaigns', {
    body: { name: 'Both', from: `News <news@${w.domain.name}>`, subject: 'Hi', contactBookId: bookRes.body.id, html: '<p>x {{unsubscribeUrl}}</p>', batchSize: 5, sendNow: true },
  });
  t.is(c.status, 200, JSON.stringify(c.body));
  const sent = async () => Number((await w.t0.app.store.db.selectFrom('emails').select((eb) => eb.fn.countAll<number>().as('n')).where('campaign_id', '=', c.body.id).executeTakeFirstOrThrow()).n);
  for (let batch = 1; batch <= 5; batch++) {
    // Both schedulers tick together, again and again within one window: one batch per window.
    for (let i = 0; i < 3; i++) await Promise.all([w.t0.app.runCampaigns(), b.app.runCampaigns()]);
    t.is(await sent(), Math.min(23, batch * 5), `after window ${batch}`);
    clock.advance(60_000);
  }
  await Promise.all([w.t0.app.runCampaigns(), b.app.runCampaigns()]);
  t.is((await w.t0.request('GET', `/v1/campaigns/${c.body.id}`)).body.status, 'SENT');
  await Promise.all([w.settle(), b.app.engine.whenIdle()]);
  const rcpts = w.sink.messages.flatMap((m) => m.rcptTo).filter((r) => r.startsWith('cl'));
  t.is(rcpts.length, 23);
  t.is(new Set(rcpts).size, 23, 'nobody twice');
});

test.serial('a cron run is claimed by one node only', async (t) => {
  const period = '2026-11-26T09:00:00.000Z';
  const claims = await Promise.all([w.t0.app.cluster!.claimRun('probe', period), b.app.cluster!.claimRun('probe', period), w.t0.app.cluster!.claimRun('probe', period)]);
  t.deepEqual(claims.filter(Boolean).length, 1);
  t.true(await b.app.cluster!.claimRun('probe', '2026-11-26T09:00:01.000Z'), 'the next period is a new run');
});

test.serial('the per-destination connection limit holds for the cluster: two nodes, two sessions to the MX at most', async (t) => {
  // Replies to DATA are held, so the sessions stay busy and the nodes want more of them than
  // the cluster may have. Once a node with room of its own was refused one by the cluster (its
  // log line), the replies go out, and everything is delivered over at most two sessions at a time.
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const refusedBy = new Set<string>();
  const refused = new Promise<void>((resolve) => {
    onRefusal = (node) => {
      refusedBy.add(node);
      resolve();
    };
  });
  // Without the cluster's limit each node opens its own two: the race below ends at once.
  let exceeded!: () => void;
  const tooMany = new Promise<void>((resolve) => (exceeded = resolve));
  w.sink.setBehaviour({
    holdData: () => gate,
    onConnect: () => {
      if (w.sink.peakConnections > 2) exceeded();
      return undefined;
    },
  });
  const before = w.sink.messages.length;

  try {
    const sends = await Promise.all(Array.from({ length: 24 }, (_, i) => nodes()[i % 2]!.request('POST', '/v1/emails', { body: sendBody(w, { to: `limit${i}@example.net`, subject: `limit ${i}` }) })));
    t.true(sends.every((r) => r.status === 200));
    await Promise.race([refused, tooMany]);
    t.log(`refused a session: ${[...refusedBy].join(', ')}`);
    t.true(w.sink.peakConnections <= 2, `while held: ${w.sink.peakConnections} sessions`);
  } finally {
    release();
    w.sink.setBehaviour({ holdData: undefined, onConnect: undefined });
    onRefusal = () => undefined;
  }
  await w.sink.waitForMessages(before + 24, 30_000);
  await Promise.all([w.settle(), b.app.engine.whenIdle()]);
  t.true(w.sink.peakConnections <= 2, `peak ${w.sink.peakConnections} sessions`);
});

test.serial('a live node keeps the leases of what it is still sending: held past the lease, nothing is sent twice by either node', async (t) => {
  // Replies to DATA are held: two sessions (the cluster's limit) are busy and the other
  // messages wait in their node's pool behind them. Then more than a lease passes, in steps of
  // a third of a lease (as real time would pass, with claim rounds in between): each node must
  // renew the leases of its own work, or a sweep frees them and a node sends them again.
  const leaseMs = w.t0.config.outbound.leaseMs;
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let held = 0;
  let onHold = () => undefined as void;
  w.sink.setBehaviour({
    holdData: () => {
      held++;
      onHold();
      return gate;
    },
  });
  const before = w.sink.messages.length;
  const ids: string[] = [];
  try {
    for (let i = 0; i < 4; i++) {
      const res = await nodes()[i % 2]!.request('POST', '/v1/emails', { body: sendBody(w, { to: `kept${i}@example.net`, subject: `kept ${i}` }) });
      t.is(res.status, 200);
      ids.push(res.body.emailId);
    }
    await new Promise<void>((resolve) => {
      onHold = () => (held >= 2 ? resolve() : undefined);
      onHold();
    });
    const db = w.t0.app.store.db;
    const leases = async () => db.selectFrom('deliveries').select(['lease_owner', 'lease_until']).where('email_id', 'in', ids).execute();
    for (let step = 1; step <= 4; step++) {
      clock.advance(Math.ceil(leaseMs / 3) + 1);
      w.t0.app.engine.wake();
      b.app.engine.wake();
      // Each node's next claim round renews its own leases to a lease from now.
      const deadline = Date.now() + 30_000;
      let rows = await leases();
      while (rows.some((r) => r.lease_owner === null || Number(r.lease_until) < clock.nowMs() + leaseMs)) {
        if (Date.now() > deadline) return t.fail(`step ${step}: leases not renewed: ${JSON.stringify(rows)}`);
        await new Promise((r) => setImmediate(r));
        rows = await leases();
      }
    }
    t.is(held, 2, 'the sessions are still held; nothing was sent again meanwhile');
  } finally {
    release();
    w.sink.setBehaviour({ holdData: undefined });
  }
  await w.sink.waitForMessages(before + 4, 30_000);
  await Promise.all([w.settle(), b.app.engine.whenIdle()]);
  for (let i = 0; i < 4; i++) t.is(w.sink.messages.filter((m) => m.rcptTo.includes(`kept${i}@example.net`)).length, 1, `kept${i}: sent once`);
  for (const id of ids) t.is((await w.t0.request('GET', `/v1/emails/${id}`)).body.latestStatus, 'DELIVERED');
});

test.serial('an admin command run under a live node\'s name leaves that node, and its leases, in the cluster', async (t) => {
  // What `posthorn keys create` and the other admin commands do: build the app from the node's
  // own config (so under its node name), never start it, and stop it.
  const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'held@example.net', subject: 'held', scheduledAt: new Date(clock.nowMs() + 3600_000).toISOString() }) });
  t.is(res.status, 200);
  const db = w.t0.app.store.db;
  await db.updateTable('deliveries').set({ lease_owner: 'node-a', lease_until: clock.nowMs() + 600_000 }).where('email_id', '=', res.body.emailId).execute();
  t.teardown(() => db.updateTable('deliveries').set({ lease_owner: null, lease_until: null }).where('email_id', '=', res.body.emailId).execute());
  const admin = await createApp({ config: w.t0.config, clock, logger: pino({ level: 'silent' }) });
  await admin.stop();
  t.truthy(await db.selectFrom('cluster_nodes').select('id').where('id', '=', 'node-a').executeTakeFirst(), 'the live node\'s row is still there');
  await b.app.cluster!.sweepNow();
  t.deepEqual((await b.request('GET', '/health', { key: null })).body.cluster, ['node-a', 'node-b'], 'the other node still sees it');
  const row = await db.selectFrom('deliveries').select('lease_owner').where('email_id', '=', res.body.emailId).executeTakeFirstOrThrow();
  t.is(row.lease_owner, 'node-a', 'what it is sending stays its own: nobody sends it a second time');
});

test.serial('a dead node\'s leases are taken over at once, not when they run out', async (t) => {
  // A node that died: it was heard from long ago and still holds a delivery lease for hours.
  const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'orphan@example.net', subject: 'orphan', scheduledAt: new Date(clock.nowMs() + 60_000).toISOString() }) });
  t.is(res.status, 200);
  const db = w.t0.app.store.db;
  await db.insertInto('cluster_nodes').values({ id: 'node-dead', hostname: 'gone', pid: 1, started_at: clock.now().toISOString(), heartbeat_at: Date.now() - 3600_000, listeners_json: '{}' }).execute();
  await db.updateTable('deliveries').set({ lease_owner: 'node-dead', lease_until: clock.nowMs() + 6 * 3600_000 }).where('email_id', '=', res.body.emailId).execute();
  await db.insertInto('idempotency_keys').values({ team_id: w.t0.teamId, key: 'dead-request', body_hash: 'x', state: 'in_flight', response_json: null, created_at: clock.nowMs(), owner: 'node-dead' }).execute();
  clock.advance(120_000);
  await b.app.cluster!.sweepNow();
  const row = await db.selectFrom('deliveries').select(['lease_owner']).where('email_id', '=', res.body.emailId).executeTakeFirstOrThrow();
  t.true(row.lease_owner === null || row.lease_owner === 'node-a' || row.lease_owner === 'node-b', `leased by ${row.lease_owner}`);
  b.app.engine.wake();
  await Promise.all([w.settle(), b.app.engine.whenIdle()]);
  t.is(w.sink.messages.filter((m) => m.rcptTo.includes('orphan@example.net')).length, 1);
  t.is((await w.t0.request('GET', `/v1/emails/${res.body.emailId}`)).body.latestStatus, 'DELIVERED');
  t.is((await db.selectFrom('idempotency_keys').select('key').where('key', '=', 'dead-request').execute()).length, 0, 'its in-flight key is released');
});

test.serial('a contact import a dead node was running is taken up by a live one and finished once', async (t) => {
  const book = (await w.t0.request('POST', '/v1/contactBooks', { body: { name: 'Orphaned import' } })).body;
  const csv = ['email,firstName', ...Array.from({ length: 7 }, (_, i) => `orphan${i}@example.org,N${i}`)].join('\n');
  const now = clock.now().toISOString();
  const db = w.t0.app.store.db;
  await db.insertInto('cluster_nodes').values({ id: 'node-gone', hostname: 'gone', pid: 2, started_at: now, heartbeat_at: Date.now() - 3600_000, listeners_json: '{}' }).execute();
  await db
    .insertInto('contact_imports')
    .values({ id: 'ci_orphan', team_id: w.t0.teamId, contact_book_id: book.id, file_name: 'o.csv', status: 'RUNNING', total_rows: 7, processed_rows: 0, created_count: 0, updated_count: 0, error_count: 0, errors_json: '[]', failure: null, created_at: now, updated_at: now, owner: 'node-gone' })
    .execute();
  await db.insertInto('contact_import_files').values({ import_id: 'ci_orphan', team_id: w.t0.teamId, content: csv }).execute();
  // A live node's running import is not taken by another's start.
  t.deepEqual(await b.app.services.contactImports.resume(), 0);
  // Both nodes sweep: one of them takes it up.
  await Promise.all([w.t0.app.cluster!.sweepNow(), b.app.cluster!.sweepNow()]);
  await Promise.all([w.t0.app.services.contactImports.whenFinished('ci_orphan'), b.app.services.contactImports.whenFinished('ci_orphan')]);
  const row = await db.selectFrom('contact_imports').selectAll().where('id', '=', 'ci_orphan').executeTakeFirstOrThrow();
  t.like(row, { status: 'DONE', processed_rows: 7, created_count: 7, updated_count: 0 });
  t.true(row.owner === 'node-a' || row.owner === 'node-b', `run by ${row.owner}`);
  const contacts = (await w.t0.request('GET', `/v1/contactBooks/${book.id}/contacts?limit=50`)).body;
  t.is(contacts.length ?? contacts.data?.length, 7);
});

test.serial('a destination\'s sessions are shared fairly: a node that holds them all gives way to one that waits', async (t) => {
  const repo = createClusterRepository(w.t0.app.store.db);
  const key = '192.0.2.7:25';
  const take = (node: string) => repo.acquireConnection(key, node, 4, 15_000);
  // node-x came first and took the destination's four sessions.
  for (let i = 0; i < 4; i++) t.true(await take('node-x'));
  t.false(await take('node-y'), 'the limit is the cluster\'s');
  // One of node-x's sessions ends; node-x asks first, but node-y is waiting: node-x keeps to
  // half (it still has three), node-y gets the free one.
  await repo.releaseConnection(key, 'node-x');
  t.false(await take('node-x'), 'over its fair share while another node waits');
  t.true(await take('node-y'));
  t.false(await take('node-y'), 'the limit still holds');
  await repo.releaseConnection(key, 'node-x');
  t.true(await take('node-y'), 'node-y up to its share of two');
  t.false(await take('node-y'));
  const counts = await w.t0.app.store.db.selectFrom('connection_leases').select(['node', 'count']).where('host_key', '=', key).orderBy('node').execute();
  t.deepEqual(counts.map((c) => [c.node, Number(c.count)]), [['node-x', 2], ['node-y', 2]]);
  await w.t0.app.store.db.deleteFrom('connection_leases').where('host_key', '=', key).execute();
});
