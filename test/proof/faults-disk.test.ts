import test from 'ava';
import { sql } from 'kysely';
import { ManualClock } from '../../src/lib/clock.js';
import { groupCommitOf } from '../../src/store/group-commit.js';
import { sqliteStoreOf } from '../helpers/repositories.js';
import { startMailWorld, sendBody, type MailWorld } from '../helpers/mail-world.js';
import { submissionTransport } from '../helpers/submission-client.js';
import { startFaultyMx, type FaultyMx } from './helpers/faulty-mx.js';
import { startFaultyEndpoint, type FaultyEndpoint } from './helpers/faulty-endpoint.js';
import { fullDisk, type FullDisk } from './helpers/full-disk.js';

// Proof: a full disk (SQLite's max_page_count on the app's own connection: real failing
// writes, see helpers/full-disk.ts) loses nothing that was reported accepted, reports
// nothing accepted that was not stored, and does not take the process down. Accepting
// answers 500 INTERNAL_SERVER_ERROR with a message that says the request was not stored
// (the spec's closed vocabulary pairs that code with 500; an SDK sees a server failure it
// may retry, with an Idempotency-Key safely). A delivery whose result cannot be written
// keeps its lease and is sent again when the lease expires (at-least-once); a webhook
// attempt that cannot be recorded likewise. An event's outbox rows are written in the
// transaction of the change it reports, so a change the store refuses is refused with its
// events (nothing is kept in memory to be written later). After "freeing the disk"
// everything accepted is delivered and the service works normally.

const clock = new ManualClock(Date.UTC(2026, 7, 1, 8, 0, 0));
const SLOW_MX = 'mx2.sink.test';
const SLOW_DOMAIN = 'slow.example';
/** More than a database page: storing it always needs a new (overflow) page. */
const BIG = 'x'.repeat(20_000);

let w: MailWorld;
let mx: FaultyMx;
let hook: FaultyEndpoint;
let recordHook: FaultyEndpoint;
let disk: FullDisk;

test.before(async () => {
  w = await startMailWorld({ clock, overrides: { webhooks: { allowPrivate: true, timeoutMs: 30_000 } } });
  mx = await startFaultyMx({ host: '127.0.0.2', port: w.sink.port, name: SLOW_MX, upstream: { host: w.sink.host, port: w.sink.port } });
  w.zone.set(SLOW_MX, 'A', ['127.0.0.2']);
  w.zone.set(SLOW_DOMAIN, 'MX', [{ exchange: SLOW_MX, priority: 10 }]);
  hook = await startFaultyEndpoint();
  recordHook = await startFaultyEndpoint();
  const res = await w.t0.request('POST', '/v1/webhooks', { body: { url: hook.url, eventTypes: ['email.queued', 'email.delivered', 'contact.created'] } });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  disk = fullDisk(w.t0.app);
});
test.after.always(async () => {
  await disk?.free().catch(() => {});
  hook?.release();
  recordHook?.release();
  mx?.dropAll();
  await w?.close();
  await mx?.close();
  await hook?.close();
  await recordHook?.close();
});

/** SMTP submission (RFC 6409) with the API key as the password, as a mail client would. */
function submit(subject: string) {
  const tx = submissionTransport(w.t0);
  return tx.sendMail({ from: `Sender <hello@${w.domain.name}>`, to: 'submitted@example.net', subject, text: BIG }).finally(() => tx.close());
}

const copies = (id: string) => w.sink.messages.filter((m) => m.mailFrom.startsWith(`bounces+${id}_`)).length;
const email = async (id: string) => w.t0.request('GET', `/v1/emails/${id}`);

test.serial('group commit under SQLITE_FULL: a write is reported stored if and only if it is stored', async (t) => {
  const { sqlite } = sqliteStoreOf(w.t0.app);
  sqlite.exec('create table proof_probe (id integer primary key, marker text not null, b blob)');
  await disk.fill();
  try {
    const sync = groupCommitOf(w.t0.app.store.db);
    const sizes = [10, 20_000, 10, 10, 20_000, 10];
    // Queued in one turn: one group commit, in which some items fit and some cannot.
    const settled = await Promise.allSettled(
      sizes.map((size, i) => sync.write(() => sqlite.prepare('insert into proof_probe (marker, b) values (?, ?)').run(`w${i}`, Buffer.alloc(size)).lastInsertRowid)),
    );
    const stored = new Set((sqlite.prepare('select marker from proof_probe').all() as { marker: string }[]).map((r) => r.marker));
    t.log(settled.map((s, i) => `${sizes[i]}:${s.status}:${s.status === 'rejected' ? (s.reason as any).code : ''}:${stored.has(`w${i}`)}`).join(' '));
    settled.forEach((s, i) => {
      t.is(s.status === 'fulfilled', stored.has(`w${i}`), `write ${i} (${sizes[i]} bytes): reported ${s.status}, stored: ${stored.has(`w${i}`)}`);
      if (s.status === 'rejected') t.is((s.reason as { code?: string }).code, 'SQLITE_FULL', 'the real error, not a follow-up one');
    });
    t.true(settled.some((s) => s.status === 'fulfilled'), 'small writes still fit');
    t.true(settled.every((s, i) => (sizes[i]! > 4096 ? s.status === 'rejected' : true)), 'writes that need a page fail');

    // A Kysely transaction that SQLite aborts fails with the real error too (not "cannot rollback").
    const kyselyWrite = w.t0.app.store.db.transaction().execute(async (trx) => {
      await sql`insert into proof_probe (marker, b) values ('k1', ${Buffer.alloc(10)})`.execute(trx);
      await sql`insert into proof_probe (marker, b) values ('k2', ${Buffer.alloc(20_000)})`.execute(trx);
    });
    const failure = await kyselyWrite.then(
      () => undefined,
      (err: unknown) => err as { code?: string },
    );
    t.is(failure?.code, 'SQLITE_FULL');
    t.is((sqlite.prepare(`select count(*) as n from proof_probe where marker in ('k1', 'k2')`).get() as { n: number }).n, 0, 'all or nothing');
  } finally {
    await disk.free();
    sqlite.exec('drop table proof_probe');
  }
});

test.serial('a full disk: sends are refused, not lost; results and webhook records that cannot be written are retried; all is delivered after it is freed', async (t) => {
  // Before: one delivery in flight, held by the MX after its final dot (the MX has the
  // message; its 250 comes later), and one webhook call in flight, held by the endpoint.
  mx.setFault('hold-after-dot');
  const held = (await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: `held@${SLOW_DOMAIN}`, subject: 'held' }) })).body.emailId as string;
  await mx.waitForFaults(1);
  await hook.waitFor(1); // the held email's email.queued
  // An endpoint of its own (no other event will wake it up), holding its one call.
  recordHook.setMode('hang');
  const recordHookId = (await w.t0.request('POST', '/v1/webhooks', { body: { url: recordHook.url, eventTypes: ['domain.updated'] } })).body.id as string;
  t.is((await w.t0.request('PATCH', `/v1/domains/${w.domain.id}`, { body: { openTracking: false } })).status, 200);
  await recordHook.waitFor(1);
  t.is(recordHook.hanging, 1);
  const bookId = (await w.t0.request('POST', '/v1/contactBooks', { body: { name: 'full disk book' } })).body.id as string;
  const listBefore = (await w.t0.request('GET', '/v1/emails?limit=100')).body;

  const { pages } = await disk.fill();
  t.true(pages > 0);

  // 1. Sends that need room are refused with the spec's error body, and are not stored.
  for (let i = 0; i < 3; i++) {
    const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { subject: `big ${i}`, text: BIG }) });
    t.is(res.status, 500, 'not 2xx: the message was not stored');
    t.is(res.body.error.code, 'INTERNAL_SERVER_ERROR');
    t.regex(res.body.error.message, /stor/i, 'the message says it could not be stored');
  }
  // With an Idempotency-Key: refused, so the key stays free for the client's retry (below).
  const idemBody = sendBody(w, { to: 'idem@example.net', subject: 'idempotent while full', text: BIG });
  const idemHeaders = { 'idempotency-key': 'full-disk-1' };
  t.is((await w.t0.request('POST', '/v1/emails', { body: idemBody, headers: idemHeaders })).status, 500);
  // SMTP submission: a transient 4xx (RFC 5321 4.2.5), so the client keeps the message; never a 250.
  const submitted = await submit('submitted while full').then(
    () => undefined,
    (err: { responseCode?: number }) => err,
  );
  t.truthy(submitted, 'submission did not answer 250');
  t.true(submitted!.responseCode! >= 400 && submitted!.responseCode! < 500, `a transient refusal (${submitted?.responseCode})`);
  // Small sends may still fit: each is either accepted and stored, or refused and not stored.
  const accepted: string[] = [];
  for (let i = 0; i < 8; i++) {
    const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: `small${i}@example.net`, subject: `small ${i}` }) });
    t.true(res.status === 200 || res.status === 500, `small ${i}: ${res.status}`);
    if (res.status === 200) {
      accepted.push(res.body.emailId);
      t.is((await email(res.body.emailId)).status, 200, 'accepted means stored');
    } else t.is(res.body.error.code, 'INTERNAL_SERVER_ERROR');
  }
  const listDuring = (await w.t0.request('GET', '/v1/emails?limit=100')).body;
  t.is(listDuring.count, listBefore.count + accepted.length, 'nothing refused was stored');

  // 2. The held delivery is answered now (a long final reply: its record needs a new page), so its result cannot be written.
  t.is(mx.release(['250-2.0.0 Ok: queued', ...Array.from({ length: 30 }, (_, i) => `250-${String(i).padStart(2, '0')} ${'y'.repeat(400)}`), '250 2.0.0 Ok']), 1);
  // 3. The held webhook call is answered with a body that is kept (4 KB): its attempt record cannot be written.
  recordHook.setMode('ok');
  t.is(recordHook.release(200, 'z'.repeat(8000)), 1);
  // 4. A contact (and so its contact.created) that needs room: the change and its outbox rows
  // are refused together, with the store error; neither is stored.
  const bigProperties = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`p${i}`, 'v'.repeat(2000)]));
  const bigContact = { email: 'big@example.net', properties: bigProperties };
  const refusedContact = await w.t0.request('POST', `/v1/contactBooks/${bookId}/contacts`, { body: bigContact });
  t.is(refusedContact.status, 500);
  t.is(refusedContact.body.error.code, 'INTERNAL_SERVER_ERROR');
  t.deepEqual((await w.t0.request('GET', `/v1/contactBooks/${bookId}/contacts`)).body, [], 'the contact was not stored');
  const contactEvents = () =>
    (sqliteStoreOf(w.t0.app).sqlite.prepare("select body from webhook_events where type = 'contact.created'").all() as { body: string }[]).filter((r) => r.body.includes('big@example.net')).length;
  t.is(contactEvents(), 0, 'nor its contact.created');
  await w.settle();

  t.is(copies(held), 1, 'the MX has the held message');
  t.not((await email(held)).body.latestStatus, 'DELIVERED', 'its result could not be recorded while full');
  // The process is up and serves reads; time passes with the disk still full.
  for (let minute = 0; minute < 3; minute++) {
    clock.advance(61_000);
    await w.settle();
    t.is((await w.t0.request('GET', '/health')).status, 200);
    t.is((await email(held)).status, 200, 'reads work while full');
  }

  // Freed.
  await disk.free();
  mx.setFault('none');
  clock.advance(11 * 60_000); // past the delivery lease (10 min) and the webhook lease (5 min)
  await w.settle();
  await w.t0.app.webhookDispatcher.whenIdle();
  await w.settle();

  const e = (await email(held)).body;
  t.is(e.latestStatus, 'DELIVERED', 'the held delivery was retried after its lease and recorded');
  t.is(copies(held), 2, 'at-least-once: the first copy was accepted by the MX but could not be recorded');
  for (const id of accepted) {
    t.is((await email(id)).body.latestStatus, 'DELIVERED', `${id}, accepted while full, is delivered`);
    t.true(copies(id) >= 1 && copies(id) <= 2, `${id}: at least once`);
    t.true(hook.calls.some((c) => c.type === 'email.queued' && c.dataId === id), `${id}: its email.queued reached the webhook`);
  }
  t.true(hook.calls.some((c) => c.type === 'email.delivered' && c.dataId === held));
  t.is(recordHook.calls.length, 2, 'the webhook call whose attempt could not be recorded was sent again after its lease');
  t.is(recordHook.calls[1]!.eventId, recordHook.calls[0]!.eventId);
  const recorded = (await w.t0.request('GET', `/v1/webhooks/${recordHookId}/attempts`)).body.attempts as any[];
  t.deepEqual(
    recorded.map((a) => [a.attempt, a.status]),
    [[1, 'SUCCEEDED']],
    'the attempt made while full left no record; the retry is on record',
  );
  t.false(w.sink.messages.some((m) => m.raw.includes(Buffer.from('big 0'))), 'a refused send never went out');

  // The client's retries after the disk was freed: one email each, whatever the number of retries.
  const idem1 = await w.t0.request('POST', '/v1/emails', { body: idemBody, headers: idemHeaders });
  const idem2 = await w.t0.request('POST', '/v1/emails', { body: idemBody, headers: idemHeaders });
  t.is(idem1.status, 200);
  t.deepEqual(idem2.body, idem1.body, 'the retry replays the first answer');
  const resubmitted = await submit('submitted while full');
  t.regex(resubmitted.response, /^250/);
  await w.settle();
  t.is(copies(idem1.body.emailId), 1);
  t.is(w.sink.messages.filter((m) => m.raw.includes(Buffer.from('Subject: submitted while full'))).length, 1, 'the resubmitted message, once');

  // Normal service again.
  const after = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'after@example.net', subject: 'after', text: BIG }) });
  t.is(after.status, 200);
  await w.settle();
  t.is((await email(after.body.emailId)).body.latestStatus, 'DELIVERED');
  t.is(copies(after.body.emailId), 1);
  // The refused contact, sent again: stored with its contact.created, which is delivered.
  const contact = await w.t0.request('POST', `/v1/contactBooks/${bookId}/contacts`, { body: bigContact });
  t.is(contact.status, 200);
  t.is(contactEvents(), 1);
  await w.t0.app.webhookDispatcher.whenIdle();
  t.true(hook.calls.some((c) => c.type === 'contact.created' && c.dataId === contact.body.contactId), 'its contact.created reached the webhook');
});
