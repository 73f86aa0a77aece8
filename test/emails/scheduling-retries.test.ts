import { repositoriesOf } from '../helpers/repositories.js';
import test from 'ava';
import { request as httpRequest } from 'node:http';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld, sendBody, type MailWorld } from '../helpers/mail-world.js';
import { startHostileMx } from '../proof/helpers/hostile-mx.js';
import { wellBehavedScript } from '../proof/helpers/mx-arbitraries.js';

const clock = new ManualClock(Date.UTC(2026, 10, 22, 8, 0, 0));
let w: MailWorld;
test.before(async () => {
  w = await startMailWorld({ clock });
});
test.after.always(async () => {
  await w?.close();
});

const get = async (id: string) => (await w.t0.request('GET', `/v1/emails/${id}`)).body;

test.serial('idempotency: same key and body replays; another body is 409; in flight is 409; entries expire after 24 h', async (t) => {
  const body = sendBody(w, { to: 'idem@example.net', tags: ['a'] });
  const headers = { 'idempotency-key': 'order-1001' };
  const first = await w.t0.request('POST', '/v1/emails', { body, headers });
  t.is(first.status, 200);
  // Same body with another key order and whitespace: the original answer, nothing new stored.
  const reordered = `{ "tags": ["a"],   "text": ${JSON.stringify(body.text)}, "subject": "Hello", "to": "idem@example.net", "from": ${JSON.stringify(body.from)} }`;
  const replay = await w.t0.request('POST', '/v1/emails', { rawBody: reordered, headers });
  t.is(replay.status, 200);
  t.deepEqual(replay.body, first.body);
  const count = (await w.t0.request('GET', '/v1/emails?tag=a')).body.count;
  t.is(count, 1);
  const different = await w.t0.request('POST', '/v1/emails', { body: { ...body, subject: 'Other' }, headers });
  t.is(different.status, 409);
  t.is(different.body.error.code, 'NOT_UNIQUE');
  // A request holding the key (in flight) makes a concurrent one 409.
  const repo = (await import('../../src/store/repositories/idempotency-repository.js')).createIdempotencyRepository(w.t0.app.store.db);
  await repo.begin(w.t0.teamId, 'in-flight-key', 'somehash', clock.nowMs(), 86_400_000);
  const inFlight = await w.t0.request('POST', '/v1/emails', { body, headers: { 'idempotency-key': 'in-flight-key' } });
  t.is(inFlight.status, 409);
  t.regex(inFlight.body.error.message, /in progress/);
  // Batch uses the same rules.
  const batch1 = await w.t0.request('POST', '/v1/emails/batch', { body: [body, body], headers: { 'idempotency-key': 'batch-1' } });
  const batch2 = await w.t0.request('POST', '/v1/emails/batch', { body: [body, body], headers: { 'idempotency-key': 'batch-1' } });
  t.deepEqual(batch2.body, batch1.body);
  // Key length 1..256.
  t.is((await w.t0.request('POST', '/v1/emails', { body, headers: { 'idempotency-key': 'k'.repeat(257) } })).status, 400);
  // Sent but empty is a client bug, not "no key": refused rather than sent without idempotency.
  const empty = await w.t0.request('POST', '/v1/emails', { body, headers: { 'idempotency-key': '' } });
  t.is(empty.status, 400);
  t.regex(empty.body.error.message, /^Idempotency-Key: must be 1 to 256 characters/);
  // Two header lines are two keys, not one key "a, b".
  // (node:http, which sends an array as separate lines; fetch joins them itself.)
  const twice = await new Promise<{ status: number; body: any }>((resolve, reject) => {
    const req = httpRequest(`${w.t0.baseUrl}/v1/emails`, { method: 'POST', headers: { authorization: `Bearer ${w.t0.key}`, 'content-type': 'application/json', 'idempotency-key': ['a', 'b'] } }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
  t.is(twice.status, 400);
  t.regex(twice.body.error.message, /^Idempotency-Key: must be given once/);
  // After 24 hours the key is free again: a new email.
  clock.advance(24 * 3600 * 1000 + 1);
  const later = await w.t0.request('POST', '/v1/emails', { body, headers });
  t.is(later.status, 200);
  t.not(later.body.emailId, first.body.emailId);
  // A request still in flight keeps its key however long it takes (taking it over would let
  // two requests send); only a restart releases it.
  t.is((await w.t0.request('POST', '/v1/emails', { body, headers: { 'idempotency-key': 'in-flight-key' } })).status, 409);
  // Expired entries are deleted (hourly cron), completed ones only.
  const keys = async () => (await w.t0.app.store.db.selectFrom('idempotency_keys').select('key').where('team_id', '=', w.t0.teamId).execute()).map((r) => r.key).sort();
  t.true((await keys()).includes('batch-1'));
  clock.advance(24 * 3600 * 1000 + 1);
  t.true((await w.t0.app.services.emails.purgeExpiredIdempotencyKeys()) >= 2);
  t.deepEqual(await keys(), ['in-flight-key']);
  await repo.abandon(w.t0.teamId, 'in-flight-key');
  // A failed request is not remembered.
  const failing = await w.t0.request('POST', '/v1/emails', { body: { ...body, from: 'x@unknown.dev' }, headers: { 'idempotency-key': 'fails' } });
  t.is(failing.status, 403);
  const retry = await w.t0.request('POST', '/v1/emails', { body, headers: { 'idempotency-key': 'fails' } });
  t.is(retry.status, 200);
  await w.settle();
});

test.serial('scheduled sends wait, can be rescheduled, and go out at their time', async (t) => {
  const at = new Date(clock.nowMs() + 3600_000).toISOString();
  const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'later@example.net', scheduledAt: at }) });
  let e = await get(res.body.emailId);
  t.is(e.latestStatus, 'SCHEDULED');
  t.is(e.scheduledAt, at);
  await w.settle();
  t.false(w.sink.messages.some((m) => m.rcptTo.includes('later@example.net')));
  const newAt = new Date(clock.nowMs() + 7200_000).toISOString();
  const patched = await w.t0.request('PATCH', `/v1/emails/${res.body.emailId}`, { body: { scheduledAt: newAt } });
  t.deepEqual(patched.body, { emailId: res.body.emailId });
  e = await get(res.body.emailId);
  t.is(e.scheduledAt, newAt);
  t.is(e.latestStatus, 'SCHEDULED');
  // The history says when it was moved, and from and to what time.
  t.deepEqual(
    e.emailEvents.map((x: { status: string; data: unknown }) => [x.status, x.data]),
    [
      ['SCHEDULED', { scheduledAt: at }],
      ['SCHEDULED', { scheduledAt: newAt, rescheduledFrom: at }],
    ],
  );
  clock.advance(3600_000 + 1000);
  await w.settle();
  t.false(w.sink.messages.some((m) => m.rcptTo.includes('later@example.net')), 'not at the old time');
  clock.advance(3600_000);
  await w.settle();
  t.true(w.sink.messages.some((m) => m.rcptTo.includes('later@example.net')));
  e = await get(res.body.emailId);
  t.is(e.latestStatus, 'DELIVERED');
  // Too late to reschedule or cancel now.
  t.is((await w.t0.request('PATCH', `/v1/emails/${res.body.emailId}`, { body: { scheduledAt: newAt } })).status, 400);
  t.is((await w.t0.request('POST', `/v1/emails/${res.body.emailId}/cancel`)).status, 400);
});

test.serial('plain-English scheduledAt and cancel', async (t) => {
  const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'cancel@example.net', scheduledAt: 'in 2 hours' }) });
  t.is(res.status, 200);
  const e = await get(res.body.emailId);
  t.is(Date.parse(e.scheduledAt), clock.nowMs() + 2 * 3600_000);
  const cancelled = await w.t0.request('POST', `/v1/emails/${res.body.emailId}/cancel`);
  t.deepEqual(cancelled.body, { emailId: res.body.emailId });
  clock.advance(3 * 3600_000);
  await w.settle();
  t.false(w.sink.messages.some((m) => m.rcptTo.includes('cancel@example.net')));
  const after = await get(res.body.emailId);
  t.is(after.latestStatus, 'CANCELLED');
  t.deepEqual(after.emailEvents.map((x: any) => x.status), ['SCHEDULED', 'CANCELLED']);
  t.is((await w.t0.request('POST', `/v1/emails/${res.body.emailId}/cancel`)).status, 400);
  const tomorrow = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { scheduledAt: 'tomorrow 9am' }) });
  t.is(tomorrow.status, 200);
  t.is((await w.t0.request('PATCH', `/v1/emails/${tomorrow.body.emailId}`, { body: {} })).status, 400);
  await w.t0.request('POST', `/v1/emails/${tomorrow.body.emailId}/cancel`);
});

test.serial('suppressions are checked again when a scheduled send falls due: an address suppressed meanwhile is not mailed', async (t) => {
  const inHour = new Date(clock.nowMs() + 3600_000).toISOString();
  // Every To suppressed after acceptance: the whole email is SUPPRESSED, its cc included, as at acceptance.
  const whole = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'gone-later@example.net', cc: 'cc-of-gone@example.net', scheduledAt: inHour }) });
  // One cc suppressed after acceptance: dropped; the others are mailed and the email is DELIVERED.
  const partial = await w.t0.request('POST', '/v1/emails', {
    body: sendBody(w, { to: 'stays@example.net', cc: ['cc-stays@example.net', 'cc-gone@example.net'], bcc: [], replyTo: [], scheduledAt: inHour }),
  });
  t.is(partial.status, 200, 'empty cc/bcc/replyTo lists are the same as none');
  // A bcc due later than its To (as a deferred one would be) follows the email once it is SUPPRESSED.
  const split = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'gone-later@example.net', bcc: 'bcc-later@example.net', scheduledAt: inHour }) });
  const repo = repositoriesOf(w.t0.app).deliveries;
  const bccRow = (await repo.listForEmail(split.body.emailId)).find((d) => d.kind === 'bcc')!;
  await w.t0.app.store.db.updateTable('deliveries').set({ next_attempt_at: clock.nowMs() + 2 * 3600_000 }).where('id', '=', bccRow.id).execute();
  // And the other way round: the To due later (its destination busy), the cc claimed alone first.
  const ccFirst = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'gone-later@example.net', cc: 'cc-alone@example.net', scheduledAt: inHour }) });
  const toRow = (await repo.listForEmail(ccFirst.body.emailId)).find((d) => d.kind === 'to')!;
  await w.t0.app.store.db.updateTable('deliveries').set({ next_attempt_at: clock.nowMs() + 2 * 3600_000 }).where('id', '=', toRow.id).execute();
  t.is((await get(whole.body.emailId)).latestStatus, 'SCHEDULED');
  for (const email of ['gone-later@example.net', 'CC-Gone@example.net']) {
    t.is((await w.t0.request('POST', '/v1/suppressions', { body: { email, reason: 'MANUAL' } })).status, 200);
  }
  clock.advance(3600_000 + 1000);
  await w.settle();
  const mailed = w.sink.messages.flatMap((m) => m.rcptTo);
  for (const r of ['gone-later@example.net', 'cc-of-gone@example.net', 'cc-gone@example.net', 'cc-alone@example.net']) t.false(mailed.includes(r), r);
  t.is((await get(ccFirst.body.emailId)).latestStatus, 'SUPPRESSED');
  t.true(mailed.includes('stays@example.net'));
  t.true(mailed.includes('cc-stays@example.net'));

  const w1 = await get(whole.body.emailId);
  t.is(w1.latestStatus, 'SUPPRESSED');
  t.deepEqual(w1.emailEvents.map((x: any) => x.status), ['SCHEDULED', 'SUPPRESSED', 'SUPPRESSED']);
  t.deepEqual(w1.emailEvents.slice(1).map((x: any) => x.data.recipient).sort(), ['cc-of-gone@example.net', 'gone-later@example.net']);
  t.regex(w1.emailEvents.find((x: any) => x.data.recipient === 'gone-later@example.net').data.suppressed.reason, /put on the suppression list after/);
  const p1 = await get(partial.body.emailId);
  t.is(p1.latestStatus, 'DELIVERED');
  const dropped = p1.emailEvents.filter((x: any) => x.status === 'SUPPRESSED');
  t.deepEqual(dropped.map((x: any) => x.data.recipient), ['cc-gone@example.net']);
  const states = (await repo.listForEmail(partial.body.emailId)).map((d) => `${d.recipient}:${d.state}`).sort();
  t.deepEqual(states, ['cc-gone@example.net:suppressed', 'cc-stays@example.net:delivered', 'stays@example.net:delivered']);
  t.is((await get(split.body.emailId)).latestStatus, 'SUPPRESSED');
  t.is((await repo.findById(bccRow.id))!.state, 'queued');
  clock.advance(3600_000);
  await w.settle();
  t.false(w.sink.messages.some((m) => m.rcptTo.includes('bcc-later@example.net')));
  t.is((await repo.findById(bccRow.id))!.state, 'suppressed');
  t.is((await repo.findById(toRow.id))!.state, 'suppressed');
  t.regex((await repo.findById(bccRow.id))!.last_response!, /every To recipient is on the suppression list/);
  for (const email of ['gone-later@example.net', 'cc-gone@example.net']) await w.t0.request('DELETE', `/v1/suppressions/${email}`);
});

test.serial('an email whose attempt is in flight can no longer be cancelled, rescheduled or purged', async (t) => {
  const at = new Date(clock.nowMs() + 3600_000).toISOString();
  const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'inflight@example.net', scheduledAt: at }) });
  const repo = repositoriesOf(w.t0.app).deliveries;
  const [d] = await repo.listForEmail(res.body.emailId);
  // What the engine's claim does when the time has come: the message may be on the wire now.
  t.true(await repo.takeLease(d!.id, 'another-engine', clock.nowMs() + 600_000));
  const cancel = await w.t0.request('POST', `/v1/emails/${res.body.emailId}/cancel`);
  t.is(cancel.status, 400);
  t.regex(cancel.body.error.message, /being sent/);
  const patch = await w.t0.request('PATCH', `/v1/emails/${res.body.emailId}`, { body: { scheduledAt: 'in 3 hours' } });
  t.is(patch.status, 400);
  const purge = await t.throwsAsync(w.t0.app.services.deliveries.purge(d!.id));
  t.regex(purge!.message, /being attempted/);
  t.is((await get(res.body.emailId)).latestStatus, 'SCHEDULED');
  t.is((await repo.findById(d!.id))!.state, 'queued');
  // Once the attempt has ended (here: the lease is let go), cancel works again.
  await repo.releaseLeases([d!.id], 'another-engine');
  t.is((await w.t0.request('POST', `/v1/emails/${res.body.emailId}/cancel`)).status, 200);
  t.is((await repo.findById(d!.id))!.state, 'cancelled');
});

test.serial('a node lets go of, or parks, only the leases it still holds: one another node took since stays with it', async (t) => {
  const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'fenced@example.net', scheduledAt: 'in 2 hours' }) });
  const repo = repositoriesOf(w.t0.app).deliveries;
  const [d] = await repo.listForEmail(res.body.emailId);
  // Node A's lease ran out and node B claimed the row; A's late release or shaping park must not free it.
  t.true(await repo.takeLease(d!.id, 'node-b', clock.nowMs() + 600_000));
  await repo.releaseLeases([d!.id], 'node-a');
  await repo.parkLeases([d!.id], 'node-a', clock.nowMs() + 3_600_000, 'held by a rule', clock.now().toISOString());
  const row = (await repo.findById(d!.id))!;
  t.is(row.lease_owner, 'node-b');
  t.is(row.held_reason, null);
  // The holder itself parks it: unleased, held until then, with why.
  await repo.parkLeases([d!.id], 'node-b', clock.nowMs() + 3_600_000, 'held by a rule', clock.now().toISOString());
  const parked = (await repo.findById(d!.id))!;
  t.is(parked.lease_owner, null);
  t.is(parked.held_reason, 'held by a rule');
  t.is(Number(parked.next_attempt_at), clock.nowMs() + 3_600_000);
  t.is((await w.t0.request('POST', `/v1/emails/${res.body.emailId}/cancel`)).status, 200);
});

test.serial('a late attempt result for a delivery purged meanwhile (its lease ran out in flight) does not overwrite the purge', async (t) => {
  const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'late-result@example.net', scheduledAt: 'in 2 hours' }) });
  const repo = repositoriesOf(w.t0.app).deliveries;
  const [stale] = await repo.listForEmail(res.body.emailId);
  const email = await w.t0.app.store.db.selectFrom('emails').selectAll().where('id', '=', res.body.emailId).executeTakeFirstOrThrow();
  // The operator purges the row (no lease on it: the attempt's lease expired and was swept).
  await w.t0.app.services.deliveries.purge(stale!.id);
  // Then the attempt that was still on the wire reports: delivered, and a hard bounce for good measure.
  await w.t0.app.services.deliveries.complete({ email: { ...email, body_bytes: 0 }, domain: undefined, rcptDomain: 'example.net', deliveries: [stale!] }, new Date(clock.nowMs()), [
    { deliveryId: stale!.id, outcome: 'bounced', hardBounce: true, code: 550, response: '550 5.1.1 user unknown' },
  ]);
  t.is((await repo.findById(stale!.id))!.state, 'failed');
  const e = await get(res.body.emailId);
  t.is(e.latestStatus, 'FAILED');
  t.false(e.emailEvents.some((x: any) => x.status === 'BOUNCED'));
  t.is((await w.t0.request('GET', '/v1/suppressions/late-result@example.net')).status, 404);
});

test.serial('a message that cannot be signed is deferred without a SENT (nothing went out) and goes out once it can', async (t) => {
  const db = w.t0.app.store.db;
  const { dkim_private_key: key } = await db.selectFrom('domains').select('dkim_private_key').where('id', '=', w.domain.id).executeTakeFirstOrThrow();
  await db.updateTable('domains').set({ dkim_private_key: 'not a key' }).where('id', '=', w.domain.id).execute();
  try {
    const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'unsignable@example.net' }) });
    await w.settle();
    const e = await get(res.body.emailId);
    t.is(e.latestStatus, 'DELIVERY_DELAYED');
    t.deepEqual(e.emailEvents.map((x: any) => x.status), ['QUEUED', 'DELIVERY_DELAYED']);
    t.regex(e.emailEvents[1].data.response, /local error while preparing the message/);
    await db.updateTable('domains').set({ dkim_private_key: key }).where('id', '=', w.domain.id).execute();
    clock.advance(2 * 60_000);
    await w.settle();
    const after = await get(res.body.emailId);
    t.is(after.latestStatus, 'DELIVERED');
    t.true(after.emailEvents.some((x: any) => x.status === 'SENT'));
  } finally {
    await db.updateTable('domains').set({ dkim_private_key: key }).where('id', '=', w.domain.id).execute();
  }
});

test.serial('a 4xx defers with DELIVERY_DELAYED and the retry delivers later', async (t) => {
  let calls = 0;
  w.sink.setBehaviour({ onRcpt: (a) => (a === 'grey@example.net' && calls++ === 0 ? { code: 451, message: '4.7.1 Greylisted, please try again later' } : undefined) });
  try {
    const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'grey@example.net' }) });
    await w.settle();
    let e = await get(res.body.emailId);
    t.is(e.latestStatus, 'DELIVERY_DELAYED');
    const delayed = e.emailEvents.find((x: any) => x.status === 'DELIVERY_DELAYED');
    t.regex(delayed.data.response, /Greylisted/);
    t.is(delayed.data.recipient, 'grey@example.net');
    // Not before the retry time.
    clock.advance(10_000);
    await w.settle();
    t.is((await get(res.body.emailId)).latestStatus, 'DELIVERY_DELAYED');
    clock.advance(2 * 60_000);
    await w.settle();
    e = await get(res.body.emailId);
    t.is(e.latestStatus, 'DELIVERED');
  } finally {
    w.sink.setBehaviour({ onRcpt: undefined });
  }
});

test.serial('a remote reply of any length is kept to 2,000 characters in the row, the events and the webhooks', async (t) => {
  w.sink.setBehaviour({ onRcpt: (a) => (a === 'chatty@example.net' ? { code: 550, message: `5.7.1 ${'blah '.repeat(2000)}` } : undefined) });
  try {
    const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'chatty@example.net' }) });
    await w.settle();
    const e = await get(res.body.emailId);
    t.is(e.latestStatus, 'BOUNCED');
    const bounced = e.emailEvents.find((x: any) => x.status === 'BOUNCED');
    t.is(bounced.data.response.length, 2000);
    t.true(bounced.data.response.endsWith('…'));
    t.is(bounced.data.bounce.message.length, 2000);
    const [row] = await repositoriesOf(w.t0.app).deliveries.listForEmail(res.body.emailId);
    t.is(row!.last_response!.length, 2000);
  } finally {
    w.sink.setBehaviour({ onRcpt: undefined });
  }
});

test.serial('a remote reply with NUL characters is recorded with U+FFFD in their place: a 250 stays delivered (not leased and sent again), a 550 bounced', async (t) => {
  // PostgreSQL cannot store NUL in text: the whole result write failed, the delivery kept its
  // lease, and once the lease ran out the accepted message was sent again. smtp-server (the
  // sink) writes no NUL, so a raw MX of the fuzz proof answers here.
  const mx = await startHostileMx({ host: '127.0.0.6', port: w.sink.port, name: 'mx.nul.test' });
  w.zone.set('mx.nul.test', 'A', ['127.0.0.6']);
  w.zone.set('nul.example', 'MX', [{ exchange: 'mx.nul.test', priority: 10 }]);
  const reply = (line: string) => [{ bytes: Buffer.from(`${line}\r\n`), pieces: 1, dripMs: 0, after: 'stay' as const }];
  // One transaction per session: the first refuses the recipient, the second takes the message.
  mx.setScripts([
    { ...wellBehavedScript(), rcpt: reply('550 5.7.1 no\u0000thanks') },
    { ...wellBehavedScript(), eod: reply('250 2.0.0 queued\u0000as 42') },
  ]);
  try {
    const refused = (await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'refused@nul.example' }) })).body.emailId;
    await w.settle();
    mx.dropAll();
    const accepted = (await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'accepted@nul.example' }) })).body.emailId;
    await w.settle();
    for (const [id, status, response] of [
      [accepted, 'DELIVERED', '250 2.0.0 queued\uFFFDas 42'],
      [refused, 'BOUNCED', '550 5.7.1 no\uFFFDthanks'],
    ] as const) {
      const e = await get(id);
      t.is(e.latestStatus, status);
      t.is(e.emailEvents.find((x: any) => x.status === status).data.response, response);
      const [row] = await repositoriesOf(w.t0.app).deliveries.listForEmail(id);
      t.is(row!.state as string, status.toLowerCase());
      t.is(row!.lease_owner, null, 'recorded, not left leased');
      t.is(row!.last_response, response);
    }
    t.is(mx.transactions.filter((x) => x.ended && x.emailId === accepted).length, 1, 'the accepted message went once');
  } finally {
    await mx.close();
  }
});

test.serial('a long reply cut to 2,000 characters is never cut between the halves of a surrogate pair', async (t) => {
  // 1,998 characters of "550 " and text, then emoji (two UTF-16 units each): the cut at 1,999 fell inside one.
  const message = `5.7.1 ${'x'.repeat(1988)}${'\u{1F600}'.repeat(20)}`;
  w.sink.setBehaviour({ onRcpt: (a) => (a === 'emoji@example.net' ? { code: 550, message } : undefined) });
  try {
    const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'emoji@example.net' }) });
    await w.settle();
    const e = await get(res.body.emailId);
    const response: string = e.emailEvents.find((x: any) => x.status === 'BOUNCED').data.response;
    t.true(response.length <= 2000);
    t.true(response.endsWith('x…'), 'the cut falls before the pair it would have split');
    t.false(/[\uD800-\uDFFF]/.test(response.slice(-3)), 'no lone surrogate at the cut');
    const [row] = await repositoriesOf(w.t0.app).deliveries.listForEmail(res.body.emailId);
    t.is(row!.last_response, response);
  } finally {
    w.sink.setBehaviour({ onRcpt: undefined });
  }
});

test.serial('retries give up after the maximum age with FAILED', async (t) => {
  w.sink.setBehaviour({ onRcpt: (a) => (a === 'never@example.net' ? { code: 452, message: '4.2.2 Mailbox full, try later' } : undefined) });
  try {
    const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'never@example.net' }) });
    await w.settle();
    t.is((await get(res.body.emailId)).latestStatus, 'DELIVERY_DELAYED');
    for (let i = 0; i < 30; i++) {
      clock.advance(3 * 3600_000);
      await w.settle();
      if ((await get(res.body.emailId)).latestStatus === 'FAILED') break;
    }
    const e = await get(res.body.emailId);
    t.is(e.latestStatus, 'FAILED');
    t.regex(e.emailEvents.find((x: any) => x.status === 'FAILED').data.failed.reason, /gave up/);
  } finally {
    w.sink.setBehaviour({ onRcpt: undefined });
  }
});

test.serial('a send scheduled days ahead is dated at its time and retried for the whole give-up age from then; FAILED exactly at it', async (t) => {
  const HOUR = 3600_000;
  w.sink.setBehaviour({ onRcpt: (a) => (a === 'far@example.net' ? { code: 451, message: '4.3.0 Temporary local problem' } : undefined) });
  try {
    const at = new Date(clock.nowMs() + 4 * 24 * HOUR).toISOString();
    const far = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'far@example.net', scheduledAt: at }) });
    await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'dated@example.net', scheduledAt: at }) });
    clock.advance(4 * 24 * HOUR);
    await w.settle();
    // Its first 4xx, 96 hours after acceptance: a delay, not a give-up.
    t.is((await get(far.body.emailId)).latestStatus, 'DELIVERY_DELAYED');
    const msg = w.sink.messages.find((m) => m.rcptTo.includes('dated@example.net'));
    t.truthy(msg);
    const date = /^Date: (.+)$/im.exec(msg!.raw.toString('utf8'))![1]!;
    t.is(Date.parse(date), Math.floor(Date.parse(at) / 1000) * 1000, 'Date is the scheduled time (to the second), not the time of acceptance');
    // Retried until 72 hours after the scheduled time, and FAILED at that time, not a retry step later.
    const giveUpAt = Date.parse(at) + 72 * HOUR;
    while (clock.nowMs() < giveUpAt - 1000) {
      clock.advance(Math.min(3 * HOUR, giveUpAt - 1000 - clock.nowMs()));
      await w.settle();
      t.is((await get(far.body.emailId)).latestStatus, 'DELIVERY_DELAYED');
    }
    clock.advance(1000);
    await w.settle();
    const e = await get(far.body.emailId);
    t.is(e.latestStatus, 'FAILED');
    t.regex(e.emailEvents.find((x: any) => x.status === 'FAILED').data.failed.reason, /gave up after \d+ attempts over 72 hours/);
  } finally {
    w.sink.setBehaviour({ onRcpt: undefined });
  }
});

test.serial('ENFORCED TLS never sends in the clear: deferred while the MX offers no STARTTLS, delivered once it does', async (t) => {
  const plain = await w.startSecondSink('tls-required.example', { starttls: false });
  await w.t0.request('PATCH', `/v1/domains/${w.domain.id}`, { body: { tlsPolicy: 'ENFORCED' } });
  try {
    const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'secure@tls-required.example' }) });
    await w.settle();
    t.is(plain.messages.length, 0, 'nothing was sent in plaintext');
    const e = await get(res.body.emailId);
    t.is(e.latestStatus, 'DELIVERY_DELAYED');
    t.regex(e.emailEvents.find((x: any) => x.status === 'DELIVERY_DELAYED').data.response, /TLS|STARTTLS/i);
    plain.setBehaviour({ starttls: true });
    clock.advance(2 * 60_000);
    await w.settle();
    t.is((await get(res.body.emailId)).latestStatus, 'DELIVERED');
    t.is(plain.messages.length, 1);
    t.true(plain.messages[0]!.secure);
  } finally {
    await w.t0.request('PATCH', `/v1/domains/${w.domain.id}`, { body: { tlsPolicy: 'OPPORTUNISTIC' } });
  }
});

test.serial('OPPORTUNISTIC delivers in plaintext when the MX offers no STARTTLS', async (t) => {
  const plain = await w.startSecondSink('no-tls.example', { starttls: false });
  const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'plain@no-tls.example' }) });
  await w.settle();
  t.is((await get(res.body.emailId)).latestStatus, 'DELIVERED');
  t.is(plain.messages.length, 1);
  t.false(plain.messages[0]!.secure);
});

test.serial('a restart mid-queue loses nothing: leases left by a dead process are released', async (t) => {
  w.sink.setBehaviour({ onConnect: () => ({ code: 421, message: '4.3.2 Service not available, closing channel' }) });
  const ids: string[] = [];
  for (let i = 0; i < 12; i++) ids.push((await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: `restart${i}@example.org` }) })).body.emailId);
  await w.settle();
  // Simulate a process killed while holding leases on half of them.
  const db = w.t0.app.store.db;
  await db.updateTable('deliveries').set({ lease_owner: 'dead-process', lease_until: clock.nowMs() + 3600_000 }).where('email_id', 'in', ids.slice(0, 6)).execute();
  await w.restart();
  w.sink.setBehaviour({ onConnect: undefined });
  clock.advance(2 * 60_000);
  await w.settle();
  for (const id of ids) t.is((await get(id)).latestStatus, 'DELIVERED', id);
  for (let i = 0; i < 12; i++) t.true(w.sink.messages.some((m) => m.rcptTo.includes(`restart${i}@example.org`)));
});
