import test from 'ava';
import type { BusEvent } from '../../src/core/events.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { repositoriesOf } from '../helpers/repositories.js';
import { collectEvents, quotedHeaders, sendAndDeliver, waitForStatus } from './helpers/inbound-world.js';
import { fixture, smtpSend } from './helpers/smtp-client.js';

// Several reports about the same mail, one after the other (docs/inbound.md, "Several reports
// about one copy"): a copy bounces once, a recipient complains about an email once, a delay
// reported after the bounce is stale, and a suppression keeps its first reason. Each report is
// a new message (another Message-ID), never a retried one, which is recognised by its bytes.

let w: MailWorld;
let inboundPort: number;
let events: BusEvent[];
const COMPLAINTS = 'complaints@mx.posthorn.test';
let serial = 0;

test.before(async () => {
  // One transaction carries both recipients at grouped.test: its return path covers the two.
  w = await startMailWorld({ overrides: { outbound: { shaping: [{ domain: 'grouped.test', maxRecipientsPerTransaction: 2 }] } as never } });
  w.addRecipientDomain('grouped.test');
  inboundPort = w.t0.app.listeners.inbound!.port;
  events = collectEvents(w, ['email.bounced', 'email.complained', 'email.delivery_delayed']);
});
test.after.always(async () => {
  await w?.close();
});

/** The copy of `emailId` the sink got for `recipient`: its return path and bytes. */
function copyFor(emailId: string, recipient: string) {
  const m = w.sink.messages.find((x) => x.rcptTo.includes(recipient) && x.raw.toString().includes(emailId));
  if (!m) throw new Error(`no copy of ${emailId} for ${recipient}`);
  return m;
}

/** A report as a new message: its own Message-ID, so it is never taken for a retry of an earlier one. */
function fresh(raw: Buffer): Buffer {
  serial++;
  return Buffer.from(raw.toString().replace(/^(Message-I[dD]: <)/m, `$1seq${serial}.`));
}

async function bounce(copy: { mailFrom: string; raw: Buffer }, recipient: string, fixtureName = 'postfix-dsn-user-unknown.eml') {
  const dsn = fresh(fixture(fixtureName, { RETURN_PATH: copy.mailFrom, RECIPIENT: recipient, ORIGINAL: copy.raw.toString() }));
  const res = await smtpSend({ port: inboundPort, from: '', to: [copy.mailFrom], raw: dsn });
  if (!res.ok) throw new Error(res.response);
}

async function delay(copy: { mailFrom: string; raw: Buffer }, recipient: string, messageId: string) {
  const dsn = fresh(fixture('exchange-dsn-delayed.eml', { RETURN_PATH: copy.mailFrom, RECIPIENT: recipient, MESSAGE_ID: messageId, SUBJECT: 'x', ORIGINAL_HEADERS: quotedHeaders(copy.raw) }));
  const res = await smtpSend({ port: inboundPort, from: '', to: [copy.mailFrom], raw: dsn });
  if (!res.ok) throw new Error(res.response);
}

async function complain(copy: { mailFrom: string; raw: Buffer }, recipient: string, feedbackType = 'abuse') {
  const raw = fixture('yahoo-arf-abuse.eml', { REPORT_TO: COMPLAINTS, SUBJECT: 'x', RETURN_PATH: copy.mailFrom, RECIPIENT: recipient, ORIGINAL: copy.raw.toString() });
  const arf = fresh(Buffer.from(raw.toString().replace('Feedback-Type: abuse', `Feedback-Type: ${feedbackType}`)));
  const res = await smtpSend({ port: inboundPort, from: 'feedback@arf.mail.yahoo.com', to: [COMPLAINTS], raw: arf });
  if (!res.ok) throw new Error(res.response);
}

async function statuses(emailId: string): Promise<{ latest: string; events: { status: string; recipient: string }[] }> {
  const got = await w.t0.request('GET', `/v1/emails/${emailId}`);
  const reported = ['BOUNCED', 'COMPLAINED', 'DELIVERY_DELAYED'];
  return {
    latest: got.body.latestStatus,
    events: (got.body.emailEvents as { status: string; data?: { recipient?: string } }[]).filter((e) => reported.includes(e.status)).map((e) => ({ status: e.status, recipient: String(e.data?.recipient) })),
  };
}

const announced = (emailId: string) => events.filter((e) => e.data.id === emailId).map((e) => `${e.type} ${String(e.data.recipient)}`);

async function reputation(): Promise<{ hardBounced: number; complained: number }> {
  const res = await w.t0.request('GET', '/v1/analytics/reputation-metrics');
  return { hardBounced: res.body.hardBounced, complained: res.body.complained };
}

async function delivery(emailId: string, recipient: string) {
  const rows = await repositoriesOf(w.t0.app).deliveries.listForEmail(emailId);
  return rows.find((r) => r.recipient === recipient)!;
}

const suppression = async (address: string) => (await repositoriesOf(w.t0.app).suppressions.get(w.t0.teamId, address))?.reason;

test.serial('a bounce reported again for the same copy (a second DSN) bounces it once: one event, one webhook, one count', async (t) => {
  const email = await sendAndDeliver(w, { to: 'twice@example.net', subject: 'Bounced twice' });
  const copy = copyFor(email.id, 'twice@example.net');
  const before = await reputation();
  await bounce(copy, 'twice@example.net');
  const first = (await delivery(email.id, 'twice@example.net')).last_response;
  await bounce(copy, 'twice@example.net');
  const s = await statuses(email.id);
  t.deepEqual(s.events, [{ status: 'BOUNCED', recipient: 'twice@example.net' }]);
  t.is(s.latest, 'BOUNCED');
  t.deepEqual(announced(email.id), ['email.bounced twice@example.net']);
  t.deepEqual(await reputation(), { hardBounced: before.hardBounced + 1, complained: before.complained }, 'the recipient counts once');
  const row = await delivery(email.id, 'twice@example.net');
  t.is(row.state, 'bounced');
  t.is(row.last_response, first, 'the delivery keeps the bounce it had');
  t.is(await suppression('twice@example.net'), 'HARD_BOUNCE');
  t.is((await w.t0.app.inbound.reportsRepo.listForEmail(email.id)).length, 2, 'both reports are kept');
});

test.serial('two bounces for the same copy arriving at once bounce it once', async (t) => {
  const email = await sendAndDeliver(w, { to: 'race@example.net', subject: 'Bounced at once' });
  const copy = copyFor(email.id, 'race@example.net');
  const before = await reputation();
  await Promise.all([bounce(copy, 'race@example.net'), bounce(copy, 'race@example.net'), bounce(copy, 'race@example.net')]);
  t.deepEqual((await statuses(email.id)).events, [{ status: 'BOUNCED', recipient: 'race@example.net' }]);
  t.deepEqual(announced(email.id), ['email.bounced race@example.net']);
  t.is((await reputation()).hardBounced, before.hardBounced + 1);
  t.is((await w.t0.app.inbound.reportsRepo.listForEmail(email.id)).length, 3);
});

test.serial('a delay report, then a bounce for the same copy: DELIVERY_DELAYED, then BOUNCED, and the delivery ends bounced and suppressed', async (t) => {
  const email = await sendAndDeliver(w, { to: 'late@example.net', subject: 'Late then gone' });
  const copy = copyFor(email.id, 'late@example.net');
  await delay(copy, 'late@example.net', email.messageId);
  t.is((await statuses(email.id)).latest, 'DELIVERED', 'a delay ranks below DELIVERED');
  await delay(copy, 'late@example.net', email.messageId);
  await bounce(copy, 'late@example.net');
  const s = await statuses(email.id);
  t.deepEqual(
    s.events.map((e) => e.status),
    ['DELIVERY_DELAYED', 'DELIVERY_DELAYED', 'BOUNCED'],
    'each delay notice is news (a remote warns more than once); the bounce ends it',
  );
  t.is(s.latest, 'BOUNCED');
  t.deepEqual(announced(email.id), ['email.delivery_delayed late@example.net', 'email.delivery_delayed late@example.net', 'email.bounced late@example.net']);
  const row = await delivery(email.id, 'late@example.net');
  t.is(row.state, 'bounced');
  t.regex(row.last_response!, /^DSN .*5\.1\.1/);
  t.is(await suppression('late@example.net'), 'HARD_BOUNCE');
});

test.serial('a delay reported after the bounce changes nothing: the bounce is final', async (t) => {
  const email = await sendAndDeliver(w, { to: 'stale@example.net', subject: 'Stale delay' });
  const copy = copyFor(email.id, 'stale@example.net');
  await bounce(copy, 'stale@example.net');
  const bounced = (await delivery(email.id, 'stale@example.net')).last_response;
  await delay(copy, 'stale@example.net', email.messageId);
  t.deepEqual((await statuses(email.id)).events, [{ status: 'BOUNCED', recipient: 'stale@example.net' }]);
  t.deepEqual(announced(email.id), ['email.bounced stale@example.net']);
  const row = await delivery(email.id, 'stale@example.net');
  t.is(row.state, 'bounced');
  t.is(row.last_response, bounced, 'the delivery still says why it bounced');
  t.is((await w.t0.app.inbound.reportsRepo.listForEmail(email.id)).length, 2, 'the delay report is kept');
});

test.serial('a bounce, then a complaint from the same recipient: COMPLAINED is recorded, the suppression keeps its first reason', async (t) => {
  const email = await sendAndDeliver(w, { to: 'both@example.net', subject: 'Bounce then complaint' });
  const copy = copyFor(email.id, 'both@example.net');
  const before = await reputation();
  await bounce(copy, 'both@example.net');
  await complain(copy, 'both@example.net');
  const s = await statuses(email.id);
  t.deepEqual(s.events.map((e) => e.status), ['BOUNCED', 'COMPLAINED']);
  t.is(s.latest, 'COMPLAINED');
  t.deepEqual(announced(email.id), ['email.bounced both@example.net', 'email.complained both@example.net']);
  t.deepEqual(await reputation(), { hardBounced: before.hardBounced + 1, complained: before.complained + 1 });
  t.is((await delivery(email.id, 'both@example.net')).state, 'bounced');
  t.is(await suppression('both@example.net'), 'HARD_BOUNCE');
});

test.serial('a complaint, then a bounce: BOUNCED is recorded and the delivery bounced, the status stays COMPLAINED and the suppression COMPLAINT', async (t) => {
  const email = await sendAndDeliver(w, { to: 'other-way@example.net', subject: 'Complaint then bounce' });
  const copy = copyFor(email.id, 'other-way@example.net');
  await complain(copy, 'other-way@example.net');
  await bounce(copy, 'other-way@example.net');
  const s = await statuses(email.id);
  t.deepEqual(s.events.map((e) => e.status), ['COMPLAINED', 'BOUNCED']);
  t.is(s.latest, 'COMPLAINED', 'latestStatus only moves forward');
  t.deepEqual(announced(email.id), ['email.complained other-way@example.net', 'email.bounced other-way@example.net']);
  t.is((await delivery(email.id, 'other-way@example.net')).state, 'bounced');
  t.is(await suppression('other-way@example.net'), 'COMPLAINT');
});

test.serial('a recipient who complains twice about one email (fraud after abuse) complains once', async (t) => {
  const email = await sendAndDeliver(w, { to: 'angry@example.net', subject: 'Complained twice' });
  const copy = copyFor(email.id, 'angry@example.net');
  const before = await reputation();
  await complain(copy, 'angry@example.net');
  await complain(copy, 'angry@example.net', 'fraud');
  await Promise.all([complain(copy, 'angry@example.net'), complain(copy, 'angry@example.net')]);
  t.deepEqual((await statuses(email.id)).events, [{ status: 'COMPLAINED', recipient: 'angry@example.net' }]);
  t.deepEqual(announced(email.id), ['email.complained angry@example.net']);
  t.is((await reputation()).complained, before.complained + 1, 'the recipient counts once');
  t.is(await suppression('angry@example.net'), 'COMPLAINT');
  t.is((await w.t0.app.inbound.reportsRepo.listForEmail(email.id)).length, 4, 'every report is kept');
});

test.serial('a DSN for a copy the remote refused during delivery records no second bounce', async (t) => {
  let returnPath = '';
  w.sink.setBehaviour({
    onMailFrom: (address) => ((returnPath = address), undefined),
    onRcpt: (address) => (address === 'refused@example.net' ? { code: 550, message: '5.1.1 User unknown' } : undefined),
  });
  try {
    const res = await w.t0.request('POST', '/v1/emails', { body: { from: `hello@${w.domain.name}`, to: 'refused@example.net', subject: 'Refused', text: 'x' } });
    const id = res.body.emailId as string;
    await waitForStatus(w, id, 'BOUNCED');
    const before = await reputation();
    const original = Buffer.from(`Return-Path: <${returnPath}>\r\nX-Posthorn-Email-ID: ${id}\r\nTo: refused@example.net\r\nSubject: Refused\r\n\r\nx\r\n`);
    await bounce({ mailFrom: returnPath, raw: original }, 'refused@example.net');
    t.deepEqual((await statuses(id)).events, [{ status: 'BOUNCED', recipient: 'refused@example.net' }]);
    t.deepEqual(announced(id), ['email.bounced refused@example.net']);
    t.is((await reputation()).hardBounced, before.hardBounced);
    t.is((await w.t0.app.inbound.reportsRepo.listForEmail(id)).length, 1);
  } finally {
    w.sink.setBehaviour({ onMailFrom: undefined, onRcpt: undefined });
  }
});

test.serial('reports for two copies of one email, interleaved, each change their own copy once', async (t) => {
  const email = await sendAndDeliver(w, { to: ['left@example.net'], cc: ['right@example.org'], subject: 'Two copies' });
  const left = copyFor(email.id, 'left@example.net');
  const right = copyFor(email.id, 'right@example.org');
  await delay(right, 'right@example.org', email.messageId);
  await bounce(left, 'left@example.net');
  await complain(right, 'right@example.org');
  await delay(left, 'left@example.net', email.messageId);
  await bounce(right, 'right@example.org');
  await bounce(left, 'left@example.net');
  await complain(right, 'right@example.org');
  const s = await statuses(email.id);
  t.deepEqual(
    s.events.map((e) => `${e.status} ${e.recipient}`),
    ['DELIVERY_DELAYED right@example.org', 'BOUNCED left@example.net', 'COMPLAINED right@example.org', 'BOUNCED right@example.org'],
  );
  t.is(s.latest, 'COMPLAINED');
  t.is((await delivery(email.id, 'left@example.net')).state, 'bounced');
  t.is((await delivery(email.id, 'right@example.org')).state, 'bounced');
  t.is(await suppression('left@example.net'), 'HARD_BOUNCE');
  t.is(await suppression('right@example.org'), 'COMPLAINT');
});

test.serial('DSNs naming the same two copies in opposite orders, at once, are all taken and bounce each copy once', async (t) => {
  const email = await sendAndDeliver(w, { to: ['one@grouped.test', 'two@grouped.test'], subject: 'Grouped' });
  const copy = copyFor(email.id, 'one@grouped.test');
  t.deepEqual(copy.rcptTo.sort(), ['one@grouped.test', 'two@grouped.test'], 'one transaction for both');
  const both = (first: string, second: string) => {
    const dsn = fixture('postfix-dsn-user-unknown.eml', { RETURN_PATH: copy.mailFrom, RECIPIENT: first, ORIGINAL: copy.raw.toString() }).toString();
    const block = `Final-Recipient: rfc822; ${second}\r\nAction: failed\r\nStatus: 5.1.1\r\nDiagnostic-Code: smtp; 550 5.1.1 <${second}>: User unknown\r\n\r\n`;
    // a second recipient block after the first one
    return fresh(Buffer.from(dsn.replace(/(User unknown in virtual mailbox table\r\n\r\n)/, `$1${block}`)));
  };
  const sends = Array.from({ length: 6 }, (_, i) => smtpSend({ port: inboundPort, from: '', to: [copy.mailFrom], raw: i % 2 ? both('one@grouped.test', 'two@grouped.test') : both('two@grouped.test', 'one@grouped.test') }));
  const results = await Promise.all(sends);
  t.deepEqual(results.map((r) => r.response.slice(0, 3)), Array(6).fill('250'), 'no report failed (a deadlock between two would answer 451)');
  t.deepEqual((await statuses(email.id)).events.map((e) => `${e.status} ${e.recipient}`).sort(), ['BOUNCED one@grouped.test', 'BOUNCED two@grouped.test']);
  t.is((await delivery(email.id, 'one@grouped.test')).state, 'bounced');
  t.is((await delivery(email.id, 'two@grouped.test')).state, 'bounced');
});
