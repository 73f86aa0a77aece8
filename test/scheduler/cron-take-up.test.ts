import { Writable } from 'node:stream';
import test from 'ava';
import { pino } from 'pino';
import { ManualClock } from '../../src/lib/clock.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

// A node killed in the middle of a daily cron run leaves its job_runs row unfinished: when it
// starts again it carries that run on in its period (not a day later), skipping what the run
// had done. Runs that ended, and runs a later one followed, are left alone.

let onLine: (line: any) => void = () => undefined;
const stream = new Writable({
  write(chunk: Buffer, _enc, done) {
    for (const l of chunk.toString('utf8').split('\n').filter(Boolean)) onLine(JSON.parse(l));
    done();
  },
});
const logger = pino({ level: 'debug', base: { service: 'posthorn' } }, stream);
const clock = new ManualClock(Date.parse('2026-11-27T03:17:00Z'));

let t0: TestApp;
let after: TestApp | undefined;
test.before(async () => {
  t0 = await startTestApp({ clock, logger });
});
test.after.always(async () => {
  await after?.close();
  await t0?.close();
});

test.serial('a daily run a kill left unfinished is carried on at the next start, without the domains it checked', async (t) => {
  const db = t0.app.store.db;
  const done = await addVerifiedDomain(t0, 'checked-before-kill.org');
  const left = await addVerifiedDomain(t0, 'not-checked-yet.org');
  clock.advance(3600_000);
  // The killed run began at 04:17 and checked one domain before it died; the other was last
  // checked an hour before the run.
  const period = '2026-11-27T04:17:00.000Z';
  const began = clock.now().toISOString();
  clock.advance(60_000);
  await db.updateTable('domains').set({ last_checked_at: clock.now().toISOString() }).where('id', '=', done.id).execute();
  const checkedAt = clock.now().toISOString();
  await db
    .insertInto('job_runs')
    .values([
      { job: 'recheck-verified-domains', period: '2026-11-26T04:17:00.000Z', node: t0.app.nodeId, started_at: '2026-11-26T04:17:00.000Z', finished_at: null },
      { job: 'recheck-verified-domains', period, node: t0.app.nodeId, started_at: began, finished_at: null },
      { job: 'tls-reports', period, node: t0.app.nodeId, started_at: began, finished_at: began },
    ])
    .execute();
  await t0.stop();

  const finished: any[] = [];
  const carriedOn = new Promise<any>((resolve) => {
    onLine = (line) => {
      if (line.msg === 'cron job finished') finished.push(line);
      if (line.msg === 'cron job finished' && line.job === 'recheck-verified-domains') resolve(line);
    };
  });
  clock.advance(60_000);
  after = await startTestApp({ dataDir: t0.dataDir, zone: t0.zone, clock, logger });
  t.is((await carriedOn).result, 1, 'one domain checked: the one the killed run had not got to');
  t.deepEqual(
    finished.map((l) => l.job),
    ['recheck-verified-domains'],
    'a run that ended is not run again',
  );
  const adb = after.app.store.db;
  const [d1, d2] = await Promise.all([done.id, left.id].map((id) => adb.selectFrom('domains').select('last_checked_at').where('id', '=', id).executeTakeFirstOrThrow()));
  t.is(d1.last_checked_at, checkedAt, 'not checked twice');
  t.is(d2.last_checked_at, clock.now().toISOString());
  const runs = await adb.selectFrom('job_runs').select(['period', 'finished_at']).where('job', '=', 'recheck-verified-domains').orderBy('period').execute();
  t.truthy(runs.at(-1)!.finished_at, 'the run carried on is finished');
  t.is(runs.at(-1)!.period, period, 'in its own period');
});
