import { repositoriesOf } from '../helpers/repositories.js';
import test from 'ava';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { fixture, smtpSend } from './helpers/smtp-client.js';
import { sendAndDeliver } from './helpers/inbound-world.js';
import { returnPathToken } from '../../src/core/received/return-path-token.js';

// Each recipient's copy goes in its own SMTP transaction, with a return path whose tag names
// that recipient (VERP per delivery): recipients at the same domain no longer share a return
// path, so one of them cannot bounce or suppress another with a forged DSN or ARF report, by
// its return path or by the headers every copy carries. A shaping rule that groups recipients
// (maxRecipientsPerTransaction > 1) gets the domain's tag, as mail sent before this did.

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

/** An email to two recipients at one domain, and the copy each of them got. */
async function twoAtOneDomain(a: string, b: string) {
  const email = await sendAndDeliver(w, { to: [a, b], subject: 'Same domain' });
  const copies = w.sink.messages.filter((m) => m.raw.toString().includes(email.id));
  const copyOf = (rcpt: string) => copies.find((m) => m.rcptTo.includes(rcpt))!;
  return { email, copies, a: copyOf(a), b: copyOf(b) };
}

async function rowOf(emailId: string, recipient: string) {
  return (await repositoriesOf(w.t0.app).deliveries.listForEmail(emailId)).find((r) => r.recipient === recipient)!;
}

async function suppression(address: string) {
  return repositoriesOf(w.t0.app).suppressions.get(w.t0.teamId, address);
}

async function statusesOf(emailId: string): Promise<string[]> {
  return ((await w.t0.request('GET', `/v1/emails/${emailId}`)).body.emailEvents as { status: string }[]).map((e) => e.status);
}

test.serial('two recipients at one domain get one transaction each, with different return paths, and the same signed message', async (t) => {
  const { email, copies, a, b } = await twoAtOneDomain('ann@example.net', 'ben@example.net');
  t.is(copies.length, 2, 'one SMTP transaction per recipient');
  t.deepEqual(a.rcptTo, ['ann@example.net']);
  t.deepEqual(b.rcptTo, ['ben@example.net']);
  t.not(a.mailFrom, b.mailFrom, 'each transaction has its own return path');
  // The tag names the email and the one recipient (return-path-token.ts).
  t.is(a.mailFrom, `bounces+${returnPathToken(w.t0.app.secret, email.id, 'example.net', 'ann@example.net')}@bounces.sender.dev`);
  t.is(b.mailFrom, `bounces+${returnPathToken(w.t0.app.secret, email.id, 'example.net', 'BEN@example.net')}@bounces.sender.dev`, 'keyed on the address as deliveries are compared');
  t.regex(a.mailFrom, new RegExp(`^bounces\\+${email.id}_[0-9a-f]{12}@bounces\\.sender\\.dev$`));
  t.true(a.raw.equals(b.raw), 'the message is composed and signed once, the same bytes in both');
  t.is(await w.dkimStatus(b.raw), 'pass');
});

test.serial('a co-recipient\'s DSN to its own return path naming the other recipient changes nothing for them; a genuine DSN there bounces the co-recipient', async (t) => {
  const { email, b } = await twoAtOneDomain('alice@example.net', 'bob@example.net');
  // Bob writes a DSN for Alice to the return path he saw.
  const forged = fixture('postfix-dsn-user-unknown.eml', { RETURN_PATH: b.mailFrom, RECIPIENT: 'alice@example.net', ORIGINAL: b.raw.toString() });
  const res = await smtpSend({ port: inboundPort, from: '', to: [b.mailFrom], raw: forged });
  t.true(res.ok, `accepted and kept: ${res.response}`);
  t.is((await rowOf(email.id, 'alice@example.net')).state, 'delivered', 'Alice stays delivered');
  t.is(await suppression('alice@example.net'), undefined, 'Alice is not suppressed');
  t.false((await statusesOf(email.id)).includes('BOUNCED'));

  // Bob's own mailbox really is gone: the DSN on his return path bounces him, and only him.
  const genuine = fixture('postfix-dsn-user-unknown.eml', { RETURN_PATH: b.mailFrom, RECIPIENT: 'bob@example.net', ORIGINAL: b.raw.toString() });
  t.true((await smtpSend({ port: inboundPort, from: '', to: [b.mailFrom], raw: genuine })).ok);
  t.is((await rowOf(email.id, 'bob@example.net')).state, 'bounced');
  t.is((await suppression('bob@example.net'))?.reason, 'HARD_BOUNCE');
  t.is((await rowOf(email.id, 'alice@example.net')).state, 'delivered');
  t.is(await suppression('alice@example.net'), undefined);
});

test.serial('a co-recipient\'s ARF report quoting its own return path, at the complaint address or at that return path, cannot suppress the other recipient', async (t) => {
  const { email, a, b } = await twoAtOneDomain('carol@example.net', 'dave@example.net');
  for (const to of [COMPLAINTS, b.mailFrom]) {
    const arf = fixture('yahoo-arf-abuse.eml', { REPORT_TO: to, SUBJECT: email.subject, RETURN_PATH: b.mailFrom, RECIPIENT: 'carol@example.net', ORIGINAL: b.raw.toString() });
    t.true((await smtpSend({ port: inboundPort, from: 'feedback@arf.mail.yahoo.com', to: [to], raw: arf })).ok);
    t.is(await suppression('carol@example.net'), undefined, `not suppressed by a report sent to ${to}`);
  }
  t.false((await statusesOf(email.id)).includes('COMPLAINED'));

  // Carol's own complaint (her copy's return path) counts.
  const real = fixture('yahoo-arf-abuse.eml', { REPORT_TO: COMPLAINTS, SUBJECT: email.subject, RETURN_PATH: a.mailFrom, RECIPIENT: 'carol@example.net', ORIGINAL: a.raw.toString() });
  t.true((await smtpSend({ port: inboundPort, from: 'feedback@arf.mail.yahoo.com', to: [COMPLAINTS], raw: real })).ok);
  t.is((await suppression('carol@example.net'))?.reason, 'COMPLAINT');
  t.is(await suppression('dave@example.net'), undefined);
});

test.serial('evidence every copy carries (Message-ID, X-Posthorn-Email-ID, the untagged return path) cannot act on a recipient of a several-recipient email', async (t) => {
  const { email, b } = await twoAtOneDomain('erin@example.net', 'frank@example.net');
  const copy = b.raw.toString();
  // Linked by our header, then by Message-ID alone: the ARF names Erin, Frank sent it.
  for (const original of [copy, copy.replace(/^X-Posthorn-Email-ID: .*\r\n/im, '')]) {
    const arf = fixture('yahoo-arf-abuse.eml', { REPORT_TO: COMPLAINTS, SUBJECT: email.subject, RETURN_PATH: 'someone@example.com', RECIPIENT: 'erin@example.net', ORIGINAL: original });
    t.true((await smtpSend({ port: inboundPort, from: 'feedback@arf.mail.yahoo.com', to: [COMPLAINTS], raw: arf })).ok);
  }
  const reports = await w.t0.app.inbound.reportsRepo.listForEmail(email.id);
  t.deepEqual(reports.map((r) => r.linked_by).sort(), ['header', 'message-id'], 'both reports are linked to the email and kept');
  t.is(await suppression('erin@example.net'), undefined);

  // The return path without its tag still names the email (mail sent before tags), but not a recipient.
  const untagged = b.mailFrom.replace(/_[0-9a-f]{12}@/, '@');
  t.not(untagged, b.mailFrom);
  const dsn = fixture('postfix-dsn-user-unknown.eml', { RETURN_PATH: untagged, RECIPIENT: 'erin@example.net', ORIGINAL: b.raw.toString() });
  t.true((await smtpSend({ port: inboundPort, from: '', to: [untagged], raw: dsn })).ok);
  t.is((await rowOf(email.id, 'erin@example.net')).state, 'delivered');
  t.is(await suppression('erin@example.net'), undefined);
  const statuses = await statusesOf(email.id);
  t.false(statuses.includes('BOUNCED') || statuses.includes('COMPLAINED'));
});

test.serial('a return path with the domain tag (mail sent before per-recipient tags) is still accepted and acts on the domain\'s recipients as before', async (t) => {
  const { email } = await twoAtOneDomain('gina@example.net', 'hank@example.net');
  const domainPath = `bounces+${returnPathToken(w.t0.app.secret, email.id, 'example.net')}@bounces.sender.dev`;
  const dsn = fixture('postfix-dsn-user-unknown.eml', { RETURN_PATH: domainPath, RECIPIENT: 'hank@example.net', ORIGINAL: email.raw.toString() });
  const res = await smtpSend({ port: inboundPort, from: '', to: [domainPath], raw: dsn });
  t.true(res.ok, res.response);
  t.is((await rowOf(email.id, 'hank@example.net')).state, 'bounced');
  t.is((await suppression('hank@example.net'))?.reason, 'HARD_BOUNCE');
  t.is((await rowOf(email.id, 'gina@example.net')).state, 'delivered');
  const [report] = await w.t0.app.inbound.reportsRepo.listForEmail(email.id);
  t.is(report!.linked_by, 'verp');
});

test.serial('a destination that fails the session is tried once for all its recipients, each deferred with that reply', async (t) => {
  // Each recipient's transaction has its own MAIL FROM (a refused one may be tried again on a fresh session).
  const mailFroms = new Set<string>();
  w.sink.setBehaviour({
    onMailFrom: (address) => {
      mailFroms.add(address);
      return { code: 421, message: '4.3.2 Service shutting down' };
    },
  });
  t.teardown(() => w.sink.setBehaviour({ onMailFrom: undefined }));
  const res = await w.t0.request('POST', '/v1/emails', { body: { from: `hello@${w.domain.name}`, to: ['k1@example.net', 'k2@example.net', 'k3@example.net'], subject: 'Down', text: 'x' } });
  t.is(res.status, 200);
  await w.settle();
  const rows = await repositoriesOf(w.t0.app).deliveries.listForEmail(res.body.emailId);
  t.is(rows.length, 3);
  t.true(rows.every((r) => r.state === 'queued' && r.attempts === 1), JSON.stringify(rows.map((r) => [r.state, r.attempts])));
  t.is(new Set(rows.map((r) => r.last_response)).size, 1, 'the same deferral for each');
  t.regex(rows[0]!.last_response!, /421/);
  t.is(mailFroms.size, 1, 'one transaction tried, not one per recipient');
});

test('a shaping rule with maxRecipientsPerTransaction = 2 groups two recipients of a domain in one transaction, with the domain tag, and a DSN on it acts as before', async (t) => {
  const g = await startMailWorld({ overrides: { outbound: { shaping: [{ domain: 'example.net', maxRecipientsPerTransaction: 2 }] } as never } });
  t.teardown(() => g.close());
  const email = await sendAndDeliver(g, { to: ['ivy@example.net', 'jack@example.net'], subject: 'Grouped' });
  const copies = g.sink.messages.filter((m) => m.raw.toString().includes(email.id));
  t.is(copies.length, 1, 'one transaction');
  t.deepEqual([...copies[0]!.rcptTo].sort(), ['ivy@example.net', 'jack@example.net']);
  t.is(copies[0]!.mailFrom, `bounces+${returnPathToken(g.t0.app.secret, email.id, 'example.net')}@bounces.sender.dev`, 'the domain tag');
  const dsn = fixture('postfix-dsn-user-unknown.eml', { RETURN_PATH: copies[0]!.mailFrom, RECIPIENT: 'jack@example.net', ORIGINAL: email.raw.toString() });
  t.true((await smtpSend({ port: g.t0.app.listeners.inbound!.port, from: '', to: [copies[0]!.mailFrom], raw: dsn })).ok);
  const rows = await repositoriesOf(g.t0.app).deliveries.listForEmail(email.id);
  t.is(rows.find((r) => r.recipient === 'jack@example.net')!.state, 'bounced');
  t.is(rows.find((r) => r.recipient === 'ivy@example.net')!.state, 'delivered');
});
