import { Writable } from 'node:stream';
import test from 'ava';
import { pino } from 'pino';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import type { CronRuns } from '../../src/core/cluster/cron-runs.js';
import type { DomainService } from '../../src/core/domains/domain-service.js';
import { startCronJobs } from '../../src/scheduler/cron-jobs.js';

// "cron job finished" is logged once the run is recorded as finished: whoever acts on the line
// (an operator, a test of the cluster) finds the run ended in the store, not still open.

test('the finished line comes after the run is recorded finished', async (t) => {
  const events: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString('utf8').split('\n').filter(Boolean)) if (JSON.parse(l).msg === 'cron job finished') events.push('logged');
      done();
    },
  });
  let recorded!: () => void;
  const runs: CronRuns = {
    claim: async () => true,
    finish: () => new Promise<void>((resolve) => (recorded = resolve)).then(() => void events.push('recorded')),
    unfinished: async () => [],
    takeOver: async () => false,
    latest: async () => new Map(),
    now: () => new Date(),
  };
  const cron = startCronJobs({ logger: pino({ level: 'debug' }, stream), domains: {} as DomainService, emails: { purgeExpiredIdempotencyKeys: async () => 0 }, config: DEFAULT_CONFIG, runs });
  t.teardown(() => cron.stop());
  const ran = cron.runNow('purge-idempotency-keys');
  while (!recorded) await new Promise((resolve) => setImmediate(resolve));
  recorded();
  await ran;
  await new Promise((resolve) => setImmediate(resolve)); // the log stream's write
  t.deepEqual(events, ['recorded', 'logged']);
});
