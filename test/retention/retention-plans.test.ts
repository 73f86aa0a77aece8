import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { plans as plansOf, recording as recordingOn, scans } from '../helpers/statement-plans.js';

// The daily retention jobs read only what their indexes lead them to: no statement they run
// scans a whole table (a store of years of mail would be read every day).

const clock = new ManualClock(Date.UTC(2026, 10, 27, 9, 0, 0));
let t0: TestApp;

test.before(async () => {
  t0 = await startTestApp({ clock, overrides: { retention: { contentDays: 1 } } });
});
test.after.always(async () => {
  await t0?.close();
});
const recording = (fn: () => Promise<unknown>) => recordingOn(t0, fn);
const plans = (ran: Awaited<ReturnType<typeof recording>>) => plansOf(t0, ran);

const reading = (table: string) => (p: { sql: string }) => new RegExp(`^select .* from "${table}"`, 'i').test(p.sql);

test.serial('the content retention job scans no table: received mail and sandbox captures are found by their age through an index', async (t) => {
  const ran = await recording(async () => {
    if (!(await t0.app.runCronJob('purge-old-content', clock.now()))) throw new Error('no purge-old-content job');
  });
  const explained = await plans(ran);
  t.true(explained.length > 5, 'the job ran its statements');
  for (const p of explained) t.deepEqual(scans(p.plan), [], `${p.sql}\n${p.plan.join('\n')}`);

  const received = explained.filter(reading('received_emails'));
  t.is(received.length, 1, 'one statement finds the received mail to empty');
  t.regex(received[0]!.plan.join('\n'), /received_emails_created/);
  const sandbox = explained.filter(reading('sandbox_messages'));
  t.is(sandbox.length, 1, 'one statement finds the sandbox captures to delete');
  t.regex(sandbox[0]!.plan.join('\n'), /sandbox_messages_created/);
});

test.serial('the queue records job scans no table either', async (t) => {
  const ran = await recording(async () => {
    if (!(await t0.app.runCronJob('prune-queue-records', clock.now()))) throw new Error('no prune-queue-records job');
  });
  const explained = await plans(ran);
  t.true(explained.some((p) => /delivery_attempts/.test(p.sql)), 'the job ran its statements');
  // Small by construction, so read whole: shaping_rates holds a row per (source, rollup),
  // warmup_usage one per (source, rollup, day) for 90 days.
  for (const p of explained.filter((p) => !/shaping_rates|warmup_usage/.test(p.sql))) t.deepEqual(scans(p.plan), [], `${p.sql}\n${p.plan.join('\n')}`);
});
