import { repositoriesOf } from '../helpers/repositories.js';
import test from 'ava';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { fixture, smtpSend } from './helpers/smtp-client.js';
import { collectEvents, sendAndDeliver } from './helpers/inbound-world.js';
import type { BusEvent } from '../../src/core/events.js';

// Feedback-loop complaints (RFC 5965 ARF) from mailbox providers, at the complaint address
// (complaints@<hostname> by default) and at a return path.

let w: MailWorld;
let inboundPort: number;
let events: BusEvent[];
const COMPLAINTS = 'complaints@mx.posthorn.test';

test.before(async () => {
  w = await startMailWorld();
  inboundPort = w.t0.app.listeners.inbound!.port;
  events = collectEvents(w, ['email.complained']);
});
test.after.always(async () => {
  await w?.close();
});

test.serial('a Yahoo ARF abuse report at the complaint address marks COMPLAINED and suppresses the recipient', async (t) => {
  const email = await sendAndDeliver(w, { to: ['annoyed@example.net', 'happy@example.net'], subject: 'Weekly deals' });
  // The complainer's copy: its own transaction, its own return path.
  const copy = w.sink.messages.find((m) => m.rcptTo.includes('annoyed@example.net') && m.raw.toString().includes(email.id))!;
  const arf = fixture('yahoo-arf-abuse.eml', {
    REPORT_TO: COMPLAINTS,
    SUBJECT: email.subject,
    RETURN_PATH: copy.mailFrom,
    RECIPIENT: 'annoyed@example.net',
    ORIGINAL: copy.raw.toString(),
  });
  const res = await smtpSend({ port: inboundPort, from: 'feedback@arf.mail.yahoo.com', to: [COMPLAINTS], raw: arf });
  t.true(res.ok, res.response);

  const got = await w.t0.request('GET', `/v1/emails/${email.id}`);
  t.is(got.body.latestStatus, 'COMPLAINED');
  const complained = got.body.emailEvents.find((e: any) => e.status === 'COMPLAINED');
  t.is(complained.data.recipient, 'annoyed@example.net');
  t.is(complained.data.source, 'arf');
  t.is(complained.data.complaint.feedbackType, 'abuse');
  t.is(complained.data.complaint.userAgent, 'Yahoo!-Mail-Feedback/2.0');
  t.is((await repositoriesOf(w.t0.app).suppressions.get(w.t0.teamId, 'annoyed@example.net'))?.reason, 'COMPLAINT');
  t.is(await repositoriesOf(w.t0.app).suppressions.get(w.t0.teamId, 'happy@example.net'), undefined, 'only the complainer is suppressed');
  const announced = events.find((e) => e.data.id === email.id);
  t.is(announced?.type, 'email.complained');
  const [report] = await w.t0.app.inbound.reportsRepo.listForEmail(email.id);
  t.is(report!.kind, 'complaint');
  t.is(report!.linked_by, 'report', 'linked through Original-Mail-From');

  // The next send to the complainer is suppressed, the other recipient still gets mail.
  const again = await w.t0.request('POST', '/v1/emails', { body: { from: `hello@${w.domain.name}`, to: 'annoyed@example.net', subject: 'x', text: 'x' } });
  const next = await w.t0.request('GET', `/v1/emails/${again.body.emailId}`);
  t.is(next.body.latestStatus, 'SUPPRESSED');
});

test.serial('an AOL report with the recipient redacted links by our header and names the only recipient', async (t) => {
  const email = await sendAndDeliver(w, { to: 'someone@example.org', subject: 'Hello from us' });
  const redacted = email.raw.toString().replace(/^To: .*$/m, 'To: redacted@aol.com');
  const arf = fixture('aol-arf-redacted.eml', { REPORT_TO: COMPLAINTS, MESSAGE_ID: email.messageId, ORIGINAL_REDACTED: redacted });
  const res = await smtpSend({ port: inboundPort, from: 'scomp@aol.net', to: [COMPLAINTS], raw: arf });
  t.true(res.ok, res.response);
  const got = await w.t0.request('GET', `/v1/emails/${email.id}`);
  t.is(got.body.latestStatus, 'COMPLAINED');
  const complained = got.body.emailEvents.find((e: any) => e.status === 'COMPLAINED');
  t.is(complained.data.recipient, 'someone@example.org');
  t.is(complained.data.complaint.sourceIp, '203.0.113.25');
  t.is((await repositoriesOf(w.t0.app).suppressions.get(w.t0.teamId, 'someone@example.org'))?.reason, 'COMPLAINT');
  const [report] = await w.t0.app.inbound.reportsRepo.listForEmail(email.id);
  t.is(report!.linked_by, 'header', 'no VERP in the report: X-Posthorn-Email-ID of the returned message');
});

test.serial('an ARF report sent to the return path is a complaint too', async (t) => {
  const email = await sendAndDeliver(w, { to: 'viaverp@example.net', subject: 'Return path report' });
  const arf = fixture('yahoo-arf-abuse.eml', {
    REPORT_TO: email.returnPath,
    SUBJECT: email.subject,
    RETURN_PATH: email.returnPath,
    RECIPIENT: 'viaverp@example.net',
    ORIGINAL: email.raw.toString(),
  });
  t.true((await smtpSend({ port: inboundPort, from: 'feedback@arf.mail.yahoo.com', to: [email.returnPath], raw: arf })).ok);
  const got = await w.t0.request('GET', `/v1/emails/${email.id}`);
  t.is(got.body.latestStatus, 'COMPLAINED');
  const [report] = await w.t0.app.inbound.reportsRepo.listForEmail(email.id);
  t.is(report!.linked_by, 'verp');
});

/** Yahoo's abuse report about `email`'s copy to `recipient`, sent to the complaint address. */
function arfAbout(email: { subject: string; returnPath: string; raw: Buffer }, recipient: string): Buffer {
  return fixture('yahoo-arf-abuse.eml', { REPORT_TO: COMPLAINTS, SUBJECT: email.subject, RETURN_PATH: email.returnPath, RECIPIENT: recipient, ORIGINAL: email.raw.toString() });
}

test.serial('a "not-spam" feedback report is kept but is not a complaint', async (t) => {
  const email = await sendAndDeliver(w, { to: 'fan@example.net', subject: 'You will like this' });
  const raw = arfAbout(email, 'fan@example.net');
  const notSpam = Buffer.from(raw.toString().replace('Feedback-Type: abuse', 'Feedback-Type: not-spam'));
  t.true((await smtpSend({ port: inboundPort, from: 'feedback@arf.mail.yahoo.com', to: [COMPLAINTS], raw: notSpam })).ok);
  const got = await w.t0.request('GET', `/v1/emails/${email.id}`);
  t.is(got.body.latestStatus, 'DELIVERED');
  t.is(await repositoriesOf(w.t0.app).suppressions.get(w.t0.teamId, 'fan@example.net'), undefined);
  const [report] = await w.t0.app.inbound.reportsRepo.listForEmail(email.id);
  t.is(report!.kind, 'feedback');
});

test.serial('an "auth-failure" report (RFC 6591) is about our authentication, not the recipient: kept, no event, no suppression', async (t) => {
  const email = await sendAndDeliver(w, { to: 'checked@example.net', subject: 'DKIM check' });
  const raw = arfAbout(email, 'checked@example.net');
  const authFailure = Buffer.from(raw.toString().replace('Feedback-Type: abuse', 'Feedback-Type: Auth-Failure\r\nAuth-Failure: dkim\r\nDKIM-Domain: sender.dev\r\nDKIM-Selector: posthorn'));
  const before = events.length;
  t.true((await smtpSend({ port: inboundPort, from: 'feedback@arf.mail.yahoo.com', to: [COMPLAINTS], raw: authFailure })).ok);
  const got = await w.t0.request('GET', `/v1/emails/${email.id}`);
  t.is(got.body.latestStatus, 'DELIVERED');
  t.false(got.body.emailEvents.some((e: any) => e.status === 'COMPLAINED'));
  t.is(events.length, before, 'no email.complained webhook');
  t.is(await repositoriesOf(w.t0.app).suppressions.get(w.t0.teamId, 'checked@example.net'), undefined);
  const [report] = await w.t0.app.inbound.reportsRepo.listForEmail(email.id);
  t.is(report!.kind, 'feedback');
});

test.serial('anything else at the complaint address is accepted and kept as unparsed, never crashing', async (t) => {
  const human = 'From: Someone <someone@example.com>\r\nTo: complaints@mx.posthorn.test\r\nSubject: please stop\r\n\r\nPlease stop emailing me.\r\n';
  const res = await smtpSend({ port: inboundPort, from: 'someone@example.com', to: [COMPLAINTS.toUpperCase()], raw: human });
  t.true(res.ok, res.response);
  const [latest] = await w.t0.app.inbound.reportsRepo.latest(1);
  t.is(latest!.kind, 'unparsed');
  t.is(latest!.email_id, null);
});

test.serial('a DSN sent to the complaint address is kept but changes nothing (DSNs go to the return path)', async (t) => {
  const email = await sendAndDeliver(w, { to: 'target@example.net', subject: 'Not a bounce channel' });
  const dsn = fixture('postfix-dsn-user-unknown.eml', { RETURN_PATH: COMPLAINTS, RECIPIENT: 'target@example.net', ORIGINAL: email.raw.toString() });
  t.true((await smtpSend({ port: inboundPort, from: '', to: [COMPLAINTS], raw: dsn })).ok);
  const got = await w.t0.request('GET', `/v1/emails/${email.id}`);
  t.is(got.body.latestStatus, 'DELIVERED');
  t.is(await repositoriesOf(w.t0.app).suppressions.get(w.t0.teamId, 'target@example.net'), undefined);
  const [report] = await w.t0.app.inbound.reportsRepo.listForEmail(email.id);
  t.is(report!.kind, 'bounce');
});
