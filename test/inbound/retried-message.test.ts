import test from 'ava';
import { sql } from 'kysely';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { sampleTlsReport, signedTlsReportMail } from '../helpers/tls-report-mail.js';
import { startWebhookReceiver, type WebhookReceiver } from '../webhooks/webhook-receiver.js';
import { fixture, smtpSend, type SendResult } from './helpers/smtp-client.js';
import { collectEvents, sendAndDeliver } from './helpers/inbound-world.js';
import type { BusEvent } from '../../src/core/events.js';

// A message the sending MTA retries (RFC 5321 4.5.4.1: after a 4xx, or when our 250 never
// reached it) is the same message again: whatever its first attempt already committed (a
// bounce, a complaint, a TLS report, a received copy) is not recorded a second time, and what
// the first attempt could not store is stored by the retry. The store's refusal is a trigger
// on received_emails (as a full disk or a lock timeout would refuse it), on SQLite and, with
// POSTHORN_TEST_STORE=postgres, on PostgreSQL.

let w: MailWorld;
let port: number;
let inbox: any;
let hooks: WebhookReceiver;
let events: BusEvent[];
const COMPLAINTS = 'complaints@mx.posthorn.test';
const SUPPORT = 'support@inbox.dev';

test.before(async () => {
  w = await startMailWorld({ overrides: { webhooks: { allowPrivate: true } } });
  port = w.t0.app.listeners.inbound!.port;
  inbox = await addVerifiedDomain(w.t0, 'inbox.dev');
  const on = await w.t0.request('PATCH', `/v1/domains/${inbox.id}`, { body: { receiving: true } });
  if (on.status !== 200) throw new Error(JSON.stringify(on.body));
  hooks = await startWebhookReceiver();
  const hook = await w.t0.request('POST', '/v1/webhooks', { body: { url: hooks.url, eventTypes: ['email.bounced', 'email.complained', 'email.received'] } });
  if (hook.status !== 200) throw new Error(JSON.stringify(hook.body));
  events = collectEvents(w, ['email.bounced', 'email.complained', 'email.received']);
});
test.after.always(async () => {
  await refuseReceived(false).catch(() => {});
  await w?.close();
  await hooks?.close();
});

/** Makes the store refuse (or accept again) every received-message write, on either engine. */
async function refuseReceived(refuse: boolean): Promise<void> {
  const db = w.t0.app.store.db;
  const pg = w.t0.app.store.kind === 'postgres';
  if (!refuse) {
    await sql.raw(pg ? 'drop trigger if exists refuse_received on received_emails' : 'drop trigger if exists refuse_received').execute(db);
    return;
  }
  if (pg) {
    await sql.raw(`create or replace function refuse_received() returns trigger language plpgsql as $$ begin raise exception 'received email refused by the test'; end $$`).execute(db);
    await sql.raw('create trigger refuse_received before insert on received_emails for each row execute function refuse_received()').execute(db);
  } else {
    await sql.raw(`create trigger refuse_received before insert on received_emails begin select raise(abort, 'received email refused by the test'); end`).execute(db);
  }
}

/** Sends once with the received copy refused (451: the sender keeps it), then retries it as an MTA would. */
async function sendRefusedThenRetry(from: string, to: string[], raw: Buffer): Promise<SendResult> {
  await refuseReceived(true);
  let first: SendResult;
  try {
    first = await smtpSend({ port, from, to, raw });
  } finally {
    await refuseReceived(false);
  }
  if (first.ok || first.responseCode !== 451) throw new Error(`the first attempt should be deferred with 451, got ${first.response}`);
  return smtpSend({ port, from, to, raw });
}

const db = () => w.t0.app.store.db;
const statusEvents = async (id: string, status: string) => ((await w.t0.request('GET', `/v1/emails/${id}`)).body.emailEvents as { status: string }[]).filter((e) => e.status === status).length;
const busEvents = (type: string, id: string) => events.filter((e) => e.type === type && e.data.id === id).length;
/** Webhook outbox rows (one per event and team) of a type that mention `text`. */
async function outboxRows(type: string, text: string): Promise<number> {
  const rows = await db().selectFrom('webhook_events').select('body').where('team_id', '=', w.t0.teamId).where('type', '=', type).execute();
  return rows.filter((r) => r.body.includes(text)).length;
}
async function dailyCount(column: 'bounced' | 'complained'): Promise<number> {
  const rows = await db().selectFrom('email_daily_stats').select(column).where('team_id', '=', w.t0.teamId).execute();
  return rows.reduce((n, r) => n + Number(r[column]), 0);
}
async function receivedWithSubject(subject: string): Promise<number> {
  const list = (await w.t0.request('GET', `/v1/receivedEmails?limit=100`)).body;
  return (list.receivedEmails as any[]).filter((m: any) => m.subject === subject).length;
}

test.serial('a DSN also sent to a receiving domain, deferred because the received copy failed, bounces once when retried', async (t) => {
  const email = await sendAndDeliver(w, { to: 'ghost@example.net', subject: 'Retried bounce' });
  const dsn = fixture('postfix-dsn-user-unknown.eml', { RETURN_PATH: email.returnPath, RECIPIENT: 'ghost@example.net', ORIGINAL: email.raw.toString() });
  const bouncedBefore = await dailyCount('bounced');

  const retry = await sendRefusedThenRetry('', [email.returnPath, SUPPORT], dsn);
  t.true(retry.ok, retry.response);

  t.is((await w.t0.app.inbound.reportsRepo.listForEmail(email.id)).length, 1, 'one report row');
  t.is(await statusEvents(email.id, 'BOUNCED'), 1, 'one BOUNCED event');
  t.is(busEvents('email.bounced', email.id), 1, 'email.bounced announced once');
  t.is(await outboxRows('email.bounced', email.id), 1, 'one webhook event in the outbox');
  t.is((await dailyCount('bounced')) - bouncedBefore, 1, 'the bounce counted once');
  t.is(await receivedWithSubject('Undelivered Mail Returned to Sender'), 1, 'the received copy is stored by the retry');
});

test.serial('an ARF complaint also sent to a receiving domain complains once when retried', async (t) => {
  const email = await sendAndDeliver(w, { to: 'annoyed@example.net', subject: 'Retried complaint' });
  const arf = fixture('yahoo-arf-abuse.eml', {
    REPORT_TO: COMPLAINTS,
    SUBJECT: email.subject,
    RETURN_PATH: email.returnPath,
    RECIPIENT: 'annoyed@example.net',
    ORIGINAL: email.raw.toString(),
  });
  const complainedBefore = await dailyCount('complained');

  const retry = await sendRefusedThenRetry('feedback@arf.mail.yahoo.com', [COMPLAINTS, SUPPORT], arf);
  t.true(retry.ok, retry.response);

  t.is((await w.t0.app.inbound.reportsRepo.listForEmail(email.id)).length, 1, 'one report row');
  t.is(await statusEvents(email.id, 'COMPLAINED'), 1, 'one COMPLAINED event');
  t.is(busEvents('email.complained', email.id), 1, 'email.complained announced once');
  t.is(await outboxRows('email.complained', email.id), 1, 'one webhook event in the outbox');
  t.is((await dailyCount('complained')) - complainedBefore, 1, 'the complaint counted once');
});

test.serial('a TLS report also sent to a receiving domain is stored once when retried, and the received copy too', async (t) => {
  const to = `tlsrpt+${inbox.id}@mx.posthorn.test`;
  const mail = await signedTlsReportMail(w.zone, to, sampleTlsReport('inbox.dev', { reportId: 'retried-1' }));
  const retry = await sendRefusedThenRetry('noreply-smtp-tls-reporting@company-x.example', [to, SUPPORT], mail);
  t.true(retry.ok, retry.response);
  const reports = (await w.t0.request('GET', `/v1/tlsReports?domainId=${inbox.id}`)).body.tlsReports.filter((r: any) => r.reportId === 'retried-1');
  t.is(reports.length, 1);
  t.is(await receivedWithSubject('Report Domain: example Submitter: company-x.example Report-ID: <5065427c@company-x.example>'), 1);
});

test.serial('a report whose 250 never reached the sender is recorded once when it comes again', async (t) => {
  const email = await sendAndDeliver(w, { to: 'gone@example.net', subject: 'Lost reply' });
  const dsn = fixture('postfix-dsn-user-unknown.eml', { RETURN_PATH: email.returnPath, RECIPIENT: 'gone@example.net', ORIGINAL: email.raw.toString() });
  const first = await smtpSend({ port, from: '', to: [email.returnPath], raw: dsn });
  t.true(first.ok, first.response);
  const again = await smtpSend({ port, from: '', to: [email.returnPath], raw: dsn });
  t.true(again.ok, again.response);
  t.is((await w.t0.app.inbound.reportsRepo.listForEmail(email.id)).length, 1);
  t.is(await statusEvents(email.id, 'BOUNCED'), 1);
  t.is(busEvents('email.bounced', email.id), 1);
});

test.serial('a received message whose 250 never reached the sender is stored once when it comes again', async (t) => {
  const raw = Buffer.from('From: Someone <someone@remote.example>\r\nTo: support@inbox.dev\r\nSubject: Said twice\r\nMessage-ID: <twice-1@remote.example>\r\n\r\nhello\r\n');
  const first = await smtpSend({ port, from: 'someone@remote.example', to: [SUPPORT], raw });
  const again = await smtpSend({ port, from: 'someone@remote.example', to: [SUPPORT], raw });
  t.true(first.ok && again.ok, again.response);
  t.is(await receivedWithSubject('Said twice'), 1);
  const id = /queued as (re_\S+)/.exec(first.response)?.[1];
  t.truthy(id);
  t.is(/queued as (re_\S+)/.exec(again.response)?.[1], id, 'the retry is told the id of the stored copy');
  t.is(busEvents('email.received', id!), 1);
});

test.serial('the same bytes for other recipients are another delivery: each is stored (a sender splitting recipients, Bcc copies)', async (t) => {
  const other = await addVerifiedDomain(w.t0, 'desk.dev');
  await w.t0.request('PATCH', `/v1/domains/${other.id}`, { body: { receiving: true } });
  const raw = Buffer.from('From: Someone <someone@remote.example>\r\nTo: support@inbox.dev\r\nSubject: Split\r\nMessage-ID: <split-1@remote.example>\r\n\r\nhello\r\n');
  for (const to of [SUPPORT, 'sales@inbox.dev', 'help@desk.dev']) t.true((await smtpSend({ port, from: 'someone@remote.example', to: [to], raw })).ok);
  const copies = (await w.t0.request('GET', `/v1/receivedEmails?limit=100`)).body.receivedEmails.filter((m: any) => m.subject === 'Split');
  t.deepEqual(copies.map((m: any) => m.envelope.rcptTo[0]).sort(), ['help@desk.dev', 'sales@inbox.dev', SUPPORT]);
});
