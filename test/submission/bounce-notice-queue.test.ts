import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { capturedLog } from '../helpers/captured-log.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import type { SinkReply, SmtpSink } from '../helpers/smtp-sink.js';
import { submissionTransport } from '../helpers/submission-client.js';
import { waitForStatus } from '../inbound/helpers/inbound-world.js';

// Bounce notices are queued in the store like any mail (docs/inbound.md, Bounce notices): a
// notice the sender's MX defers is tried again on a backoff until the give-up age; one it
// refuses for good is dropped; the rows carry their team and go with it.

const clock = new ManualClock(Date.UTC(2026, 10, 28, 8, 0, 0));
const log = capturedLog();
let w: MailWorld;
let senderMx: SmtpSink;
/** How the sender's MX answers the notice's RCPT TO (undefined: 250). */
let noticeReply: SinkReply | undefined;
let noticeRcpts = 0;

test.before(async () => {
  w = await startMailWorld({ clock, logger: log.logger, overrides: { submission: { bounceNotices: true }, outbound: { maxAgeHours: 2 } } });
  senderMx = await w.startSecondSink('sender.dev', {
    onRcpt: () => {
      noticeRcpts++;
      return noticeReply;
    },
  });
  w.sink.setBehaviour({ onRcpt: (address) => (address.startsWith('nobody') ? { code: 550, message: `5.1.1 <${address}>: User unknown` } : undefined) });
});
test.after.always(async () => {
  await w?.close();
});

async function submitBouncing(subject: string, to: string[]): Promise<string> {
  const tx = submissionTransport(w.t0);
  try {
    const info = await tx.sendMail({ from: 'hello@sender.dev', to, subject, text: 'x', envelope: { from: 'app@sender.dev', to } });
    const id = /queued as (em_\S+)$/.exec(info.response)![1]!;
    await waitForStatus(w, id, 'BOUNCED');
    await w.settle();
    return id;
  } finally {
    tx.close();
  }
}

const rowsOf = (emailId: string) => w.t0.app.store.db.selectFrom('bounce_notice_recipients').selectAll().where('email_id', '=', emailId).execute();
/** posthorn_bounce_notices_queued as /metrics reports it. */
async function queuedGauge(): Promise<{ waiting: number; deferred: number }> {
  const text = await (await fetch(`${w.t0.baseUrl}/metrics`)).text();
  const value = (state: string) => Number(new RegExp(`^posthorn_bounce_notices_queued\\{state="${state}"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? NaN);
  return { waiting: value('waiting'), deferred: value('deferred') };
}
const linesFor = (emailId: string, pattern: RegExp) => log.lines.filter((l) => l.emailId === emailId && pattern.test(l.msg));

test.serial('a notice the sender MX defers (451) is sent after the backoff, exactly once', async (t) => {
  noticeReply = { code: 451, message: '4.3.0 Try again later' };
  const before = senderMx.messages.length;
  const rcptsBefore = noticeRcpts;
  const id = await submitBouncing('Deferred notice', ['nobody-451@example.net']);
  t.is(noticeRcpts, rcptsBefore + 1, 'tried once');
  t.is(senderMx.messages.length, before, 'deferred: not there yet');
  const [row] = await rowsOf(id);
  t.truthy(row, 'kept in the store');
  t.is(Number(row!.attempts), 1);
  t.is(Number(row!.next_attempt_at), clock.nowMs() + 60_000, 'due again in a minute');
  t.is(linesFor(id, /deferred/).length, 1);
  t.deepEqual(await queuedGauge(), { waiting: 0, deferred: 1 }, 'the operator sees it waiting');

  noticeReply = undefined;
  // Not due yet: nothing is tried.
  await w.t0.app.bounceNotices!.runNow();
  t.is(noticeRcpts, rcptsBefore + 1);
  clock.advance(61_000);
  await w.t0.app.bounceNotices!.runNow();
  t.is(senderMx.messages.length, before + 1);
  t.regex(senderMx.messages[before]!.raw.toString('latin1'), /^Final-Recipient: rfc822; nobody-451@example\.net\r$/m);
  t.deepEqual(await rowsOf(id), [], 'sent: the rows are gone');
  t.deepEqual(await queuedGauge(), { waiting: 0, deferred: 0 });
  clock.advance(3600_000);
  await w.t0.app.bounceNotices!.runNow();
  t.is(senderMx.messages.length, before + 1, 'once');
});

test.serial('a notice the sender MX refuses (550) is logged and dropped, never tried again', async (t) => {
  noticeReply = { code: 550, message: '5.1.1 <app@sender.dev>: User unknown' };
  const before = senderMx.messages.length;
  const rcptsBefore = noticeRcpts;
  const id = await submitBouncing('Refused notice', ['nobody-550@example.net']);
  t.is(noticeRcpts, rcptsBefore + 1);
  t.deepEqual(await rowsOf(id), []);
  const [line] = linesFor(id, /not sent \(refused, not retried\)/);
  t.regex(line?.msg ?? '', /^bounce notice for email em_\S+ to app@sender\.dev not sent \(refused, not retried\): .*550 5\.1\.1/);
  clock.advance(3600_000);
  await w.t0.app.bounceNotices!.runNow();
  t.is(noticeRcpts, rcptsBefore + 1, 'not tried again');
  t.is(senderMx.messages.length, before);
});

test.serial('a notice deferred past the give-up age (outbound.maxAgeHours) is logged and dropped', async (t) => {
  noticeReply = { code: 451, message: '4.3.0 Try again later' };
  const rcptsBefore = noticeRcpts;
  const id = await submitBouncing('Never taken', ['nobody-never@example.net']);
  // The backoff: 1, 5, 15, 30, 60 minutes; each retry deferred again.
  let tries = 1;
  for (const minutes of [1, 5, 15, 30]) {
    clock.advance(minutes * 60_000);
    await w.t0.app.bounceNotices!.runNow();
    tries++;
    t.is(noticeRcpts, rcptsBefore + tries, `retried after ${minutes} min`);
  }
  const firstFailure = clock.nowMs() - 51 * 60_000;
  clock.advance(60 * 60_000);
  await w.t0.app.bounceNotices!.runNow();
  tries++;
  const [row] = await rowsOf(id);
  t.is(Number(row!.next_attempt_at), firstFailure + 2 * 3600_000, 'the last retry falls on the give-up age (2 h here) from the first failure');
  clock.advance(9 * 60_000);
  await w.t0.app.bounceNotices!.runNow();
  t.is(noticeRcpts, rcptsBefore + tries + 1);
  t.deepEqual(await rowsOf(id), [], 'given up: the rows are gone');
  t.regex(linesFor(id, /not sent \(gave up/)[0]?.msg ?? '', /^bounce notice for email em_\S+ to app@sender\.dev not sent \(gave up after 2 hours\): .*451 4\.3\.0/);
  clock.advance(3600_000);
  await w.t0.app.bounceNotices!.runNow();
  t.is(noticeRcpts, rcptsBefore + tries + 1, 'not tried again');
});

test.serial('the rows carry the team; deleting the team (or its emails) leaves none behind', async (t) => {
  noticeReply = { code: 451, message: '4.3.0 Try again later' };
  const id = await submitBouncing('Team goes', ['nobody-team-1@example.net', 'nobody-team-2@example.net']);
  const rows = await rowsOf(id);
  t.is(rows.length, 2);
  t.true(rows.every((r) => Number(r.team_id) === w.t0.teamId));
  await w.t0.app.store.db.deleteFrom('teams').where('id', '=', w.t0.teamId).execute();
  t.deepEqual(await rowsOf(id), []);
  t.is(Number((await w.t0.app.store.db.selectFrom('bounce_notice_recipients').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n), 0);
});
