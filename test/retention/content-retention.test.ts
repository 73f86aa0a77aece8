import test from 'ava';
import MailComposer from 'nodemailer/lib/mail-composer';
import { ManualClock } from '../../src/lib/clock.js';
import { ConsoleClient, consoleUser } from '../console/helpers/console-client.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { sendAndDeliver, waitForStatus } from '../inbound/helpers/inbound-world.js';
import { fixture, smtpSend } from '../inbound/helpers/smtp-client.js';

// Content retention (retention.contentDays) end to end: the daily job empties old sent emails
// of their text, HTML and attachments, received emails of their message, and deletes sandbox
// captures, and never touches mail that may still be sent (scheduled, or a delivery queued).

const HOUR = 3_600_000;
const clock = new ManualClock(Date.UTC(2026, 10, 20, 9, 0, 0));
let w: MailWorld;

test.before(async () => {
  // One recipient always defers (451): its email stays queued past the retention age (the
  // give-up age is 72 hours).
  w = await startMailWorld({
    clock,
    overrides: { retention: { contentDays: 1 } },
    sink: { onRcpt: (a) => (a.startsWith('later@') ? { code: 451, message: '4.3.0 try again later' } : undefined) },
  });
});
test.after.always(async () => {
  await w?.close();
});

const content = { text: 'The text part', html: '<p>The HTML part</p>', attachments: [{ filename: 'note.txt', content: Buffer.from('attached').toString('base64') }] };

async function send(to: string, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await w.t0.request('POST', '/v1/emails', { body: { from: `Sender <hello@${w.domain.name}>`, to, subject: `To ${to}`, ...content, ...extra } });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  return res.body.emailId;
}
const email = async (id: string) => (await w.t0.request('GET', `/v1/emails/${id}`)).body;
// Named by the test clock: on PostgreSQL a run is claimed per scheduled second, and these runs
// are seconds apart only on that clock.
const runJob = async () => {
  if (!(await w.t0.app.runCronJob('purge-old-content', clock.now()))) throw new Error('no purge-old-content job');
};
const compose = (opts: Record<string, unknown>) =>
  new Promise<Buffer>((resolve, reject) => new MailComposer(opts).compile().build((err, msg) => (err ? reject(err) : resolve(msg))));

test.serial('old delivered mail loses its content; scheduled, still-queued and younger mail keep theirs; a later run finishes what was kept', async (t) => {
  // In this order, a second apart: ids begin with their time, so the emails that must be kept
  // come before the one emptied, and the next run's scan starts past them all: it must find
  // them again among those it kept.
  const scheduled = await send('future@example.net', { scheduledAt: new Date(clock.nowMs() + 30 * 24 * HOUR).toISOString() });
  clock.advance(1000);
  const deferred = await send('later@example.net');
  clock.advance(1000);
  const delivered = await send('done@example.net');
  await w.settle();
  t.is((await email(delivered)).latestStatus, 'DELIVERED');
  t.is((await email(scheduled)).latestStatus, 'SCHEDULED');
  t.is((await email(deferred)).latestStatus, 'DELIVERY_DELAYED');

  clock.advance(2 * HOUR);
  const younger = await send('young@example.net');
  await w.settle();
  // The first three are 25 hours old at the run, the younger one 23.
  clock.advance(23 * HOUR - 2000);
  await runJob();

  const gone = await email(delivered);
  t.is(gone.latestStatus, 'DELIVERED');
  t.is(gone.html, null);
  t.is(gone.text, null);
  t.is(gone.subject, 'To done@example.net', 'the record stays: subject, addresses, events');
  t.is(gone.to, 'done@example.net');
  t.true(gone.emailEvents.some((e: any) => e.status === 'DELIVERED'));
  const row = await w.t0.app.store.db.selectFrom('emails').select(['attachments_json', 'text_body', 'html_body']).where('id', '=', delivered).executeTakeFirstOrThrow();
  t.deepEqual(row, { attachments_json: null, text_body: null, html_body: null });
  // The console says why the message is missing.
  await consoleUser(w.t0.app, 'reader@example.com', w.t0.teamId);
  const browser = new ConsoleClient(w.t0.baseUrl);
  await browser.signIn('reader@example.com');
  const page = await browser.get(`/console/emails/${delivered}`);
  t.is(page.status, 200);
  t.regex(page.text, /content of this email is no longer kept/);
  t.notRegex((await browser.get(`/console/emails/${deferred}`)).text, /no longer kept/);
  for (const kept of [scheduled, deferred, younger]) {
    const e = await email(kept);
    t.is(e.html, content.html, `${e.to} keeps its HTML`);
    t.is(e.text, content.text, `${e.to} keeps its text`);
  }
  const keptRow = await w.t0.app.store.db.selectFrom('emails').select('attachments_json').where('id', '=', deferred).executeTakeFirstOrThrow();
  t.truthy(keptRow.attachments_json, 'a queued email keeps its attachments: they are sent again');

  // Once nothing can send them any more, the next run empties them, though its scan of new
  // mail starts past them; and the kept list does not grow with what was emptied.
  t.is((await w.t0.request('POST', `/v1/emails/${scheduled}/cancel`)).status, 200);
  clock.advance(24 * HOUR);
  await runJob();
  t.is((await email(scheduled)).html, null, 'cancelled: emptied');
  t.is((await email(younger)).html, null, 'now past the age');
  t.is((await email(deferred)).html, content.html, 'still queued: kept');
  const kept = await w.t0.app.store.db.selectFrom('retention_kept').select('email_id').execute();
  t.deepEqual(kept.map((r) => r.email_id), [deferred]);
});

test.serial('received mail loses its message, text, HTML and attachments after the retention age; its record stays', async (t) => {
  const inbox = await addVerifiedDomain(w.t0, 'inbox-retention.dev');
  t.is((await w.t0.request('PATCH', `/v1/domains/${inbox.id}`, { body: { receiving: true } })).status, 200);
  const message = await compose({ from: 'news@partner.example', to: 'support@inbox-retention.dev', subject: 'Kept for a day', text: 'Hello', html: '<p>Hello</p>', attachments: [{ filename: 'a.txt', content: 'attached' }] });
  const res = await smtpSend({ port: w.t0.app.listeners.inbound!.port, from: 'news@partner.example', to: ['support@inbox-retention.dev'], raw: message });
  t.true(res.ok, res.response);
  const id = /queued as (re_\S+)/.exec(res.response)![1]!;
  const before = (await w.t0.request('GET', `/v1/receivedEmails/${id}`)).body;
  t.is(before.text?.trim(), 'Hello');
  t.is(before.attachments.length, 1);
  t.is((await w.t0.request('GET', `/v1/receivedEmails/${id}/raw`)).status, 200);
  await consoleUser(w.t0.app, 'inbox-reader@example.com', w.t0.teamId);
  const browser = new ConsoleClient(w.t0.baseUrl);
  await browser.signIn('inbox-reader@example.com');
  const pageBefore = (await browser.get(`/console/received/${id}`)).text;
  t.regex(pageBefore, /Download \.eml/);
  t.notRegex(pageBefore, /no longer kept/);

  clock.advance(12 * HOUR);
  await runJob();
  t.is((await w.t0.request('GET', `/v1/receivedEmails/${id}/raw`)).status, 200, 'younger than a day: kept');

  clock.advance(13 * HOUR);
  await runJob();
  const after = await w.t0.request('GET', `/v1/receivedEmails/${id}`);
  t.is(after.status, 200);
  t.is(after.body.subject, 'Kept for a day');
  t.is(after.body.from, 'news@partner.example');
  t.is(after.body.text, null);
  t.is(after.body.html, null);
  t.deepEqual(after.body.attachments, []);
  t.is(after.body.attachmentCount, 1, 'the count as received');
  const raw = await w.t0.request('GET', `/v1/receivedEmails/${id}/raw`);
  t.is(raw.status, 404);
  t.is(raw.body.error.code, 'NOT_FOUND');
  t.regex(raw.body.error.message, /retention\.contentDays/);
  // The console offers no download that would only answer 404, and says why (a day later: a
  // new session).
  await browser.signIn('inbox-reader@example.com');
  const page = await browser.get(`/console/received/${id}`);
  t.is(page.status, 200);
  t.notRegex(page.text, /Download \.eml/);
  t.regex(page.text, /content is no longer kept/);
});

test.serial('a bounce report keeps its summary but loses the message it stored (a DSN quotes the whole original)', async (t) => {
  const sent = await sendAndDeliver(w, { to: 'ghost@example.net', subject: 'Bounces later' });
  const dsn = fixture('postfix-dsn-user-unknown.eml', { RETURN_PATH: sent.returnPath, RECIPIENT: 'ghost@example.net', ORIGINAL: sent.raw.toString() });
  t.true((await smtpSend({ port: w.t0.app.listeners.inbound!.port, from: '', to: [sent.returnPath], raw: dsn })).ok);
  await waitForStatus(w, sent.id, 'BOUNCED');
  const report = () => w.t0.app.store.db.selectFrom('inbound_reports').select(['raw', 'summary_json', 'email_id']).where('email_id', '=', sent.id).executeTakeFirstOrThrow();
  const stored = await report();
  t.true(stored.raw.length > sent.raw.length, 'the DSN with the original quoted');

  clock.advance(12 * HOUR);
  await runJob();
  t.true((await report()).raw.length > 0, 'younger than a day: kept');
  clock.advance(13 * HOUR);
  await runJob();
  const after = await report();
  t.is(after.raw.length, 0);
  t.is(after.summary_json, stored.summary_json, 'what the report said stays');
  t.is((await email(sent.id)).latestStatus, 'BOUNCED');
});

test.serial('a queued email found without content is not sent as an empty message', async (t) => {
  // The purge never empties an email with a delivery queued; this is the engine's own guard,
  // should anything else ever leave one so (an operator's SQL, a future path).
  const id = await send('guarded@example.net', { scheduledAt: new Date(clock.nowMs() + HOUR).toISOString() });
  await w.t0.app.store.db.updateTable('emails').set({ text_body: null, html_body: null, attachments_json: null }).where('id', '=', id).execute();
  const before = w.sink.messages.length;
  clock.advance(HOUR + 1000);
  await w.settle();
  t.is(w.sink.messages.length, before, 'nothing went out');
  const d = await w.t0.app.store.db.selectFrom('deliveries').select(['state', 'last_response']).where('email_id', '=', id).executeTakeFirstOrThrow();
  t.is(d.state, 'queued', 'deferred, not delivered');
  t.regex(d.last_response ?? '', /no content/);
});

test.serial('emails with the random ids of before time-ordered ids are emptied by their age: not too early, not never', async (t) => {
  // A store from before ids began with their time holds ids of 21 random characters after em_:
  // in key order such an id sits anywhere, before the cutoff's prefix or past today's. Its
  // first run is the upgrade's.
  const upgradeClock = new ManualClock(Date.UTC(2026, 10, 27, 9, 0, 0));
  const u = await startMailWorld({ clock: upgradeClock, overrides: { retention: { contentDays: 1 } } });
  t.teardown(() => u.close());
  const res = await u.t0.request('POST', '/v1/emails', { body: { from: `hello@${u.domain.name}`, to: 'model@example.net', subject: 'Model', ...content } });
  t.is(res.status, 200, JSON.stringify(res.body));
  await u.settle();
  const db = u.t0.app.store.db;
  const model = await db.selectFrom('emails').selectAll().where('id', '=', res.body.emailId).executeTakeFirstOrThrow();
  const legacy = async (id: string, ageMs: number) => {
    const at = new Date(upgradeClock.nowMs() - ageMs).toISOString();
    await db.insertInto('emails').values({ ...model, id, message_id: `<${id}@legacy.example>`, created_at: at, updated_at: at }).execute();
    return id;
  };
  const html = async (id: string) => (await u.t0.request('GET', `/v1/emails/${id}`)).body.html;
  const young = await legacy(`em_00${'Y'.repeat(19)}`, 2 * HOUR);
  const old = await legacy(`em_Z${'O'.repeat(20)}`, 3 * 24 * HOUR);
  const run = async () => t.true(await u.t0.app.runCronJob('purge-old-content', upgradeClock.now()));
  await run();
  t.is(await html(young), content.html, 'two hours old: kept');
  t.is(await html(old), null, 'three days old: emptied');
  upgradeClock.advance(23 * HOUR);
  await run();
  t.is(await html(young), null, 'a day old at the next run: emptied');
  t.deepEqual(await db.selectFrom('retention_kept').select('email_id').execute(), [], 'nothing left to try again');
});

test.serial('with no retention set (the default) there is no such job and content is kept', async (t) => {
  await w.restart({ retention: { contentDays: 0 } });
  t.false(await w.t0.app.runCronJob('purge-old-content'));
  const id = await send('done@example.net');
  await w.settle();
  clock.advance(400 * 24 * HOUR);
  t.is((await email(id)).html, content.html);
});

test.serial('sandbox captures past the retention age are deleted; younger ones stay', async (t) => {
  const sandboxClock = new ManualClock(Date.UTC(2026, 10, 20, 9, 0, 0));
  const s = await startMailWorld({ clock: sandboxClock, overrides: { sandbox: true, retention: { contentDays: 1 } } });
  t.teardown(() => s.close());
  const capture = async (to: string) => {
    const res = await s.t0.request('POST', '/v1/emails', { body: { from: `hello@${s.domain.name}`, to, subject: to, text: 'captured' } });
    t.is(res.status, 200, JSON.stringify(res.body));
    await s.settle();
  };
  await capture('old@example.net');
  sandboxClock.advance(20 * HOUR);
  await capture('new@example.net');
  const before = (await s.t0.request('GET', '/v1/sandbox/messages')).body.messages;
  t.is(before.length, 2);
  const old = before.find((m: any) => m.subject === 'old@example.net');

  sandboxClock.advance(5 * HOUR);
  t.true(await s.t0.app.runCronJob('purge-old-content', sandboxClock.now()));
  const after = (await s.t0.request('GET', '/v1/sandbox/messages')).body;
  t.is(after.total, 1);
  t.is(after.messages[0].subject, 'new@example.net');
  t.is((await s.t0.request('GET', `/v1/sandbox/messages/${old.id}`)).status, 404);
  t.is((await s.t0.app.store.db.selectFrom('sandbox_message_raw').select('sandbox_message_id').execute()).length, 1, 'its raw bytes went with it');
});
