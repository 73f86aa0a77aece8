import test from 'ava';
import { simpleParser } from 'mailparser';
import { ManualClock } from '../../src/lib/clock.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import type { SmtpSink } from '../helpers/smtp-sink.js';
import { submissionTransport } from '../helpers/submission-client.js';
import type { BounceNoticeRecipient } from '../../src/core/emails/bounce-notice-service.js';
import { composeBounceNotice } from '../../src/smtp/outbound/bounce-notice-mail.js';
import { fixture, smtpSend } from '../inbound/helpers/smtp-client.js';
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
      address.startsWith('nobody')
        ? { code: 550, message: '5.1.1 <' + address + '>: User unknown' }
        : address.startsWith('later')
          ? { code: 451, message: '4.3.0 Try again later' }
          : address.startsWith('policy')
            ? { code: 550, message: '5.7.1 Message rejected as spam by content filter' }
            : undefined,
  });
});
test.after.always(async () => {
  await w?.close();
});

async function submit(envelopeFrom: string, to: string, subject: string, extra: { inReplyTo?: string; references?: string[] } = {}): Promise<string> {
  const tx = submissionTransport(w.t0);
  try {
    const info = await tx.sendMail({ from: 'App <hello@sender.dev>', to, subject, text: 'body', envelope: { from: envelopeFrom, to: [to] }, ...extra });
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
  const id = await submit('app@sender.dev', 'nobody@example.net', 'Your invoice', { inReplyTo: '<order.2@shop.example>', references: ['<order.1@shop.example>', '<order.2@shop.example>'] });
  await waitForStatus(w, id, 'BOUNCED');
  const [dsn] = await senderMx.waitForMessages(1);
  t.is(dsn!.mailFrom, '', 'the null reverse-path: a notice never bounces back');
  t.deepEqual(dsn!.rcptTo, ['app@sender.dev']);
  const raw = dsn!.raw.toString('latin1');
  t.regex(raw, /^Content-Type: multipart\/report; report-type=delivery-status;\r\n boundary="dsn-[0-9a-f]+"\r$/m);
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
  t.regex(headersPart, /^In-Reply-To: <order\.2@shop\.example>\r$/m);
  t.regex(headersPart, /^References: <order\.1@shop\.example> <order\.2@shop\.example>\r$/m);
  t.notRegex(headersPart, /^Content-Type: (?!text\/rfc822-headers)/m);
  t.is(await w.dkimStatus(dsn!.raw), 'pass');
  t.regex(raw, /^DKIM-Signature: [^]*?d=mx\.posthorn\.test;/m);
});

test.serial('on: the recipients of one email share one notice (each has a transaction of its own); one delivered is not in it', async (t) => {
  const before = senderMx.messages.length;
  const tx = submissionTransport(w.t0);
  const to = ['nobody-1@example.net', 'nobody-2@example.net', 'fine@example.org'];
  const info = await tx.sendMail({ from: 'hello@sender.dev', to, subject: 'Three', text: 'x', envelope: { from: 'app@sender.dev', to } });
  tx.close();
  await waitForStatus(w, /queued as (em_\S+)$/.exec(info.response)![1]!, 'BOUNCED');
  await w.settle();
  t.is(senderMx.messages.length, before + 1);
  const raw = senderMx.messages[before]!.raw.toString('latin1');
  t.deepEqual(raw.match(/^Final-Recipient: rfc822; \S+(?=\r$)/gm), ['Final-Recipient: rfc822; nobody-1@example.net', 'Final-Recipient: rfc822; nobody-2@example.net']);
});

test.serial('on: a policy refusal (a bounce that is not a hard one, never retried) mails a notice too', async (t) => {
  const before = senderMx.messages.length;
  const id = await submit('app@sender.dev', 'policy@example.net', 'Filtered');
  await waitForStatus(w, id, 'BOUNCED');
  const email = await w.t0.request('GET', `/v1/emails/${id}`);
  t.is(email.body.emailEvents.at(-1).data.bounce.type, 'Transient', 'not a hard bounce: no suppression either');
  await w.settle();
  t.is(senderMx.messages.length, before + 1);
  const raw = senderMx.messages[before]!.raw.toString('latin1');
  t.regex(raw, /^Final-Recipient: rfc822; policy@example\.net\r\nAction: failed\r\nStatus: 5\.7\.1\r$/m);
  t.regex(raw, /^Diagnostic-Code: smtp; 550 5\.7\.1 Message rejected as spam by content filter\r$/m);
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

test.serial('on: an envelope sender at an IDN domain written in Unicode (SMTPUTF8) gets its notice at the A-label domain', async (t) => {
  await addVerifiedDomain(w.t0, 'xn--bcher-kva.dev'); // domains are added by their A-label
  const idnMx = await w.startSecondSink('xn--bcher-kva.dev');
  const id = await submit('app@bücher.dev', 'nobody-idn@example.net', 'Umlaut');
  await waitForStatus(w, id, 'BOUNCED');
  await w.settle();
  const [notice] = await idnMx.waitForMessages(1);
  // The sink (smtp-server) shows the envelope's domain in Unicode whichever form it was sent in.
  t.deepEqual(notice!.rcptTo, ['app@bücher.dev']);
  const raw = notice!.raw.toString('latin1');
  t.regex(raw, /^To: <app@xn--bcher-kva\.dev>\r$/m, 'addressed at the A-label domain');
  t.regex(raw, /^Final-Recipient: rfc822; nobody-idn@example\.net\r$/m);
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

test.serial('on: a DSN that comes back after the 250 sends the notice too, with the status and diagnostic it reported', async (t) => {
  const before = senderMx.messages.length;
  const sinkBefore = w.sink.messages.length;
  const id = await submit('app@sender.dev', 'ghost@example.net', 'Late bounce');
  await waitForStatus(w, id, 'DELIVERED');
  t.is(senderMx.messages.length, before, 'delivered: no notice');
  const sent = w.sink.messages.slice(sinkBefore).find((m) => m.rcptTo.includes('ghost@example.net'))!;
  const dsn = fixture('postfix-dsn-user-unknown.eml', { RETURN_PATH: sent.mailFrom, RECIPIENT: 'ghost@example.net', ORIGINAL: sent.raw.toString() });
  const res = await smtpSend({ port: w.t0.app.listeners.inbound!.port, from: '', to: [sent.mailFrom], raw: dsn });
  t.true(res.ok, res.response);
  await waitForStatus(w, id, 'BOUNCED');
  const notices = await senderMx.waitForMessages(before + 1);
  const raw = notices[before]!.raw.toString('latin1');
  t.deepEqual(notices[before]!.rcptTo, ['app@sender.dev']);
  t.regex(raw, /^Final-Recipient: rfc822; ghost@example\.net\r\nAction: failed\r\nStatus: 5\.1\.1\r\nRemote-MTA: dns; mailstore1\.example\.net\r\n/m);
  t.regex(raw, /^Diagnostic-Code: smtp; 550 5\.1\.1/m);
  t.regex(raw, /^Subject: Late bounce\r$/m);
});

/** A notice composed alone (no delivery), for a submitted email with `subject` sent to `recipients`. */
async function composed(subject: string, recipients: BounceNoticeRecipient[]): Promise<string> {
  const to = JSON.stringify(recipients.map((r) => r.address));
  const original = { from_addr: 'App <hello@sender.dev>', to_json: to, cc_json: null, subject, message_id: '<m1@sender.dev>', in_reply_to: null, references_json: null, headers_json: null, created_at: '2026-11-27T00:00:00.000Z' };
  const notice = { emailId: 'em_1', teamId: 1, to: 'app@sender.dev', original, recipients };
  return (await composeBounceNotice({ hostname: 'mx.posthorn.test', date: new Date(Date.UTC(2026, 10, 27)), messageId: 'dsn.1@mx.posthorn.test', notice })).toString('latin1');
}

test('the notice: one block per failed recipient, long replies folded under 78 columns, hostile bytes kept out, 5.0.0 without a 5.x.x', async (t) => {
  const long = `550 ${'x'.repeat(30)} ${'word '.repeat(300)}\r\nInjected: header \u00e9`;
  const raw = await composed('Grüße', [
    { address: 'a@example.net', reply: long, smtpCode: 550, mxHost: 'mx.example.net', reason: long, status: null, expired: false },
    { address: 'b@example.net', reply: null, smtpCode: null, mxHost: null, reason: 'purged by an operator', status: null, expired: false },
  ]);
  t.true(raw.split('\r\n').every((l) => l.length <= 78), 'every line folded');
  t.true(/^[\x20-\x7e\r\n\t]*$/.test(raw.slice(raw.indexOf('\r\n\r\n'), raw.indexOf('Content-Type: text/rfc822-headers'))), '7-bit');
  t.notRegex(raw, /^Injected:/m);
  t.regex(raw, /^Final-Recipient: rfc822; a@example\.net\r\nAction: failed\r\nStatus: 5\.0\.0\r\nRemote-MTA: dns; mx\.example\.net\r\nDiagnostic-Code: smtp; 550 x+ word word word\r\n word/m);
  t.regex(raw, /^Final-Recipient: rfc822; b@example\.net\r\nAction: failed\r\nStatus: 5\.0\.0\r\n\r\n--/m, 'no reply: no Diagnostic-Code');
  t.regex(raw, /<b@example\.net>: purged by an operator/);
  t.regex(raw, /^Subject: =\?UTF-8\?Q\?Gr=C3=BC=C3=9Fe\?=\r$/m);
});

test('the notice: a reply that is one long token is still cut under 998 octets a line (RFC 5322 §2.1.1)', async (t) => {
  const token = `550 5.7.1 ${'x'.repeat(2500)}`;
  const raw = await composed('Long', [{ address: 'a@example.net', reply: token, smtpCode: 550, mxHost: 'mx.example.net', reason: token, status: null, expired: false }]);
  const longest = Math.max(...raw.split('\r\n').map((l) => l.length));
  t.true(longest <= 998, `longest line ${longest}`);
  t.regex(raw, /^Diagnostic-Code: smtp; 550 5\.7\.1\r\n x{800,}\r\n x+/m, 'folded at the space, then the token cut and continued');
});
