import test from 'ava';
import { capturedLog, stopWhileHeld } from '../helpers/captured-log.js';
import { createQueueService, type QueueServiceDeps } from '../../src/core/queue/queue-service.js';
import { ManualClock } from '../../src/lib/clock.js';
import { heldTxtLookup } from '../helpers/held-txt-lookup.js';
import { createDeliveriesRepository } from '../../src/store/repositories/deliveries-repository.js';
import { createQueueRepository } from '../../src/store/repositories/queue-repository.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

// The daily jobs that work in steps stop at the next step when the app stops: the stop returns
// without waiting for the rest, every step done is whole, and the next run does what is left
// (and nothing the stopped run did).

const log = capturedLog();
const { lines, logger } = log;

const DAY = '2026-11-20';
const clock = new ManualClock(Date.parse('2026-11-21T02:00:00Z'));
/** More policy domains than one batch of `_smtp._tls` lookups (8 at a time). */
const DOMAINS = Array.from({ length: 20 }, (_, i) => `d${String(i).padStart(2, '0')}.stop-rpt.test`);

const held = heldTxtLookup();

let t0: TestApp;
let after: TestApp | undefined;
test.before(async () => {
  t0 = await startTestApp({ logger, clock, resolver: held.resolver });
});
test.after.always(async () => {
  await after?.close();
  await t0?.close();
});

test.serial('the queue prune stopped between chunks leaves whole chunks pruned, and its next run prunes the rest', async (t) => {
  const db = t0.app.store.db;
  const retentionMs = t0.config.outbound.traces.retentionDays * 86_400_000;
  const old = clock.nowMs() - retentionMs - 3600_000;
  const row = (i: number, startedAt: number) => ({ email_id: `em_prune_${i}`, team_id: t0.teamId, rcpt_domain: 'prune.test', started_at: startedAt + i, mx_host: null, address: null, source: null, source_name: null, tls_json: null, results_json: '[]', transcript_json: '[]' });
  // Past their retention: more than two chunks (5000 a delete). Within it: 10, kept.
  const OLD = 12_000;
  for (let i = 0; i < OLD; i += 1000) await db.insertInto('delivery_attempts').values(Array.from({ length: 1000 }, (_, j) => row(i + j, old))).execute();
  await db.insertInto('delivery_attempts').values(Array.from({ length: 10 }, (_, j) => row(OLD + j, clock.nowMs()))).execute();
  const count = async (young: boolean) => Number((await db.selectFrom('delivery_attempts').select((eb) => eb.fn.countAll<number>().as('n')).where('started_at', young ? '>=' : '<', clock.nowMs() - retentionMs).executeTakeFirstOrThrow()).n);

  // The service over the app's store, its chunks watched: the stop comes once the first is done.
  const stop = new AbortController();
  const repo = createDeliveriesRepository(db);
  const chunks: number[] = [];
  const deliveriesRepo = Object.assign(Object.create(repo), {
    async pruneAttempts(beforeMs: number) {
      const n = await repo.pruneAttempts(beforeMs);
      chunks.push(n);
      stop.abort();
      return n;
    },
  }) as QueueServiceDeps['deliveriesRepo'];
  const queue = createQueueService({ deliveriesRepo, queue: createQueueRepository(db), clock, shaping: { prune: async () => ({ holds: 0, warmupDays: 0 }) } } as unknown as QueueServiceDeps);
  const first = await queue.prune(retentionMs, stop.signal);
  t.deepEqual(chunks, [5000], 'no chunk after the stop');
  t.is(first.traces, 5000);
  t.is(await count(false), OLD - 5000, 'the chunk is whole');
  t.is(await count(true), 10);

  chunks.length = 0;
  const next = await queue.prune(retentionMs, new AbortController().signal);
  t.is(next.traces, OLD - 5000, 'the next run prunes what was left');
  t.is(await count(false), 0);
  t.is(await count(true), 10, 'nothing within the retention');
});

test.serial('a stop during the daily TLS reports ends after the batch of domains under way; the next run reports the rest, and nothing twice', async (t) => {
  const db = t0.app.store.db;
  await db
    .insertInto('tls_session_counts')
    .values(DOMAINS.map((d) => ({ policy_domain: d, day: DAY, policy_key: 'no-policy-found', policy_type: 'no-policy-found', policy_json: '{}', result: 'success', sending_ip: '', mx_host: `mx.${d}`, receiving_ip: '', reason_code: '', count: 3 })))
    .execute();
  // None publishes _smtp._tls (each day is recorded "no-rua"); the lookup of one in the
  // second batch of lookups is held until the stop waits for the job.
  held.name = `_smtp._tls.${DOMAINS[9]}`;
  const run = t0.app.runCronJob('tls-reports');
  await held.reached;
  const fromStop = lines.length;
  // The lookup is let go once the stop has done what it can without the job: waiting for it, or
  // (had it not waited) closed the store.
  const stopping = stopWhileHeld(() => t0.stop(), log, held.release);
  await t.notThrowsAsync(stopping);
  t.true(await run);
  t.deepEqual(
    lines.slice(fromStop).filter((l) => l.level >= 40),
    [],
    'no write met a closed store',
  );
  const stopped = lines.find((l) => l.msg === 'cron job finished' && l.job === 'tls-reports');
  const first: number = stopped.result.made.withoutRua;
  t.true(first < DOMAINS.length, `stopped early: ${first} of ${DOMAINS.length} reported`);
  t.is(first % 8, 0, 'whole batches');

  // The next start carries the run on (it was stopped partway): the rest of the domains.
  const carriedOn = new Promise<any>((resolve) => {
    log.onLine = (line) => {
      if (line.msg === 'cron job finished' && line.job === 'tls-reports') resolve(line);
    };
  });
  after = await startTestApp({ dataDir: t0.dataDir, zone: t0.zone, clock, logger });
  t.is((await carriedOn).result.made.withoutRua, DOMAINS.length - first, 'only the domains not reported before the stop');
  t.true(lines.some((l) => l.event === 'cron.taken_up' && l.job === 'tls-reports'));
  const adb = after.app.store.db;
  const all = await adb.selectFrom('tls_reports_out').select(['policy_domain', 'state']).where('day', '=', DAY).orderBy('policy_domain').execute();
  t.deepEqual(
    all.map((r) => r.policy_domain),
    DOMAINS,
  );
  t.true(all.every((r) => r.state === 'no-rua'));
  t.is((await adb.selectFrom('tls_session_counts').select('policy_domain').where('day', '=', DAY).execute()).length, 0);
  const runs = await adb.selectFrom('job_runs').selectAll().where('job', '=', 'tls-reports').execute();
  t.is(runs.length, 1, 'one run, carried on in its period');
  t.truthy(runs[0]!.finished_at);
});
