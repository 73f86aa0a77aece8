import test from 'ava';
import { loadConfig } from '../../src/config/load.js';
import type { CronJobDeps } from '../../src/scheduler/cron-jobs.js';
import { startCronJobs } from '../../src/scheduler/cron-jobs.js';
import { createLogger } from '../../src/lib/logger.js';

// Cron expressions name times of day in UTC on every node, whatever its TZ: nodes in different
// zones run a daily job at the same instant, so the (job, scheduled time) claim makes it one
// run for the cluster. This process runs 5:30 ahead of UTC (no daylight saving time).
process.env.TZ = 'Asia/Kolkata';

test('the daily jobs are scheduled at their hour in UTC, not in the process time zone', (t) => {
  t.is(new Date(Date.UTC(2026, 0, 1, 0, 0)).getHours(), 5, 'the process time zone is not UTC');
  const config = loadConfig({ env: {}, overrides: { outbound: { tlsReports: { enabled: true } } } });
  const deps = { logger: createLogger('silent'), config, domains: {}, emails: {}, queue: {}, tlsReports: { daily: async () => 0, retries: async () => 0 } } as unknown as CronJobDeps;
  const jobs = startCronJobs(deps);
  t.teardown(() => jobs.stop());
  for (const [name, hour, minute] of [
    ['recheck-verified-domains', 3, 17],
    ['prune-queue-records', 4, 41],
    ['tls-reports', 1, 17],
  ] as const) {
    const next = jobs.nextRun(name);
    t.truthy(next, name);
    t.deepEqual([next!.getUTCHours(), next!.getUTCMinutes()], [hour, minute], `${name} at ${next?.toISOString()}`);
  }
  t.is(jobs.nextRun('recheck-unverified-domains')!.getUTCMinutes() % 10, 0);
});
