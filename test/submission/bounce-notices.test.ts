import test from 'ava';
import { simpleParser } from 'mailparser';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import type { SmtpSink } from '../helpers/smtp-sink.js';
import { submissionTransport } from '../helpers/submission-client.js';
import { waitForStatus } from '../inbound/helpers/inbound-world.js';

// Bounce notices (submission.bounceNotices): a submitted message that hard-bounces or fails gets
// an RFC 3464 DSN to its envelope sender, when that sender is at one of the team's verified
// domains; sent by the server itself (DKIM d= its hostname) from the null reverse-path.

const clock = new ManualClock(Date.UTC(2026, 10, 27, 8, 0, 0));
let w: MailWorld;
/** The MX of sender.dev (the team's verified domain) and of elsewhere.test (nobody's). */
let senderMx: SmtpSink;

test.before(async () => {
  w = await startMailWorld({ clock });
  senderMx = await w.startSecondSink('sender.dev');
  w.zone.set('elsewhere.test', 'MX', [{ exchange: 'mx2.sink.test', priority: 10 }]);
  const key = await w.t0.app.tlsReports.serverDkimKey();
  w.zone.set(key.record.name, 'TXT', [key.record.value]);
  w.sink.setBehaviour({
    onRcpt: (address) =>
      address.startsWith('nobody') ? { code: 550, message: '5.1.1 <' + address + '>: User unknown' } : address.startsWith('later') ? { code: 451, message: '4.3.0 Try again later' } : undefined,
  });
});
test.after.always(async () => {
  await w?.close();
});

async function submit(envelopeFrom: string, to: string, subject: string): Promise<string> {
  const tx = submissionTransport(w.t0);
  try {
    const info = await tx.sendMail({ from: 'App <hello@sender.dev>', to, subject, text: 'body', envelope: { from: envelopeFrom, to: [to] } });
    return /queued as (em_\S+)$/.exec(info.response)![1]!;
  } finally {
    tx.close();
  }
}

test.serial('off by default: a submitted message that bounces sends no notice', async (t) => {
  const id = await submit('app@sender.dev', 'nobody-off@example.net', 'Off');
  await waitForStatus(w, id, 'BOUNCED');
  await w.settle();
  t.is(senderMx.messages.length, 0);
});

test.serial('on: a hard bounce mails a DSN to the envelope sender, from <>, DKIM-signed by the server', async (t) => {
  await w.restart({ submission: { bounceNotices: true } });
  const id = await submit('app@sender.dev', 'nobody@example.net', 'Your invoice');
  await waitForStatus(w, id, 'BOUNCED');
  const [dsn] = await senderMx.waitForMessages(1);
  t.is(dsn!.mailFrom, '', 'the null reverse-path: a notice never bounces back');
  t.deepEqual(dsn!.rcptTo, ['app@sender.dev']);
  const raw = dsn!.raw.toString('latin1');
  t.regex(raw, /^Content-Type: multipart\/report; report-type=delivery-status; boundary=/m);
  t.regex(raw, /^Auto-Submitted: auto-replied\r$/m);
  t.regex(raw, /^Content-Type: message\/delivery-status\r$/m);
  t.regex(raw, /^Reporting-MTA: dns; mx\.posthorn\.test\r$/m);
  t.regex(raw, /^Final-Recipient: rfc822; nobody@example\.net\r\nAction: failed\r\nStatus: 5\.1\.1\r\nRemote-MTA: dns; mx\.sink\.test\r\n/m);
  t.regex(raw, /^Diagnostic-Code: smtp; 550 5\.1\.1 <nobody@example\.net>: User unknown\r$/m);
  t.regex(raw, /^Content-Type: text\/rfc822-headers\r$/m);
  const parsed = await simpleParser(dsn!.raw);
  t.is(parsed.subject, 'Undelivered Mail Returned to Sender');
  t.is(parsed.from?.value[0]?.address, 'MAILER-DAEMON@mx.posthorn.test');
  t.is(parsed.from?.value[0]?.name, 'Mail Delivery System');
  t.regex(parsed.text ?? '', /<nobody@example\.net>: 550 5\.1\.1/);
  // The original's headers, as it was sent (its Message-ID and Subject).
  const email = await w.t0.request('GET', `/v1/emails/${id}`);
  t.is(email.body.submittedBy, undefined, 'the envelope sender is not part of the API');
  const headersPart = raw.slice(raw.indexOf('Content-Type: text/rfc822-headers'));
  t.regex(headersPart, /^Subject: Your invoice\r$/m);
  t.regex(headersPart, /^From: App <hello@sender\.dev>\r$/m);
  t.regex(headersPart, /^Message-ID: <[^>]+@sender\.dev>\r$/m);
  t.notRegex(headersPart, /^Content-Type: (?!text\/rfc822-headers)/m);
  t.is(await w.dkimStatus(dsn!.raw), 'pass');
  t.regex(raw, /^DKIM-Signature: [^]*?d=mx\.posthorn\.test;/m);
});

test.serial('on: an email sent through the API that bounces gets no notice', async (t) => {
  const before = senderMx.messages.length;
  const res = await w.t0.request('POST', '/v1/emails', { body: { from: 'hello@sender.dev', to: 'nobody-api@example.net', subject: 'API', text: 'x' } });
  t.is(res.status, 200);
  await waitForStatus(w, res.body.emailId, 'BOUNCED');
  await w.settle();
  t.is(senderMx.messages.length, before);
});

test.serial('on: an envelope sender at a domain the team has not verified gets no notice (no backscatter)', async (t) => {
  const before = senderMx.messages.length;
  const id = await submit('victim@elsewhere.test', 'nobody-else@example.net', 'Forged');
  await waitForStatus(w, id, 'BOUNCED');
  await w.settle();
  t.is(senderMx.messages.length, before, 'elsewhere.test points at the same MX: nothing arrived');
  const empty = await submit('', 'nobody-null@example.net', 'Null sender');
  await waitForStatus(w, empty, 'BOUNCED');
  await w.settle();
  t.is(senderMx.messages.length, before, 'a message submitted from <> has nobody to tell');
});

test.serial('on: a temporary failure sends nothing until the give-up, then one notice (5.4.7, the last reply)', async (t) => {
  const before = senderMx.messages.length;
  const id = await submit('app@sender.dev', 'later@example.net', 'Slow');
  await waitForStatus(w, id, 'DELIVERY_DELAYED');
  clock.advance(3600_000);
  await w.settle();
  t.is(senderMx.messages.length, before, 'deferred: no notice');
  clock.advance(72 * 3600_000);
  await waitForStatus(w, id, 'FAILED');
  const dsns = await senderMx.waitForMessages(before + 1);
  const raw = dsns[before]!.raw.toString('latin1');
  t.regex(raw, /^Final-Recipient: rfc822; later@example\.net\r\nAction: failed\r\nStatus: 5\.4\.7\r\n/m);
  t.regex(raw, /^Diagnostic-Code: smtp; 451 4\.3\.0 Try again later\r$/m);
  t.regex(raw, /gave up after \d+ attempts/);
  await w.settle();
  t.is(senderMx.messages.length, before + 1, 'one notice');
});
