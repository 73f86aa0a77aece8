import { repositoriesOf } from '../helpers/repositories.js';
import test from 'ava';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { fixture, smtpSend } from './helpers/smtp-client.js';
import { sendAndDeliver } from './helpers/inbound-world.js';

// Reports are unauthenticated: whoever got a copy of an email knows its return path, its
// Message-ID and the other To/Cc addresses. A co-recipient's forged DSN or ARF report must not
// bounce, complain about or suppress another recipient its evidence does not tie it to.

let w: MailWorld;
let inboundPort: number;
const COMPLAINTS = 'complaints@mx.posthorn.test';

test.before(async () => {
  w = await startMailWorld();
  inboundPort = w.t0.app.listeners.inbound!.port;
});
test.after.always(async () => {
  await w?.close();
});

/** An email to a victim and an attacker at another domain, and the copy the attacker got. */
async function sharedEmail(victim: string, attacker: string) {
  const email = await sendAndDeliver(w, { to: victim, cc: attacker, subject: 'Shared' });
  const copy = w.sink.messages.find((m) => m.rcptTo.includes(attacker) && m.raw.toString().includes(email.id))!;
  return { email, copy };
}

async function state(emailId: string, recipient: string) {
  const rows = await repositoriesOf(w.t0.app).deliveries.listForEmail(emailId);
  return rows.find((r) => r.recipient === recipient)!.state;
}

test.serial('a co-recipient\'s DSN to its own copy\'s return path cannot bounce or suppress a recipient at another domain', async (t) => {
  const { email, copy } = await sharedEmail('victim1@example.org', 'mallory1@example.net');
  const dsn = fixture('postfix-dsn-user-unknown.eml', { RETURN_PATH: copy.mailFrom, RECIPIENT: 'victim1@example.org', ORIGINAL: copy.raw.toString() });
  const res = await smtpSend({ port: inboundPort, from: '', to: [copy.mailFrom], raw: dsn });
  t.true(res.ok, res.response);
  t.is(await state(email.id, 'victim1@example.org'), 'delivered');
  t.is(await repositoriesOf(w.t0.app).suppressions.get(w.t0.teamId, 'victim1@example.org'), undefined);
  const got = await w.t0.request('GET', `/v1/emails/${email.id}`);
  t.falsy(got.body.emailEvents.find((e: any) => e.status === 'BOUNCED'), 'no BOUNCED event for a recipient the report cannot prove');
});

test.serial('a co-recipient\'s forged ARF report at the complaint address cannot suppress a recipient at another domain', async (t) => {
  const { email, copy } = await sharedEmail('victim2@example.org', 'mallory2@example.net');
  const arf = fixture('yahoo-arf-abuse.eml', {
    REPORT_TO: COMPLAINTS,
    SUBJECT: email.subject,
    RETURN_PATH: copy.mailFrom,
    RECIPIENT: 'victim2@example.org',
    ORIGINAL: copy.raw.toString(),
  });
  const res = await smtpSend({ port: inboundPort, from: 'feedback@arf.mail.yahoo.com', to: [COMPLAINTS], raw: arf });
  t.true(res.ok, res.response);
  t.is(await repositoriesOf(w.t0.app).suppressions.get(w.t0.teamId, 'victim2@example.org'), undefined);
  const got = await w.t0.request('GET', `/v1/emails/${email.id}`);
  t.falsy(got.body.emailEvents.find((e: any) => e.status === 'COMPLAINED'), 'no COMPLAINED event either');
});

test.serial('a forged ARF report with the Return-Path removed, linked only by Message-ID, cannot suppress a recipient of a multi-domain email', async (t) => {
  const { email, copy } = await sharedEmail('victim3@example.org', 'mallory3@example.net');
  const original = copy.raw.toString().replace(/^X-Posthorn-Email-ID: .*\r\n/im, '');
  const arf = fixture('yahoo-arf-abuse.eml', {
    REPORT_TO: COMPLAINTS,
    SUBJECT: email.subject,
    RETURN_PATH: 'someone@example.com',
    RECIPIENT: 'victim3@example.org',
    ORIGINAL: original,
  });
  const res = await smtpSend({ port: inboundPort, from: 'feedback@arf.mail.yahoo.com', to: [COMPLAINTS], raw: arf });
  t.true(res.ok, res.response);
  t.is(await repositoriesOf(w.t0.app).suppressions.get(w.t0.teamId, 'victim3@example.org'), undefined);
});

test.serial('a real bounce from the victim\'s own domain still bounces and suppresses it', async (t) => {
  const { email } = await sharedEmail('gone@example.org', 'colleague@example.net');
  const mine = w.sink.messages.find((m) => m.rcptTo.includes('gone@example.org') && m.raw.toString().includes(email.id))!;
  const dsn = fixture('postfix-dsn-user-unknown.eml', { RETURN_PATH: mine.mailFrom, RECIPIENT: 'gone@example.org', ORIGINAL: mine.raw.toString() });
  t.true((await smtpSend({ port: inboundPort, from: '', to: [mine.mailFrom], raw: dsn })).ok);
  t.is(await state(email.id, 'gone@example.org'), 'bounced');
  t.is(await state(email.id, 'colleague@example.net'), 'delivered');
  t.is((await repositoriesOf(w.t0.app).suppressions.get(w.t0.teamId, 'gone@example.org'))?.reason, 'HARD_BOUNCE');
});

test.serial('a return path with a made-up tag is refused at RCPT; an untagged one (mail sent before tags) acts only for a one-recipient email', async (t) => {
  const { email, copy } = await sharedEmail('victim4@example.org', 'mallory4@example.net');
  const forged = copy.mailFrom.replace(/_[0-9a-f]{12}@/, '_0123456789ab@');
  t.not(forged, copy.mailFrom);
  const refused = await smtpSend({ port: inboundPort, from: '', to: [forged], raw: 'Subject: x\r\n\r\nx\r\n' });
  t.false(refused.ok);
  t.regex(refused.rcptErrors[0] ?? refused.response, /^550 5\.1\.1 /);

  const untagged = copy.mailFrom.replace(/_[0-9a-f]{12}@/, '@');
  const dsn = fixture('postfix-dsn-user-unknown.eml', { RETURN_PATH: untagged, RECIPIENT: 'victim4@example.org', ORIGINAL: copy.raw.toString() });
  t.true((await smtpSend({ port: inboundPort, from: '', to: [untagged], raw: dsn })).ok, 'accepted and kept');
  t.is(await state(email.id, 'victim4@example.org'), 'delivered', 'an email-wide token does not cover a two-recipient email');
  t.is(await repositoriesOf(w.t0.app).suppressions.get(w.t0.teamId, 'victim4@example.org'), undefined);

  const single = await sendAndDeliver(w, { to: 'old-style@example.org', subject: 'One recipient' });
  const plain = single.returnPath.replace(/_[0-9a-f]{12}@/, '@');
  const legacy = fixture('postfix-dsn-user-unknown.eml', { RETURN_PATH: plain, RECIPIENT: 'old-style@example.org', ORIGINAL: single.raw.toString() });
  t.true((await smtpSend({ port: inboundPort, from: '', to: [plain], raw: legacy })).ok);
  t.is(await state(single.id, 'old-style@example.org'), 'bounced');
});
