import { repositoriesOf } from '../helpers/repositories.js';
import test from 'ava';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { twoTeams } from '../helpers/two-teams.js';
import { fixture, smtpSend } from './helpers/smtp-client.js';
import { collectEvents, quotedHeaders, sendAndDeliver } from './helpers/inbound-world.js';
import type { BusEvent } from '../../src/core/events.js';

// Asynchronous bounces (RFC 3464 DSNs) coming back to the VERP return path after the
// recipient's MX said 250: real providers' formats, sent through a real SMTP client.

let w: MailWorld;
let inboundPort: number;
let events: BusEvent[];

test.before(async () => {
  w = await startMailWorld();
  inboundPort = w.t0.app.listeners.inbound!.port;
  events = collectEvents(w, ['email.bounced', 'email.delivery_delayed']);
});
test.after.always(async () => {
  await w?.close();
});

async function deliveryRows(emailId: string) {
  return repositoriesOf(w.t0.app).deliveries.listForEmail(emailId);
}

test.serial('a Postfix "User unknown" DSN bounces the email, updates the delivery row and suppresses the recipient', async (t) => {
  const email = await sendAndDeliver(w, { to: 'ghost@example.net', subject: 'Postfix bounce' });
  t.regex(email.returnPath, new RegExp(`^bounces\\+${email.id}_[0-9a-f]{12}@bounces\\.sender\\.dev$`), 'the VERP token names the email and, by its tag, the transaction');
  const dsn = fixture('postfix-dsn-user-unknown.eml', { RETURN_PATH: email.returnPath, RECIPIENT: 'ghost@example.net', ORIGINAL: email.raw.toString() });
  const res = await smtpSend({ port: inboundPort, from: '', to: [email.returnPath], raw: dsn });
  t.true(res.ok, res.response);
  t.regex(res.response, /^250 2\.0\.0 Ok: queued as /);
  t.true(res.secure, 'the DSN came in over STARTTLS');

  // Stored before the 250: no waiting needed.
  const got = await w.t0.request('GET', `/v1/emails/${email.id}`);
  t.is(got.body.latestStatus, 'BOUNCED');
  const bounced = got.body.emailEvents.find((e: any) => e.status === 'BOUNCED');
  t.is(bounced.data.recipient, 'ghost@example.net');
  t.is(bounced.data.source, 'dsn');
  t.is(bounced.data.smtpCode, 550);
  t.is(bounced.data.bounce.type, 'Permanent');
  t.is(bounced.data.dsn.status, '5.1.1');
  t.is(bounced.data.dsn.reportingMta, 'mx1.example.net');
  t.is(bounced.data.dsn.remoteMta, 'mailstore1.example.net');
  t.regex(bounced.data.response, /User unknown in virtual mailbox table/);

  const [row] = await deliveryRows(email.id);
  t.is(row!.state, 'bounced', 'a permanent DSN after a 250 turns the delivered row into a bounce');
  t.is(row!.last_code, 550);
  t.regex(row!.last_response!, /^DSN \(reported by mx1\.example\.net\): 550 5\.1\.1/);

  const suppression = await repositoriesOf(w.t0.app).suppressions.get(w.t0.teamId, 'ghost@example.net');
  t.is(suppression?.reason, 'HARD_BOUNCE');
  t.is(suppression?.source, email.id);

  const announced = events.find((e) => e.type === 'email.bounced' && e.data.id === email.id);
  t.truthy(announced, 'email.bounced was emitted for webhooks');
  t.is(announced!.data.recipient, 'ghost@example.net');
  t.is(announced!.domainId, w.domain.id);

  const reports = await w.t0.app.inbound.reportsRepo.listForEmail(email.id);
  t.is(reports.length, 1);
  t.is(reports[0]!.kind, 'bounce');
  t.is(reports[0]!.linked_by, 'verp');
});

test.serial('a Google DSN to a return path an MTA lowercased still links by the VERP token', async (t) => {
  const email = await sendAndDeliver(w, { to: 'nobody@example.org', subject: 'Gmail bounce' });
  const lowered = email.returnPath.toLowerCase();
  t.not(lowered, email.returnPath);
  const dsn = fixture('gmail-dsn-no-such-user.eml', {
    RETURN_PATH: lowered,
    RECIPIENT: 'nobody@example.org',
    MESSAGE_ID: email.messageId,
    ORIGINAL: email.raw.toString(),
  });
  const res = await smtpSend({ port: inboundPort, from: '', to: [lowered], raw: dsn });
  t.true(res.ok, res.response);
  const got = await w.t0.request('GET', `/v1/emails/${email.id}`);
  t.is(got.body.latestStatus, 'BOUNCED');
  const bounced = got.body.emailEvents.find((e: any) => e.status === 'BOUNCED');
  t.is(bounced.data.recipient, 'nobody@example.org');
  t.is(bounced.data.bounce.type, 'Permanent');
  t.is(bounced.data.dsn.reportingMta, 'googlemail.com');
  t.regex(bounced.data.response, /^550-5\.1\.1 The email account that you tried to reach does not exist/);
  t.is((await repositoriesOf(w.t0.app).suppressions.get(w.t0.teamId, 'nobody@example.org'))?.reason, 'HARD_BOUNCE');
});

test.serial('an Exchange "delivery delayed" DSN records DELIVERY_DELAYED without regressing the status or suppressing', async (t) => {
  const email = await sendAndDeliver(w, { to: 'slow@example.net', subject: 'Quarterly numbers' });
  const dsn = fixture('exchange-dsn-delayed.eml', {
    RETURN_PATH: email.returnPath,
    RECIPIENT: 'slow@example.net',
    MESSAGE_ID: email.messageId,
    SUBJECT: email.subject,
    ORIGINAL_HEADERS: quotedHeaders(email.raw),
  });
  const res = await smtpSend({ port: inboundPort, from: '', to: [email.returnPath], raw: dsn });
  t.true(res.ok, res.response);
  const got = await w.t0.request('GET', `/v1/emails/${email.id}`);
  t.is(got.body.latestStatus, 'DELIVERED', 'DELIVERY_DELAYED ranks below DELIVERED (architecture.md, Decisions: email status)');
  const delayed = got.body.emailEvents.filter((e: any) => e.status === 'DELIVERY_DELAYED');
  t.is(delayed.length, 1);
  t.is(delayed[0].data.dsn.status, '4.4.7');
  t.is(delayed[0].data.willRetryUntil, 'Thu, 15 Jan 2026 10:11:37 +0000');
  t.is(delayed[0].data.recipient, 'slow@example.net');
  const [row] = await deliveryRows(email.id);
  t.is(row!.state, 'delivered');
  t.regex(row!.last_response!, /^delayed DSN .*400 4\.4\.7 Message delayed/);
  t.is(await repositoriesOf(w.t0.app).suppressions.get(w.t0.teamId, 'slow@example.net'), undefined);
  t.truthy(events.find((e) => e.type === 'email.delivery_delayed' && e.data.id === email.id));
});

test.serial('a DSN to the tokenless return path is linked by the original Message-ID', async (t) => {
  const email = await sendAndDeliver(w, { to: 'filtered@example.net', subject: 'Spam filter' });
  // A reporter that quotes only some headers: no VERP, no X-Posthorn-Email-ID, just Message-ID.
  const headers = quotedHeaders(email.raw, ['X-Posthorn-Email-ID']);
  t.false(headers.includes(email.id));
  const dsn = fixture('postfix-dsn-spam-policy.eml', { RETURN_PATH: 'bounces@bounces.sender.dev', RECIPIENT: 'filtered@example.net', ORIGINAL_HEADERS: headers });
  const res = await smtpSend({ port: inboundPort, from: '', to: ['bounces@bounces.sender.dev'], raw: dsn });
  t.true(res.ok, res.response);
  const got = await w.t0.request('GET', `/v1/emails/${email.id}`);
  t.is(got.body.latestStatus, 'BOUNCED');
  const bounced = got.body.emailEvents.find((e: any) => e.status === 'BOUNCED');
  t.is(bounced.data.bounce.type, 'Transient', 'a spam/policy refusal is not a dead mailbox');
  t.is(bounced.data.bounce.category, 'spam');
  t.is(await repositoriesOf(w.t0.app).suppressions.get(w.t0.teamId, 'filtered@example.net'), undefined, 'policy bounces never suppress');
  const reports = await w.t0.app.inbound.reportsRepo.listForEmail(email.id);
  t.is(reports[0]!.linked_by, 'message-id');
});

/** The copy one recipient got (its own transaction and return path). */
function copyFor(emailId: string, recipient: string) {
  return w.sink.messages.find((m) => m.rcptTo.includes(recipient) && m.raw.toString().includes(emailId))!;
}

test.serial('a DSN naming one of several recipients bounces and suppresses only that one', async (t) => {
  const email = await sendAndDeliver(w, { to: ['keeper@example.net', 'leaver@example.net'], subject: 'Two of them' });
  const leaver = copyFor(email.id, 'leaver@example.net');
  const dsn = fixture('postfix-dsn-user-unknown.eml', { RETURN_PATH: leaver.mailFrom, RECIPIENT: 'leaver@example.net', ORIGINAL: leaver.raw.toString() });
  t.true((await smtpSend({ port: inboundPort, from: '', to: [leaver.mailFrom], raw: dsn })).ok);
  const rows = await deliveryRows(email.id);
  t.is(rows.find((r) => r.recipient === 'leaver@example.net')!.state, 'bounced');
  t.is(rows.find((r) => r.recipient === 'keeper@example.net')!.state, 'delivered');
  t.is((await repositoriesOf(w.t0.app).suppressions.get(w.t0.teamId, 'leaver@example.net'))?.reason, 'HARD_BOUNCE');
  t.is(await repositoriesOf(w.t0.app).suppressions.get(w.t0.teamId, 'keeper@example.net'), undefined);
});

test.serial('a bounce that links to nothing is still accepted and kept for operators', async (t) => {
  const dsn = fixture('postfix-dsn-user-unknown.eml', {
    RETURN_PATH: 'bounces@bounces.sender.dev',
    RECIPIENT: 'stranger@example.net',
    ORIGINAL: 'Message-ID: <never-sent-by-us@sender.dev>\r\nSubject: ?\r\n\r\nbody\r\n',
  });
  const res = await smtpSend({ port: inboundPort, from: '', to: ['bounces@bounces.sender.dev'], raw: dsn });
  t.true(res.ok, res.response);
  const [latest] = await w.t0.app.inbound.reportsRepo.latest(1);
  t.is(latest!.kind, 'bounce');
  t.is(latest!.email_id, null);
  t.is(latest!.linked_by, null);
});

test.serial('unknown return-path mailboxes and another domain\'s VERP token are refused at RCPT with 550 5.1.1', async (t) => {
  const probe = (to: string) => smtpSend({ port: inboundPort, from: '', to: [to], raw: 'Subject: x\r\n\r\nx\r\n' });
  const unknown = await probe('bounces+em_doesNotExist123@bounces.sender.dev');
  t.false(unknown.ok);
  t.regex(unknown.rcptErrors[0] ?? unknown.response, /^550 5\.1\.1 /);
  const postmaster = await probe('postmaster@bounces.sender.dev');
  t.regex(postmaster.rcptErrors[0] ?? postmaster.response, /^550 5\.1\.1 /);

  // A real email id, but sent from another domain: not a return path of sender.dev.
  await addVerifiedDomain(w.t0, 'elsewhere.dev');
  const other = await w.t0.request('POST', '/v1/emails', { body: { from: 'hi@elsewhere.dev', to: 'x@example.net', subject: 'x', text: 'x' } });
  t.is(other.status, 200);
  const crossed = await probe(`bounces+${other.body.emailId}@bounces.sender.dev`);
  t.false(crossed.ok);
  t.regex(crossed.rcptErrors[0] ?? crossed.response, /^550 5\.1\.1 /);
  const own = await probe(`bounces+${other.body.emailId}@bounces.elsewhere.dev`);
  t.true(own.ok, own.response);
});

test.serial('a DSN to a tokenless return path and the complaint address together cannot bounce another team\'s email', async (t) => {
  // Team B sends and delivers; its Message-ID and headers are known to every recipient.
  const { b } = await twoTeams(w.t0, { b: { domains: ['victim.dev'] } });
  const [teamB, keyB] = [b.teamId, b.key];
  const before = w.sink.messages.length;
  const sent = await w.t0.request('POST', '/v1/emails', { key: keyB, body: { from: 'news@victim.dev', to: 'reader@example.net', subject: 'Team B news', text: 'x' } });
  t.is(sent.status, 200);
  const victimId = sent.body.emailId as string;
  await w.settle();
  const delivered = w.sink.messages.slice(before).find((m) => m.raw.toString().includes(victimId));
  t.truthy(delivered);

  // Sent to sender.dev's (team A's) tokenless return path, with the complaint address as a second recipient.
  const dsn = fixture('postfix-dsn-user-unknown.eml', { RETURN_PATH: 'bounces@bounces.sender.dev', RECIPIENT: 'reader@example.net', ORIGINAL: delivered!.raw.toString() });
  const res = await smtpSend({ port: inboundPort, from: '', to: ['bounces@bounces.sender.dev', 'complaints@mx.posthorn.test'], raw: dsn });
  t.true(res.ok, res.response);

  const got = await w.t0.request('GET', `/v1/emails/${victimId}`, { key: keyB });
  t.is(got.body.latestStatus, 'DELIVERED', 'team B\'s email is untouched by a report at team A\'s return path');
  t.is(await repositoriesOf(w.t0.app).suppressions.get(teamB, 'reader@example.net'), undefined);
  t.falsy(events.find((e) => e.type === 'email.bounced' && e.data.id === victimId), 'no webhook for team B');
});

test.serial('a DSN naming an address the email was not sent to suppresses nobody it names, and no other recipient', async (t) => {
  // Anyone who saw the return path (the Return-Path field of a delivered copy) can send a DSN to it.
  const email = await sendAndDeliver(w, { to: ['first@example.net', 'second@example.net'], subject: 'Two again' });
  const first = copyFor(email.id, 'first@example.net');
  const dsn = fixture('postfix-dsn-user-unknown.eml', { RETURN_PATH: first.mailFrom, RECIPIENT: 'best-customer@example.org', ORIGINAL: first.raw.toString() });
  t.true((await smtpSend({ port: inboundPort, from: '', to: [first.mailFrom], raw: dsn })).ok);
  t.is(await repositoriesOf(w.t0.app).suppressions.get(w.t0.teamId, 'best-customer@example.org'), undefined, 'not a recipient of this email: not suppressed');
  const rows = await deliveryRows(email.id);
  t.is(rows.find((r) => r.recipient === 'second@example.net')!.state, 'delivered', 'not the transaction of this return path');
  // The return path is first's alone: a DSN on it about an address first's mail went on to (a
  // forwarder's rewrite) is first's.
  t.is(rows.find((r) => r.recipient === 'first@example.net')!.state, 'bounced');
});

test.serial('a DSN to the upper-cased return path of mail to an internationalised domain finds the transaction by its tag', async (t) => {
  w.addRecipientDomain('xn--bcher-kva.example');
  const email = await sendAndDeliver(w, { to: 'Kunde@Bücher.example', subject: 'IDN bounce' });
  const upper = email.returnPath.toUpperCase();
  const dsn = fixture('postfix-dsn-user-unknown.eml', { RETURN_PATH: upper, RECIPIENT: 'kunde@xn--bcher-kva.example', ORIGINAL: email.raw.toString() });
  const res = await smtpSend({ port: inboundPort, from: '', to: [upper], raw: dsn });
  t.true(res.ok, res.response);
  const got = await w.t0.request('GET', `/v1/emails/${email.id}`);
  t.is(got.body.latestStatus, 'BOUNCED');
  t.is((await deliveryRows(email.id))[0]!.state, 'bounced');
});

test.serial('a DSN naming a co-recipient at an internationalised domain in RFC 6533 escapes names that recipient: it changes nothing', async (t) => {
  w.addRecipientDomain('xn--bcher-kva.example');
  const email = await sendAndDeliver(w, { to: ['leser@example.net', 'Kundin@Bücher.example'], subject: 'IDN co-recipient' });
  const first = copyFor(email.id, 'leser@example.net');
  const dsn = fixture('postfix-dsn-user-unknown.eml', { RETURN_PATH: first.mailFrom, RECIPIENT: 'kundin@xn--bcher-kva.example', ORIGINAL: first.raw.toString() });
  // RFC 6533 3: a utf-8 address in a message/delivery-status part, its non-ASCII characters escaped.
  const named = Buffer.from(dsn.toString().replace('Final-Recipient: rfc822; kundin@xn--bcher-kva.example', 'Final-Recipient: utf-8; KUNDIN@B\\x{DC}CHER.EXAMPLE').replace(/^Original-Recipient: .*\r\n/m, ''));
  t.true((await smtpSend({ port: inboundPort, from: '', to: [first.mailFrom], raw: named })).ok);
  const rows = await deliveryRows(email.id);
  t.deepEqual(rows.map((r) => r.state), ['delivered', 'delivered'], 'another recipient of the email is named: the return path of leser@ cannot speak for it');
  t.is(await repositoriesOf(w.t0.app).suppressions.get(w.t0.teamId, 'leser@example.net'), undefined);
  t.is(await repositoriesOf(w.t0.app).suppressions.get(w.t0.teamId, 'kundin@xn--bcher-kva.example'), undefined);
});

test.serial('a DSN whose diagnostic holds a NUL character is taken (250), its text stored with U+FFFD in its place, on either store', async (t) => {
  const email = await sendAndDeliver(w, { to: 'nul@example.net', subject: 'NUL bounce' });
  const dsn = fixture('postfix-dsn-user-unknown.eml', { RETURN_PATH: email.returnPath, RECIPIENT: 'nul@example.net', ORIGINAL: email.raw.toString() });
  const withNul = Buffer.from(dsn.toString().replaceAll('User unknown in virtual', 'User\0unknown in virtual'));
  const res = await smtpSend({ port: inboundPort, from: '', to: [email.returnPath], raw: withNul });
  t.true(res.ok, res.response);
  const got = await w.t0.request('GET', `/v1/emails/${email.id}`);
  t.is(got.body.latestStatus, 'BOUNCED');
  const bounced = got.body.emailEvents.find((e: any) => e.status === 'BOUNCED');
  t.regex(bounced.data.response, /User\uFFFDunknown in virtual mailbox table/);
  const [row] = await deliveryRows(email.id);
  t.regex(row!.last_response!, /User\uFFFDunknown/);
});
