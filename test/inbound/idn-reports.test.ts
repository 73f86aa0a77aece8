import { repositoriesOf } from '../helpers/repositories.js';
import test from 'ava';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { fixture, smtpSend } from './helpers/smtp-client.js';
import { collectEvents, sendAndDeliver } from './helpers/inbound-world.js';
import type { BusEvent } from '../../src/core/events.js';

// Bounces and complaints about a recipient at an internationalised domain, the report naming
// the recipient in Unicode or in A-labels: one mailbox, suppressed under its A-label key.

let w: MailWorld;
let inboundPort: number;
let events: BusEvent[];
const COMPLAINTS = 'complaints@mx.posthorn.test';

test.before(async () => {
  w = await startMailWorld();
  inboundPort = w.t0.app.listeners.inbound!.port;
  w.addRecipientDomain('xn--bcher-kva.example');
  events = collectEvents(w, ['email.bounced', 'email.complained']);
});
test.after.always(async () => {
  await w?.close();
});

const suppression = (key: string) => repositoriesOf(w.t0.app).suppressions.get(w.t0.teamId, key);

for (const [named, recipient] of [
  ['in Unicode', 'Leser@Bücher.example'],
  ['in A-labels', 'leser2@xn--bcher-kva.example'],
] as const) {
  test.serial(`a hard-bounce DSN naming an IDN recipient ${named} bounces the email and suppresses the A-label key`, async (t) => {
    const to = named === 'in Unicode' ? 'leser@bücher.example' : 'Leser2@BÜCHER.example';
    const email = await sendAndDeliver(w, { to, subject: `IDN DSN ${named}` });
    const dsn = fixture('postfix-dsn-user-unknown.eml', { RETURN_PATH: email.returnPath, RECIPIENT: recipient, ORIGINAL: email.raw.toString() });
    const utf8 = named === 'in Unicode' ? Buffer.from(dsn.toString().replaceAll('rfc822;', 'utf-8;')) : dsn;
    const res = await smtpSend({ port: inboundPort, from: '', to: [email.returnPath], raw: utf8 });
    t.true(res.ok, res.response);
    const got = await w.t0.request('GET', `/v1/emails/${email.id}`);
    t.is(got.body.latestStatus, 'BOUNCED');
    const bounced = got.body.emailEvents.find((e: any) => e.status === 'BOUNCED');
    const key = named === 'in Unicode' ? 'leser@xn--bcher-kva.example' : 'leser2@xn--bcher-kva.example';
    t.is(bounced.data.recipient.toLowerCase(), key, 'the event names the mailbox as the delivery holds it');
    t.is((await suppression(key))?.reason, 'HARD_BOUNCE');
    const announced = events.find((e) => e.data.id === email.id && e.type === 'email.bounced');
    t.is((announced?.data.recipient as string | undefined)?.toLowerCase(), key, 'the webhook names the A-label mailbox');
    // The next send, written in the other form, is stopped.
    const again = await w.t0.request('POST', '/v1/emails', { body: { from: `hello@${w.domain.name}`, to: named === 'in Unicode' ? 'LESER@xn--bcher-kva.example' : 'leser2@bücher.example', subject: 'x', text: 'x' } });
    t.is((await w.t0.request('GET', `/v1/emails/${again.body.emailId}`)).body.latestStatus, 'SUPPRESSED');
  });
}

test.serial('an ARF complaint naming an IDN recipient in Unicode marks COMPLAINED and suppresses the A-label key', async (t) => {
  const email = await sendAndDeliver(w, { to: ['kunde@xn--bcher-kva.example', 'zufrieden@example.net'], subject: 'IDN complaint' });
  // The sink (smtp-server) reports an A-label RCPT TO in Unicode.
  const copy = w.sink.messages.find((m) => m.rcptTo.includes('kunde@bücher.example') && m.raw.toString().includes(email.id))!;
  const arf = fixture('yahoo-arf-abuse.eml', { REPORT_TO: COMPLAINTS, SUBJECT: email.subject, RETURN_PATH: copy.mailFrom, RECIPIENT: 'Kunde@BÜCHER.example', ORIGINAL: copy.raw.toString() });
  const res = await smtpSend({ port: inboundPort, from: 'feedback@arf.mail.yahoo.com', to: [COMPLAINTS], raw: arf });
  t.true(res.ok, res.response);
  const got = await w.t0.request('GET', `/v1/emails/${email.id}`);
  t.is(got.body.latestStatus, 'COMPLAINED');
  const complained = got.body.emailEvents.find((e: any) => e.status === 'COMPLAINED');
  t.is(complained.data.recipient, 'kunde@xn--bcher-kva.example');
  t.is((await suppression('kunde@xn--bcher-kva.example'))?.reason, 'COMPLAINT');
  t.is(await suppression('zufrieden@example.net'), undefined);
  t.truthy(events.find((e) => e.data.id === email.id && e.type === 'email.complained'));
});

test.serial('an ARF complaint at the upper-cased complaint address naming an IDN recipient in A-labels, sent to in Unicode, is taken', async (t) => {
  const email = await sendAndDeliver(w, { to: 'fan@bücher.example', subject: 'IDN complaint 2' });
  const arf = fixture('yahoo-arf-abuse.eml', { REPORT_TO: COMPLAINTS, SUBJECT: email.subject, RETURN_PATH: email.returnPath, RECIPIENT: 'fan@xn--bcher-kva.example', ORIGINAL: email.raw.toString() });
  const res = await smtpSend({ port: inboundPort, from: 'feedback@arf.mail.yahoo.com', to: [COMPLAINTS.toUpperCase()], raw: arf });
  t.true(res.ok, res.response);
  t.is((await suppression('fan@xn--bcher-kva.example'))?.reason, 'COMPLAINT');
});
