import { Writable } from 'node:stream';
import test from 'ava';
import { pino } from 'pino';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import type { CronRuns } from '../../src/core/cluster/cron-runs.js';
import type { DomainService } from '../../src/core/domains/domain-service.js';
import { ManualClock } from '../../src/lib/clock.js';
import { startCronJobs } from '../../src/scheduler/cron-jobs.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

// A daily job whose time passed while no server ran (downtime, an upgrade across it) runs once
// when a server starts again, for its latest missed time: not zero times (a day without it), not
// once per missed day. A job that never ran, or did not miss its time, waits for its next one.

test('a daily job missed over three days of downtime runs once at the next start, in its latest period', async (t) => {
  t.timeout(60_000);
  let onLine: (line: any) => void = () => undefined;
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString('utf8').split('\n').filter(Boolean)) onLine(JSON.parse(l));
      done();
    },
  });
  const logger = pino({ level: 'debug', base: { service: 'posthorn' } }, stream);
  const clock = new ManualClock(Date.parse('2026-11-27T05:00:00Z'));
  const t0 = await startTestApp({ clock, logger });
  let after: TestApp | undefined;
  t.teardown(async () => {
    await after?.close();
    await t0.close();
  });
  t.true(await t0.app.runCronJob('prune-queue-records', new Date('2026-11-27T04:41:00Z')));
  await t0.stop();

  // Down from the 27th to the 30th: the 28th, 29th and 30th at 04:41 were missed.
  clock.set(Date.parse('2026-11-30T09:00:00Z'));
  const finished: any[] = [];
  let caught: any;
  const ranOnce = new Promise<void>((resolve) => {
    onLine = (line) => {
      if (line.event === 'cron.caught_up') caught = line;
      if (line.msg !== 'cron job finished') return;
      finished.push(line);
      if (line.job === 'prune-queue-records') resolve();
    };
  });
  after = await startTestApp({ dataDir: t0.dataDir, zone: t0.zone, clock, logger });
  await ranOnce;
  t.is(caught?.job, 'prune-queue-records');
  t.is(caught?.period, '2026-11-30T04:41:00.000Z');
  const runs = await after.app.store.db.selectFrom('job_runs').select(['period', 'finished_at']).where('job', '=', 'prune-queue-records').where('period', '>', '2026-11-27T04:41:00.000Z').execute();
  t.is(runs.length, 1, 'not one run per missed day');
  t.is(runs[0]!.period, '2026-11-30T04:41:00.000Z');
  t.truthy(runs[0]!.finished_at);
  await after.stop();
  t.deepEqual(
    finished.map((l) => l.job),
    ['prune-queue-records'],
    'one run, of the job that missed its time; the jobs that never ran wait for theirs',
  );
});

function fakeRuns(latest: Record<string, string>, now: number, claimed: string[]): CronRuns {
  return {
    claim: async (job, period) => {
      claimed.push(`${job} ${period}`);
      return true;
    },
    finish: async () => undefined,
    unfinished: async () => [],
    takeOver: async () => false,
    latest: async (jobs) => new Map(jobs.filter((j) => latest[j]).map((j) => [j, latest[j]!])),
    now: () => new Date(now),
  };
}

test('catchUp runs only a job that missed its time since its latest run, once, by the injected clock', async (t) => {
  const claimed: string[] = [];
  const now = Date.parse('2026-11-30T04:50:00Z');
  const runs = fakeRuns(
    {
      // Missed today's 04:41 (and the days before): caught up once, for today.
      'prune-queue-records': '2026-11-25T04:41:00.000Z',
      // Ran at its latest time (hourly at :23): nothing missed.
      'purge-idempotency-keys': '2026-11-30T04:23:00.000Z',
      // Weekly, with a seconds field, last run two weeks ago: caught up once, for this week's time.
      'recheck-verified-domains': '2026-11-16T03:30:15.000Z',
    },
    now,
    claimed,
  );
  const cron = startCronJobs({
    logger: pino({ level: 'silent' }),
    domains: { recheck: async () => 0 } as unknown as DomainService,
    emails: { purgeExpiredIdempotencyKeys: async () => 0 },
    queue: { prune: async () => ({}) as never },
    config: { ...DEFAULT_CONFIG, domains: { ...DEFAULT_CONFIG.domains, recheckVerifiedCron: '15 30 3 * * 1' } },
    runs,
  });
  t.teardown(() => cron.stop());
  await cron.catchUp();
  await cron.settled();
  t.deepEqual(claimed.sort(), ['prune-queue-records 2026-11-30T04:41:00.000Z', 'recheck-verified-domains 2026-11-30T03:30:15.000Z'], 'jobs that never ran (recheck-unverified-domains) wait for their time');
});
