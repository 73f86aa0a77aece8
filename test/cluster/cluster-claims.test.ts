import { spawn } from 'node:child_process';
import { hostname } from 'node:os';
import test from 'ava';
import { pino } from 'pino';
import pg from 'pg';
import { createClusterService, NodeNameTaken } from '../../src/core/cluster/cluster-service.js';
import { createCronRuns } from '../../src/core/cluster/cron-runs.js';
import { ManualClock } from '../../src/lib/clock.js';
import { openPgStore, type PgStore } from '../../src/store/pg/pg-store.js';
import { createClusterRepository } from '../../src/store/repositories/cluster-repository.js';
import { createJobRunsRepository } from '../../src/store/repositories/job-runs-repository.js';
import { createShapingRepository } from '../../src/store/repositories/shaping-repository.js';
import { createTlsReportsRepository } from '../../src/store/repositories/tls-reports-repository.js';
import { createTestDatabase, dropTestDatabase } from '../helpers/pg-databases.js';

// Claims made by two nodes at the same instant, on PostgreSQL. A claim reads the due rows and
// leases them; when both nodes read the same rows before either has leased them (a third
// transaction still holds them, or the two statements simply meet), the one that leases second
// must not get them too. A third connection holds the rows locked until both claims wait on it,
// which makes "at the same instant" exact.

let url: string;
let nodes: PgStore[] = [];
let admin: pg.Client;

test.before(async () => {
  url = await createTestDatabase();
  nodes = await Promise.all(['a', 'b'].map(() => openPgStore({ url, poolMax: 4, connectTimeoutMs: 10_000, durability: 'normal' })));
  admin = new pg.Client({ connectionString: url });
  await admin.connect();
});
test.after.always(async () => {
  await admin?.end();
  await Promise.all(nodes.map((n) => n.close()));
  if (url) await dropTestDatabase(url);
});

/**
 * Runs `claim` on both nodes while `table`'s rows are locked by another transaction, lets them
 * go once both claims are waiting for them (or have returned), and returns what each claimed.
 */
async function claimTogether<T>(table: string, claim: (node: PgStore) => Promise<T[]>): Promise<T[][]> {
  await admin.query('begin');
  await admin.query(`select id from ${table} for update`);
  let settled = 0;
  const claims = nodes.map((n) =>
    claim(n).finally(() => {
      settled++;
    }),
  );
  const database = new URL(url).pathname.slice(1);
  // Both claims are blocked behind the lock, or did not wait for it at all (skipped the rows).
  for (;;) {
    const r = await admin.query<{ n: string }>("select count(*) as n from pg_stat_activity where datname = $1 and wait_event_type = 'Lock'", [database]);
    if (Number(r.rows[0]!.n) + settled >= nodes.length) break;
  }
  await admin.query('commit');
  return Promise.all(claims);
}

test.serial('a TLS report delivery is claimed by one node, never by two at once', async (t) => {
  const repo = createTlsReportsRepository(nodes[0]!.db);
  const now = Date.UTC(2026, 10, 26, 9, 0, 0);
  await repo.insertReport({
    policyDomain: 'example.net',
    day: '2026-11-25',
    reportId: 'r1',
    state: 'queued',
    rua: ['mailto:tlsrpt@example.net', 'https://example.net/tlsrpt'],
    reportJson: '{}',
    createdAt: new Date(now).toISOString(),
    targets: ['mailto:tlsrpt@example.net', 'https://example.net/tlsrpt'],
    dueMs: now,
  });
  const [a, b] = await claimTogether('tls_report_deliveries', (n) => createTlsReportsRepository(n.db).claimDue(now, 600_000, 10));
  const ids = [...a!, ...b!].map((r) => r.id);
  t.deepEqual(ids.length, new Set(ids).size, `claimed by both nodes: ${JSON.stringify({ a: a!.map((r) => r.id), b: b!.map((r) => r.id) })}`);
  // Whatever was skipped while locked is claimable now, once.
  const later = await repo.claimDue(now, 600_000, 10);
  t.is(ids.length + later.length, 2, 'each delivery is claimed exactly once');
});

/** The pid of a process that has exited (a child run to its end). */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '']);
  await new Promise((resolve) => child.once('exit', resolve));
  return child.pid!;
}

test.serial('a node restarted at once after a crash joins under its name; a live process of that name keeps it', async (t) => {
  const db = nodes[0]!.db;
  const repo = createClusterRepository(db);
  const clock = new ManualClock(Date.now());
  const logger = pino({ level: 'silent' });
  const service = (pid: number) => createClusterService({ repo, clock, logger, node: { id: 'node-r', hostname: hostname(), pid }, listeners: () => ({}) });
  // The earlier life: killed a moment ago, its heartbeat still fresh.
  const crashed = await deadPid();
  await db.insertInto('cluster_nodes').values({ id: 'node-r', hostname: hostname(), pid: crashed, started_at: new Date().toISOString(), heartbeat_at: Date.now() - 1000, listeners_json: '{}' }).execute();
  const restarted = service(process.pid);
  t.teardown(() => restarted.stop());
  await t.notThrowsAsync(restarted.start(), 'its predecessor on this host is gone: the name is free');

  // A process of that name that is still running on this host keeps it.
  await db.updateTable('cluster_nodes').set({ pid: process.ppid, heartbeat_at: Date.now() }).where('id', '=', 'node-r').execute();
  const clash = service(process.pid + 1_000_000);
  await t.throwsAsync(clash.start(), { instanceOf: NodeNameTaken });
});

test.serial('containers: a twin under the same name, host name and pid is refused while the first beats; a crashed one\'s successor joins', async (t) => {
  // Every container's first process has pid 1, and two containers given one host name (compose
  // `hostname:`, replicas) default to the same node name, `<hostname>:1`. Same host and pid
  // says nothing then: only whether the row's heartbeat still moves.
  const db = nodes[0]!.db;
  const logger = pino({ level: 'silent' });
  const service = (store: PgStore) =>
    createClusterService({ repo: createClusterRepository(store.db), clock: new ManualClock(Date.now()), logger, node: { id: 'box:1', hostname: 'box', pid: 1 }, listeners: () => ({}) });
  const first = service(nodes[0]!);
  const twin = service(nodes[1]!);
  t.teardown(async () => {
    await first.stop();
    await twin.stop();
    await db.deleteFrom('cluster_nodes').where('id', '=', 'box:1').execute();
  });
  await first.start();
  await t.throwsAsync(twin.start(), { instanceOf: NodeNameTaken }, 'the first container still beats under that name');

  // The first container crashed a moment ago (no leave, its row fresh): its restart takes the name.
  await first.stop();
  await db.insertInto('cluster_nodes').values({ id: 'box:1', hostname: 'box', pid: 1, started_at: new Date().toISOString(), heartbeat_at: Date.now() - 500, listeners_json: '{}' }).execute();
  const restarted = service(nodes[1]!);
  t.teardown(() => restarted.stop());
  await t.notThrowsAsync(restarted.start(), 'its earlier life beats no more: the name is free');
});

test.serial('two nodes that put the same hold at once leave one hold, which an operator can lift', async (t) => {
  const now = Date.now();
  const hold = (id: string) => ({ id, source: 'default', rollup: 'gmail.com', kind: 'suspend' as const, message_rate: null, reason: `421 from ${id}`, until_ms: now + 3600_000, created_at: new Date(now).toISOString() });
  await createShapingRepository(nodes[0]!.db).putHold(hold('sh_old'));
  // Both replace the hold in place while it is still locked: both waited for the same old row.
  await claimTogether('shaping_holds', async (n) => {
    await createShapingRepository(n.db).putHold(hold(n === nodes[0] ? 'sh_a' : 'sh_b'));
    return [];
  });
  const repo = createShapingRepository(nodes[0]!.db);
  const active = await repo.activeHolds(now);
  t.is(active.length, 1, `holds: ${active.map((h) => h.id).join(', ')}`);
  t.truthy(await repo.endHold(active[0]!.id, now));
  t.deepEqual(await repo.activeHolds(now), [], 'lifted: nothing holds the destination any more');
});

test.serial('two nodes writing overlapping TLS session counts at once both commit (no deadlock), and every count is kept', async (t) => {
  const row = (mx: string, count = 1) => ({
    policy_domain: 'counts.example',
    day: '2026-11-25',
    policy_key: 'k',
    policy_type: 'no-policy-found',
    policy_json: '{}',
    result: 'certificate-expired',
    sending_ip: '192.0.2.1',
    mx_host: mx,
    receiving_ip: '192.0.2.9',
    reason_code: '',
    count,
  });
  const repo = (i: number) => createTlsReportsRepository(nodes[i]!.db);
  await repo(0).addCounts([row('mx1'), row('mx2'), row('mx3')]);
  // A third transaction holds mx3's row: node A has written mx1 and waits for mx3 (its counts
  // came in the order mx1, mx3, mx2); node B, whose counts came as mx2, mx1, has written mx2 and
  // waits for mx1. Once mx3 is free, A goes on to mx2, which B holds.
  await admin.query('begin');
  await admin.query("select 1 from tls_session_counts where mx_host = 'mx3' for update");
  const database = new URL(url).pathname.slice(1);
  const waiting = async () => Number((await admin.query<{ n: string }>("select count(*) as n from pg_stat_activity where datname = $1 and wait_event_type = 'Lock'", [database])).rows[0]!.n);
  const a = repo(0).addCounts([row('mx1'), row('mx3'), row('mx2')]);
  while ((await waiting()) < 1);
  const b = repo(1).addCounts([row('mx2'), row('mx1')]);
  while ((await waiting()) < 2);
  await admin.query('commit');
  const results = await Promise.allSettled([a, b]);
  t.deepEqual(
    results.map((r) => (r.status === 'rejected' ? (r.reason as Error).message : 'ok')),
    ['ok', 'ok'],
  );
  const counts = await nodes[0]!.db.selectFrom('tls_session_counts').select(['mx_host', 'count']).where('policy_domain', '=', 'counts.example').orderBy('mx_host').execute();
  t.deepEqual(
    counts.map((c) => [c.mx_host, Number(c.count)]),
    [
      ['mx1', 3],
      ['mx2', 3],
      ['mx3', 2],
    ],
  );
});

test.serial('a node that joins while another sweeps keeps what it takes: the sweep frees only what nodes dead at its end held', async (t) => {
  const db = nodes[0]!.db;
  const joiner = createClusterRepository(nodes[1]!.db);
  const sweeper = createClusterService({ repo: createClusterRepository(db), clock: new ManualClock(Date.now()), logger: pino({ level: 'silent' }), node: { id: 'node-s', hostname: 'host-s', pid: 1 }, listeners: () => ({}) });
  const key = 'join-race.example:25';
  t.teardown(async () => {
    await db.deleteFrom('cluster_nodes').where('id', 'in', ['node-s', 'node-j']).execute();
    await db.deleteFrom('connection_leases').where('host_key', '=', key).execute();
  });
  // A dead node's in-flight idempotency key, locked by another transaction: the sweep, which has
  // read the live nodes by then, waits on it before it reaches the connection counts.
  await db.insertInto('idempotency_keys').values({ team_id: 1, key: 'join-race', body_hash: 'x', state: 'in_flight', response_json: null, created_at: Date.now(), owner: 'node-gone' }).execute();
  await admin.query('begin');
  await admin.query("select 1 from idempotency_keys where key = 'join-race' for update");
  const database = new URL(url).pathname.slice(1);
  const waiting = async () => Number((await admin.query<{ n: string }>("select count(*) as n from pg_stat_activity where datname = $1 and wait_event_type = 'Lock'", [database])).rows[0]!.n);
  const sweeping = sweeper.sweepNow();
  while ((await waiting()) < 1);
  // Meanwhile another node joins (its first heartbeat) and opens a session to a destination.
  let joined = false;
  const joining = joiner.heartbeat({ id: 'node-j', hostname: 'host-j', pid: 2, startedAt: new Date().toISOString(), listenersJson: '{}' }).then(() => {
    joined = true;
  });
  while (!joined && (await waiting()) < 2);
  let took = false;
  if (joined) took = await joiner.acquireConnection(key, 'node-j', 2, 15_000);
  await admin.query('commit');
  await Promise.all([sweeping, joining]);
  if (!took) took = await joiner.acquireConnection(key, 'node-j', 2, 15_000);
  t.true(took);
  const counts = await db.selectFrom('connection_leases').select(['node', 'count']).where('host_key', '=', key).execute();
  t.deepEqual(counts.map((c) => [c.node, Number(c.count)]), [['node-j', 1]], 'the joined node\'s session still counts');
  t.is((await db.selectFrom('idempotency_keys').select('key').where('key', '=', 'join-race').execute()).length, 0, 'the dead node\'s key is released');
});

test.serial('two processes started at once under one name (on two hosts): one joins, the other is refused', async (t) => {
  const logger = pino({ level: 'silent' });
  const clock = new ManualClock(Date.now());
  // Each has looked at the name before it goes on to free what the name held, and waits there
  // until the other has too (or was refused): a check made apart from the heartbeat's write
  // lets both through, and they then share every lease.
  let arrived = 0;
  let goOn!: () => void;
  const gate = new Promise<void>((resolve) => (goOn = resolve));
  const gated = (store: PgStore) => {
    const repo = createClusterRepository(store.db);
    return {
      ...repo,
      async releaseOwn(id: string) {
        if (++arrived === 2) goOn();
        await gate;
        return repo.releaseOwn(id);
      },
    };
  };
  const twins = nodes.map((store, i) => createClusterService({ repo: gated(store), clock, logger, node: { id: 'node-twin', hostname: `host-${i}`, pid: 100 + i }, listeners: () => ({}) }));
  t.teardown(async () => {
    await Promise.all(twins.map((s) => s.stop()));
    await nodes[0]!.db.deleteFrom('cluster_nodes').where('id', '=', 'node-twin').execute();
  });
  const results = await Promise.allSettled(twins.map((s) => s.start().finally(goOn)));
  t.is(results.filter((r) => r.status === 'fulfilled').length, 1, JSON.stringify(results.map((r) => (r.status === 'rejected' ? (r.reason as Error).message : 'joined'))));
  t.true(results.some((r) => r.status === 'rejected' && r.reason instanceof NodeNameTaken));
});

test.serial('a cron run left by a node that comes back is carried on once: by that node, not also by the live node that read it as gone', async (t) => {
  const db = nodes[0]!.db;
  const job = 'probe-takeover';
  const startedAt = new Date().toISOString();
  await db.insertInto('job_runs').values({ job, period: '2026-11-26T03:00:00.000Z', node: 'node-x', started_at: startedAt }).execute();
  t.teardown(async () => {
    await db.deleteFrom('job_runs').where('job', '=', job).execute();
    await db.deleteFrom('cluster_nodes').where('id', '=', 'node-x').execute();
  });
  const runsOf = (store: PgStore, node: string) => createCronRuns({ repo: createJobRunsRepository(store.db), clock: new ManualClock(Date.now()), node, cluster: true });
  const live = runsOf(nodes[0]!, 'node-l');
  const back = runsOf(nodes[1]!, 'node-x');
  // node-x stopped partway: the live node's sweep reads its run as left unfinished.
  const [seen] = await live.unfinished([job]);
  t.is(seen?.node, 'node-x');
  // Meanwhile node-x starts again (its first heartbeat) and carries on its own run.
  await createClusterRepository(nodes[1]!.db).heartbeat({ id: 'node-x', hostname: 'host-x', pid: 3, startedAt, listenersJson: '{}' });
  const [own] = await back.unfinished([job]);
  t.true(await back.takeOver(own!));
  // The live node goes on with what it read: the run is no longer a gone node's.
  t.false(await live.takeOver(seen!), 'taken over by both nodes: run twice');
});

test.serial('a sweep held up by a row a frozen transaction holds gives up within seconds, and the heartbeats it held back go through', async (t) => {
  const db = nodes[0]!.db;
  const other = createClusterRepository(nodes[1]!.db);
  const sweeper = createClusterService({ repo: createClusterRepository(db), clock: new ManualClock(Date.now()), logger: pino({ level: 'silent' }), node: { id: 'node-s', hostname: 'host-s', pid: 1 }, listeners: () => ({}) });
  t.teardown(async () => {
    await admin.query('rollback').catch(() => undefined);
    await db.deleteFrom('cluster_nodes').where('id', 'in', ['node-s', 'node-o']).execute();
    await db.deleteFrom('idempotency_keys').where('key', '=', 'frozen').execute();
  });
  // A dead node's in-flight key, locked by a transaction that never ends (a node frozen mid-write).
  await db.insertInto('idempotency_keys').values({ team_id: 1, key: 'frozen', body_hash: 'x', state: 'in_flight', response_json: null, created_at: Date.now(), owner: 'node-frozen' }).execute();
  await admin.query('begin');
  await admin.query("select 1 from idempotency_keys where key = 'frozen' for update");
  const sweeping = sweeper.sweepNow();
  const database = new URL(url).pathname.slice(1);
  while (Number((await admin.query<{ n: string }>("select count(*) as n from pg_stat_activity where datname = $1 and wait_event_type = 'Lock'", [database])).rows[0]!.n) < 1);
  // Another node's heartbeat waits for the sweep, which gives up: the heartbeat is written.
  const beat = other.heartbeat({ id: 'node-o', hostname: 'host-o', pid: 2, startedAt: new Date().toISOString(), listenersJson: '{}' });
  await t.throwsAsync(sweeping, { message: /lock timeout/ });
  await beat;
  t.truthy(await db.selectFrom('cluster_nodes').select('id').where('id', '=', 'node-o').executeTakeFirst());
  await admin.query('commit');
});

test.serial('a node that stops stops counting its sessions at once; a process that took its name over keeps its own', async (t) => {
  const [a, b] = nodes.map((n) => createClusterRepository(n.db));
  const key = 'leave.example:25';
  const startedAt = new Date().toISOString();
  const beat = (id: string, pid: number) => ({ id, hostname: 'host-l', pid, startedAt, listenersJson: '{}' });
  await a!.heartbeat(beat('node-l', 1));
  await b!.heartbeat(beat('node-m', 2));
  t.true(await a!.acquireConnection(key, 'node-l', 1, 15_000));
  t.false(await b!.acquireConnection(key, 'node-m', 1, 15_000), 'the limit of 1 is taken');
  await a!.leave(beat('node-l', 1));
  t.true(await b!.acquireConnection(key, 'node-m', 1, 15_000), 'the stopped node\'s session no longer counts');
  // An older process of node-m's name (another pid) leaving does not take node-m's session away.
  await b!.leave(beat('node-m', 99));
  t.false(await a!.acquireConnection(key, 'node-l', 1, 15_000), 'node-m still holds the one session');
});

test.serial('a node whose clock is a minute behind is not taken for dead: heartbeats are stamped and judged by the store\'s clock', async (t) => {
  // Its heartbeats, stamped by its own clock, read a minute old to the others: they freed what it
  // was sending (sent again) and repaired its "death" at every beat.
  const db = nodes[0]!.db;
  const logger = pino({ level: 'silent' });
  const service = (store: PgStore, id: string, skewMs: number) =>
    createClusterService({ repo: createClusterRepository(store.db), clock: new ManualClock(Date.now()), logger, node: { id, hostname: `host-${id}`, pid: 7 }, listeners: () => ({}), wallClock: () => Date.now() + skewMs });
  const behind = service(nodes[1]!, 'node-behind', -60_000);
  const ahead = service(nodes[0]!, 'node-ahead', 60_000);
  t.teardown(async () => {
    await Promise.all([behind.stop(), ahead.stop()]);
    await db.deleteFrom('job_runs').where('job', '=', 'node-died').execute();
    await db.deleteFrom('connection_leases').where('node', 'in', ['node-behind', 'node-ahead']).execute();
  });
  await behind.start();
  await ahead.start();
  // The node behind holds a session to a destination: the sweep of a node that takes it for dead drops it.
  await db.insertInto('connection_leases').values({ host_key: 'mx.skew.example', node: 'node-behind', count: 1, until_ms: Date.now() + 600_000, waiting_until: Date.now() + 600_000 }).execute();
  await ahead.sweepNow();
  t.deepEqual((await ahead.members()).map((m) => m.node).filter((n) => n === 'node-ahead' || n === 'node-behind').sort(), ['node-ahead', 'node-behind']);
  t.deepEqual((await behind.members()).map((m) => m.node).filter((n) => n === 'node-ahead' || n === 'node-behind').sort(), ['node-ahead', 'node-behind']);
  for (const m of (await ahead.members()).filter((x) => x.node === 'node-ahead' || x.node === 'node-behind')) t.true(m.lastSeenMs < 15_000, `${m.node} heard ${m.lastSeenMs} ms ago`);
  t.deepEqual(await db.selectFrom('job_runs').select('period').where('job', '=', 'node-died').where('period', 'like', 'node-behind@%').execute(), [], 'no death repaired');
  t.truthy(await db.selectFrom('connection_leases').select('node').where('node', '=', 'node-behind').executeTakeFirst(), 'what it holds stays its own');
});

test.serial('a node whose clock is 15 s behind has its sessions counted by the others: session counts are stamped and judged by the store\'s clock', async (t) => {
  // Stamped by its own clock, its sessions' count ran out at once for the others, and they
  // opened sessions past the destination's limit.
  const db = nodes[0]!.db;
  const key = 'mx.behind.example:25';
  const logger = pino({ level: 'silent' });
  const behind = createClusterService({
    repo: createClusterRepository(nodes[1]!.db),
    clock: new ManualClock(Date.now()),
    logger,
    node: { id: 'node-late', hostname: 'host-late', pid: 7 },
    listeners: () => ({}),
    wallClock: () => Date.now() - 15_000,
    writeConnections: (write) => write(new Map([[key, 1]])),
  });
  t.teardown(async () => {
    await behind.stop();
    await db.deleteFrom('connection_leases').where('host_key', '=', key).execute();
  });
  await behind.start();
  t.false(await createClusterRepository(db).acquireConnection(key, 'node-early', 1, 15_000), 'the one session the limit allows is the late node\'s');
});

test.serial('a node frozen while another process took its name stops at its next beat, and leaves the new owner\'s row alone', async (t) => {
  const db = nodes[0]!.db;
  const logger = pino({ level: 'silent' });
  let frozen: Promise<void> | undefined;
  let thaw = () => undefined as void;
  const repo = createClusterRepository(nodes[1]!.db);
  const lost: Error[] = [];
  const old = createClusterService({
    // Frozen: its heartbeat does not reach the store until thawed.
    repo: { ...repo, heartbeat: async (n) => (await frozen, repo.heartbeat(n)) },
    clock: new ManualClock(Date.now()),
    logger,
    node: { id: 'node-twice', hostname: 'host-old', pid: 7 },
    listeners: () => ({}),
    onNameLost: (err) => lost.push(err),
  });
  const fresh = createClusterService({ repo: createClusterRepository(db), clock: new ManualClock(Date.now()), logger, node: { id: 'node-twice', hostname: 'host-new', pid: 8 }, listeners: () => ({}) });
  t.teardown(async () => {
    thaw();
    await Promise.all([old.stop(), fresh.stop()]);
    await db.deleteFrom('cluster_nodes').where('id', '=', 'node-twice').execute();
  });
  await old.start();
  frozen = new Promise<void>((resolve) => (thaw = resolve));
  // Silent for more than 15 s: another host starts under the same name and takes it.
  await db.updateTable('cluster_nodes').set({ heartbeat_at: Date.now() - 60_000 }).where('id', '=', 'node-twice').execute();
  await fresh.start();
  const beat = old.sweepNow();
  thaw();
  await beat;
  const row = await db.selectFrom('cluster_nodes').selectAll().where('id', '=', 'node-twice').executeTakeFirstOrThrow();
  t.is(row.hostname, 'host-new', 'the old node did not beat over the new owner\'s row');
  t.is(lost.length, 1);
  t.true(lost[0] instanceof NodeNameTaken);
  t.regex(lost[0]!.message, /host-new/);
  await old.stop();
  t.truthy(await db.selectFrom('cluster_nodes').select('id').where('id', '=', 'node-twice').executeTakeFirst(), 'its stop leaves the new owner\'s row');
});
