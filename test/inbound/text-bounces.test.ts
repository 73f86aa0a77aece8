import { repositoriesOf } from '../helpers/repositories.js';
import test from 'ava';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { fixture, smtpSend } from './helpers/smtp-client.js';
import { collectEvents, sendAndDeliver } from './helpers/inbound-world.js';
import type { BusEvent } from '../../src/core/events.js';

// Plain-text bounces (not RFC 3464 DSNs) at the VERP return path: Exim's with X-Failed-Recipients,
// qmail's, a text delay notice from the null reverse-path. Recognised conservatively: an
// auto-reply never bounces, and an address the email was not sent to is ignored.

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

async function suppression(address: string) {
  return repositoriesOf(w.t0.app).suppressions.get(w.t0.teamId, address);
}

test.serial('an Exim bounce (X-Failed-Recipients, text/plain) bounces the email and suppresses the recipient, marked as a text bounce', async (t) => {
  const email = await sendAndDeliver(w, { to: 'ghost@example.net', subject: 'Exim bounce' });
  const raw = fixture('exim-text-bounce.eml', { RETURN_PATH: email.returnPath, RECIPIENT: 'ghost@example.net', ORIGINAL: email.raw.toString() });
  const res = await smtpSend({ port: inboundPort, from: '', to: [email.returnPath], raw });
  t.true(res.ok, res.response);

  const got = await w.t0.request('GET', `/v1/emails/${email.id}`);
  t.is(got.body.latestStatus, 'BOUNCED');
  const bounced = got.body.emailEvents.find((e: any) => e.status === 'BOUNCED');
  t.is(bounced.data.recipient, 'ghost@example.net');
  t.is(bounced.data.source, 'text', 'operators can tell it was not a DSN');
  t.is(bounced.data.smtpCode, 550);
  t.is(bounced.data.bounce.type, 'Permanent');
  t.is(bounced.data.text.evidence, 'x-failed-recipients');
  t.is(bounced.data.text.status, '5.1.1');
  t.regex(bounced.data.response, /User unknown in local recipient table/);

  const [row] = await deliveryRows(email.id);
  t.is(row!.state, 'bounced');
  t.is(row!.last_code, 550);
  t.regex(row!.last_response!, /^text bounce: 550 5\.1\.1/);
  t.is((await suppression('ghost@example.net'))?.reason, 'HARD_BOUNCE');
  t.truthy(events.find((e) => e.type === 'email.bounced' && e.data.id === email.id));

  const reports = await w.t0.app.inbound.reportsRepo.listForEmail(email.id);
  t.is(reports.length, 1);
  t.is(reports[0]!.kind, 'bounce');
  t.is(reports[0]!.linked_by, 'verp');
});

test.serial('a qmail bounce from the null reverse-path ("(#5.1.1)" next to the address) bounces and suppresses', async (t) => {
  const email = await sendAndDeliver(w, { to: 'gone@example.org', subject: 'qmail bounce' });
  const raw = fixture('qmail-text-bounce.eml', { RETURN_PATH: email.returnPath, RECIPIENT: 'gone@example.org', ORIGINAL: email.raw.toString() });
  const res = await smtpSend({ port: inboundPort, from: '', to: [email.returnPath], raw });
  t.true(res.ok, res.response);

  const got = await w.t0.request('GET', `/v1/emails/${email.id}`);
  t.is(got.body.latestStatus, 'BOUNCED');
  const bounced = got.body.emailEvents.find((e: any) => e.status === 'BOUNCED');
  t.is(bounced.data.recipient, 'gone@example.org');
  t.is(bounced.data.source, 'text');
  t.is(bounced.data.bounce.type, 'Permanent');
  t.is(bounced.data.text.evidence, 'bounce-text');
  t.is(bounced.data.text.status, '5.1.1');
  t.is(bounced.data.text.reportingMta, 'mail.example.org');
  const [row] = await deliveryRows(email.id);
  t.is(row!.state, 'bounced');
  t.regex(row!.last_response!, /^text bounce \(reported by mail\.example\.org\): /);
  t.is((await suppression('gone@example.org'))?.reason, 'HARD_BOUNCE');
});

test.serial('the same qmail text from a non-null reverse-path is not a bounce', async (t) => {
  const email = await sendAndDeliver(w, { to: 'kept@example.org', subject: 'qmail text from a person' });
  const raw = fixture('qmail-text-bounce.eml', { RETURN_PATH: email.returnPath, RECIPIENT: 'kept@example.org', ORIGINAL: email.raw.toString() });
  const res = await smtpSend({ port: inboundPort, from: 'someone@example.org', to: [email.returnPath], raw });
  t.true(res.ok, res.response);
  const got = await w.t0.request('GET', `/v1/emails/${email.id}`);
  t.is(got.body.latestStatus, 'DELIVERED');
  t.is(await suppression('kept@example.org'), undefined);
});

test.serial('a text delay notice with a 4xx reply next to the address is a delay, not a bounce', async (t) => {
  const email = await sendAndDeliver(w, { to: 'slow@example.net', subject: 'text delay' });
  const raw = fixture('text-delay-notice.eml', { RETURN_PATH: email.returnPath, RECIPIENT: 'slow@example.net' });
  const res = await smtpSend({ port: inboundPort, from: '', to: [email.returnPath], raw });
  t.true(res.ok, res.response);
  const got = await w.t0.request('GET', `/v1/emails/${email.id}`);
  t.is(got.body.latestStatus, 'DELIVERED', 'DELIVERY_DELAYED ranks below DELIVERED');
  t.false(got.body.emailEvents.some((e: any) => e.status === 'BOUNCED'));
  const delayed = got.body.emailEvents.find((e: any) => e.status === 'DELIVERY_DELAYED');
  t.truthy(delayed, 'a DELIVERY_DELAYED event was recorded');
  t.is(delayed.data.source, 'text');
  t.is(delayed.data.smtpCode, 451);
  const [row] = await deliveryRows(email.id);
  t.is(row!.state, 'delivered');
  t.regex(row!.last_response!, /^delayed text bounce: 451 4\.3\.0/);
  t.is(await suppression('slow@example.net'), undefined);
  const reports = await w.t0.app.inbound.reportsRepo.listForEmail(email.id);
  t.is(reports[0]!.kind, 'delay');
});

test.serial('an out-of-office auto-reply from the null reverse-path never bounces, even with a 5xx next to the address', async (t) => {
  const email = await sendAndDeliver(w, { to: 'away@example.net', subject: 'auto-reply' });
  const raw = fixture('out-of-office-reply.eml', { RETURN_PATH: email.returnPath, RECIPIENT: 'away@example.net' });
  const res = await smtpSend({ port: inboundPort, from: '', to: [email.returnPath], raw });
  t.true(res.ok, res.response);
  const got = await w.t0.request('GET', `/v1/emails/${email.id}`);
  t.is(got.body.latestStatus, 'DELIVERED');
  t.false(got.body.emailEvents.some((e: any) => e.status === 'BOUNCED' || e.status === 'DELIVERY_DELAYED'));
  const [row] = await deliveryRows(email.id);
  t.is(row!.state, 'delivered');
  t.is(await suppression('away@example.net'), undefined);
});

test.serial('an Exim bounce naming an address the email was not sent to is ignored, even with one recipient', async (t) => {
  const email = await sendAndDeliver(w, { to: 'real@example.net', subject: 'wrong address' });
  const raw = fixture('exim-text-bounce.eml', { RETURN_PATH: email.returnPath, RECIPIENT: 'stranger@example.com', ORIGINAL: email.raw.toString() });
  const res = await smtpSend({ port: inboundPort, from: '', to: [email.returnPath], raw });
  t.true(res.ok, res.response);
  const got = await w.t0.request('GET', `/v1/emails/${email.id}`);
  t.is(got.body.latestStatus, 'DELIVERED');
  const [row] = await deliveryRows(email.id);
  t.is(row!.state, 'delivered');
  t.is(await suppression('real@example.net'), undefined);
  t.is(await suppression('stranger@example.com'), undefined);
  const reports = await w.t0.app.inbound.reportsRepo.listForEmail(email.id);
  t.is(reports.length, 1, 'the report is kept');
});

test.serial('a German text bounce ("Benutzer unbekannt" after a bare 550) at the return path bounces and suppresses; a German out-of-office does not', async (t) => {
  const text = (subject: string, body: string[]) =>
    Buffer.from([`Subject: ${subject}`, 'MIME-Version: 1.0', 'Content-Type: text/plain; charset=utf-8', 'Content-Transfer-Encoding: 8bit', '', ...body, ''].join('\r\n'), 'utf8');
  const email = await sendAndDeliver(w, { to: 'weg@example.net', subject: 'German bounce' });
  const body = ['Ihre Nachricht konnte nicht zugestellt werden an:', '', '  weg@example.net', '    550 Benutzer unbekannt'];
  const away = await sendAndDeliver(w, { to: 'urlaub@example.net', subject: 'German out-of-office' });
  const res = await smtpSend({ port: inboundPort, from: '', to: [away.returnPath], raw: text('Automatische Antwort: Hallo', ['Ich bin bis Montag nicht im Büro.', '', '  urlaub@example.net', '    550 Benutzer unbekannt']) });
  t.true(res.ok, res.response);
  t.true((await smtpSend({ port: inboundPort, from: '', to: [email.returnPath], raw: text('Unzustellbar: German bounce', body) })).ok);

  const got = await w.t0.request('GET', `/v1/emails/${email.id}`);
  t.is(got.body.latestStatus, 'BOUNCED');
  const bounced = got.body.emailEvents.find((e: any) => e.status === 'BOUNCED');
  t.like(bounced.data, { recipient: 'weg@example.net', source: 'text', smtpCode: 550 });
  t.is(bounced.data.bounce.type, 'Permanent');
  t.is((await suppression('weg@example.net'))?.reason, 'HARD_BOUNCE');

  t.is((await w.t0.request('GET', `/v1/emails/${away.id}`)).body.latestStatus, 'DELIVERED');
  t.is(await suppression('urlaub@example.net'), undefined);
});
