import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { WEBHOOK_MAX_ATTEMPTS, WEBHOOK_RETRY_DELAYS_MS, WEBHOOK_RETRY_JITTER_RATIO } from '../../src/core/webhooks/webhook-retry.js';
import type { BusEvent } from '../../src/core/events.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { twoTeams } from '../helpers/two-teams.js';
import { createWebhooksRepository } from '../../src/store/repositories/webhooks-repository.js';
import { emitCommitted, startWebhookReceiver, type WebhookReceiver } from './webhook-receiver.js';
import { ConsoleClient, consoleUser } from '../console/helpers/console-client.js';

// An endpoint's status: paused by its owner or auto-disabled after webhooks.disableAfterFailures
// events in a row failed every attempt (2 here). Neither gets new events, and calls already
// pending for it are discarded, not sent; a test event still goes out. Manual clock throughout.

const clock = new ManualClock(Date.UTC(2026, 2, 1, 9, 0, 0));
let t0: TestApp;
let receiver: WebhookReceiver;

test.before(async () => {
  t0 = await startTestApp({ clock, overrides: { webhooks: { allowPrivate: true, timeoutMs: 400, disableAfterFailures: 2 } } });
  receiver = await startWebhookReceiver();
  // Events whose data.id starts with "fail" are refused; everything else is acknowledged.
  receiver.reply((c) => (String(c.json?.data?.id ?? '').startsWith('fail') ? { status: 503, body: 'down' } : { status: 200, body: 'ok' }));
});
test.after.always(async () => {
  await t0?.close();
  await receiver?.close();
});

async function makeHook(): Promise<{ id: string }> {
  const res = await t0.request('POST', '/v1/webhooks', { body: { url: receiver.url, eventTypes: ['contact.created', 'webhook.test'] } });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  return res.body;
}

async function emit(id: string): Promise<void> {
  const event: BusEvent = { type: 'contact.created', teamId: t0.teamId, domainId: null, occurredAt: clock.now().toISOString(), data: { id } };
  await emitCommitted(t0, event);
}

const settle = () => t0.app.webhookDispatcher.whenIdle();

async function advancePastRetry(attemptsMade: number): Promise<void> {
  clock.advance(Math.ceil(WEBHOOK_RETRY_DELAYS_MS[attemptsMade - 1]! * (1 + WEBHOOK_RETRY_JITTER_RATIO)) + 1);
  await settle();
}

const got = (dataId: string) => receiver.calls.filter((c) => c.json?.data?.id === dataId).length;
const get = async (id: string) => (await t0.request('GET', `/v1/webhooks/${id}`)).body;

async function callStates(webhookId: string): Promise<string[]> {
  const rows = await t0.app.store.db.selectFrom('webhook_calls').select('state').where('webhook_id', '=', webhookId).orderBy('id').execute();
  return rows.map((r) => r.state);
}

async function autoDisabledMetric(): Promise<number> {
  const text = await (await fetch(`${t0.baseUrl}/metrics`)).text();
  const m = /^posthorn_webhook_endpoints_auto_disabled_total (\S+)$/m.exec(text);
  return m ? Number(m[1]) : NaN;
}

test.serial('PATCH status: ACTIVE and PAUSED only; AUTO_DISABLED and unknown values are 400; another team gets 404', async (t) => {
  const hook = await makeHook();
  t.like(await get(hook.id), { status: 'ACTIVE', consecutiveFailures: 0, disabledAt: null });

  const pausedAt = clock.now().toISOString();
  const paused = await t0.request('PATCH', `/v1/webhooks/${hook.id}`, { body: { status: 'PAUSED' } });
  t.is(paused.status, 200);
  t.like(paused.body, { status: 'PAUSED', disabledAt: pausedAt });
  t.like((await t0.request('GET', '/v1/webhooks')).body.webhooks.find((w: { id: string }) => w.id === hook.id), { status: 'PAUSED', disabledAt: pausedAt });
  // Paused again later, or changed otherwise: it has been stopped since the first pause.
  clock.advance(60_000);
  t.is((await t0.request('PATCH', `/v1/webhooks/${hook.id}`, { body: { status: 'PAUSED', description: 'later' } })).body.disabledAt, pausedAt);
  t.is((await t0.request('PATCH', `/v1/webhooks/${hook.id}`, { body: { description: 'later still' } })).body.disabledAt, pausedAt);

  for (const status of ['AUTO_DISABLED', 'auto_disabled', 'DISABLED', '', 1, null]) {
    const res = await t0.request('PATCH', `/v1/webhooks/${hook.id}`, { body: { status } });
    t.is(res.status, 400, `status ${JSON.stringify(status)}`);
    t.is(res.body.error.code, 'BAD_REQUEST');
    t.regex(res.body.error.message, /status/);
  }
  t.is((await get(hook.id)).status, 'PAUSED', 'a refused change leaves it as it was');

  const other = (await twoTeams(t0)).b.key;
  const theirs = await t0.request('PATCH', `/v1/webhooks/${hook.id}`, { key: other, body: { status: 'ACTIVE' } });
  t.is(theirs.status, 404);
  t.is(theirs.body.error.code, 'NOT_FOUND');
  t.is((await get(hook.id)).status, 'PAUSED');

  // The lower-case spelling is taken too. Re-enabled: no longer disabled since anything.
  t.like((await t0.request('PATCH', `/v1/webhooks/${hook.id}`, { body: { status: 'active' } })).body, { status: 'ACTIVE', disabledAt: null });
  t.is((await get(hook.id)).disabledAt, null);
  await t0.request('DELETE', `/v1/webhooks/${hook.id}`);
});

test.serial('a paused endpoint gets no new events, its pending retries are discarded, and a test event still goes out', async (t) => {
  const hook = await makeHook();
  await emit('fail-p');
  await receiver.waitFor(1);
  await settle();
  t.is(got('fail-p'), 1);
  t.deepEqual(await callStates(hook.id), ['pending'], 'a retry is waiting');

  t.is((await t0.request('PATCH', `/v1/webhooks/${hook.id}`, { body: { status: 'PAUSED' } })).status, 200);
  t.deepEqual(await callStates(hook.id), ['discarded'], 'discarded at once, not sent later');
  t.deepEqual(await t0.app.services.webhooks.failing({ teamId: t0.teamId, domainId: null }), [], 'paused on purpose: not pointed out as failing');
  // The attempts log shows what was dropped: the attempt that will not be made, newest first.
  const log = (await t0.request('GET', `/v1/webhooks/${hook.id}/attempts`)).body.attempts;
  t.deepEqual(log.map((a: { status: string; attempt: number }) => [a.status, a.attempt]), [['DISCARDED', 2], ['FAILED', 1]]);
  t.like(log[0], { eventType: 'contact.created', maxAttempts: WEBHOOK_MAX_ATTEMPTS, response: null, durationMs: 0, nextAttemptAt: null, createdAt: clock.now().toISOString() });
  t.is(log[0].eventId, log[1].eventId);
  t.is(JSON.parse(log[0].request.body).data.id, 'fail-p', 'the event that was not sent');
  t.deepEqual(log[0].request.headers, {}, 'nothing was signed or sent');
  t.regex(log[0].error, /discarded.*PAUSED/);
  // Paged one by one, the cursor goes through both.
  const first = (await t0.request('GET', `/v1/webhooks/${hook.id}/attempts?limit=1`)).body;
  t.deepEqual(first.attempts.map((a: { status: string }) => a.status), ['DISCARDED']);
  const second = (await t0.request('GET', `/v1/webhooks/${hook.id}/attempts?limit=1&cursor=${first.nextCursor}`)).body;
  t.deepEqual(second.attempts.map((a: { status: string }) => a.status), ['FAILED']);
  t.is(second.nextCursor, null);
  await emit('ok-while-paused');
  await advancePastRetry(1);
  await advancePastRetry(2);
  t.is(got('fail-p'), 1, 'the discarded retry is not sent');
  t.is(got('ok-while-paused'), 0, 'no event is matched to a paused endpoint');
  t.deepEqual(await callStates(hook.id), ['discarded']);
  t.is((await t0.request('GET', `/v1/webhooks/${hook.id}/attempts`)).body.attempts.length, 2, 'nothing more discarded, nothing sent');

  // A test event is sent to a paused endpoint, so it can be checked before re-enabling it.
  const before = receiver.calls.length;
  const sent = await t0.request('POST', `/v1/webhooks/${hook.id}/test`);
  t.is(sent.status, 200);
  await receiver.waitFor(before + 1);
  await settle();
  t.is(receiver.calls.at(-1)!.json.type, 'webhook.test');

  // Re-enabled: new events flow again; what was discarded stays discarded.
  t.is((await t0.request('PATCH', `/v1/webhooks/${hook.id}`, { body: { status: 'ACTIVE' } })).body.status, 'ACTIVE');
  await emit('ok-after');
  await settle();
  t.is(got('ok-after'), 1);
  await advancePastRetry(3);
  t.is(got('fail-p'), 1);
  await t0.request('DELETE', `/v1/webhooks/${hook.id}`);
});

test.serial('events that fail every attempt disable the endpoint after the threshold; a delivery resets the count; re-enabling starts again', async (t) => {
  const metricBefore = await autoDisabledMetric();
  const hook = await makeHook();

  // One final failure, then a delivery: the count goes 1, then back to 0.
  await emit('fail-1');
  await settle();
  for (let n = 1; n < WEBHOOK_MAX_ATTEMPTS; n++) await advancePastRetry(n);
  t.is(got('fail-1'), WEBHOOK_MAX_ATTEMPTS);
  t.like(await get(hook.id), { status: 'ACTIVE', consecutiveFailures: 1 });
  await emit('ok-1');
  await settle();
  t.like(await get(hook.id), { status: 'ACTIVE', consecutiveFailures: 0 });

  // Two failing together, and a third that starts failing later and is still retrying when they
  // give up: the second final failure disables the endpoint and the third is never sent again.
  await emit('fail-2');
  await emit('fail-3');
  await settle();
  for (let n = 1; n < WEBHOOK_MAX_ATTEMPTS - 1; n++) await advancePastRetry(n);
  await emit('fail-4');
  await settle();
  await advancePastRetry(WEBHOOK_MAX_ATTEMPTS - 1);
  t.is(got('fail-2'), WEBHOOK_MAX_ATTEMPTS);
  t.is(got('fail-3'), WEBHOOK_MAX_ATTEMPTS);
  const switchedAt = clock.now().toISOString();
  t.like(await get(hook.id), { status: 'AUTO_DISABLED', consecutiveFailures: 2, disabledAt: switchedAt });
  t.is(await autoDisabledMetric(), metricBefore + 1);
  const attention = (await t0.app.services.webhooks.failing({ teamId: t0.teamId, domainId: null })).map((f) => [f.webhook.id, f.webhook.status]);
  t.deepEqual(attention, [[hook.id, 'AUTO_DISABLED']], 'the overview points it out');

  const fail4Sent = got('fail-4');
  t.true(fail4Sent >= 1 && fail4Sent <= 2, `fail-4 was sent ${fail4Sent} times before the switch`);
  for (let n = 2; n < WEBHOOK_MAX_ATTEMPTS; n++) await advancePastRetry(n);
  t.is(got('fail-4'), fail4Sent, 'pending calls of an auto-disabled endpoint are not sent');
  await emit('ok-while-disabled');
  await settle();
  t.is(got('ok-while-disabled'), 0);
  t.is((await callStates(hook.id)).filter((s) => s === 'pending').length, 0);
  t.true((await callStates(hook.id)).includes('discarded'));
  const discarded = (await t0.request('GET', `/v1/webhooks/${hook.id}/attempts?limit=100`)).body.attempts.filter((a: { status: string }) => a.status === 'DISCARDED');
  t.deepEqual(discarded.map((a: { request: { body: string } }) => JSON.parse(a.request.body).data.id), ['fail-4'], 'the dropped retry is on record');
  t.is(discarded[0].attempt, fail4Sent + 1);
  t.regex(discarded[0].error, /discarded.*AUTO_DISABLED/);
  t.deepEqual(
    (await t0.app.services.webhooks.failing({ teamId: t0.teamId, domainId: null })).map((f) => f.lastAttempt.response),
    [{ status: 503 }],
    'the overview names the last HTTP attempt, not the discard',
  );
  t.is((await get(hook.id)).disabledAt, switchedAt, 'unchanged since the switch');

  // Re-enabled by its owner: the count starts from 0, and events are delivered again.
  t.like((await t0.request('PATCH', `/v1/webhooks/${hook.id}`, { body: { status: 'ACTIVE' } })).body, { status: 'ACTIVE', consecutiveFailures: 0, disabledAt: null });
  await emit('ok-2');
  await settle();
  t.is(got('ok-2'), 1);
  await emit('fail-5');
  await settle();
  for (let n = 1; n < WEBHOOK_MAX_ATTEMPTS; n++) await advancePastRetry(n);
  t.like(await get(hook.id), { status: 'ACTIVE', consecutiveFailures: 1 }, 'one failure after re-enabling does not disable it');
  await t0.request('DELETE', `/v1/webhooks/${hook.id}`);
});

test.serial('disableAfterFailures 0 never disables', async (t) => {
  const other = await startTestApp({ clock, overrides: { webhooks: { allowPrivate: true, timeoutMs: 400, disableAfterFailures: 0 } } });
  try {
    const hook = (await other.request('POST', '/v1/webhooks', { body: { url: receiver.url, eventTypes: ['contact.created'] } })).body;
    for (const id of ['fail-z1', 'fail-z2']) {
      const event: BusEvent = { type: 'contact.created', teamId: other.teamId, domainId: null, occurredAt: clock.now().toISOString(), data: { id } };
      await emitCommitted(other, event);
    }
    await other.app.webhookDispatcher.whenIdle();
    for (let n = 1; n < WEBHOOK_MAX_ATTEMPTS; n++) {
      clock.advance(Math.ceil(WEBHOOK_RETRY_DELAYS_MS[n - 1]! * (1 + WEBHOOK_RETRY_JITTER_RATIO)) + 1);
      await other.app.webhookDispatcher.whenIdle();
    }
    t.is(got('fail-z1') + got('fail-z2'), 2 * WEBHOOK_MAX_ATTEMPTS);
    t.like((await other.request('GET', `/v1/webhooks/${hook.id}`)).body, { status: 'ACTIVE', consecutiveFailures: 2 });
  } finally {
    await other.close();
  }
});

test.serial('the console shows the status and pauses and re-enables an endpoint; another team cannot', async (t) => {
  const hook = await makeHook();
  await consoleUser(t0.app, 'ops@status.dev', t0.teamId);
  const c = new ConsoleClient(t0.baseUrl);
  await c.signIn('ops@status.dev');
  const base = `/console/webhooks/${hook.id}`;
  t.regex((await c.get('/console/webhooks')).text, /<span class="badge good">ACTIVE<\/span>/);
  t.regex((await c.get(base)).text, /<button type="submit" class="btn secondary">Pause<\/button>/);
  await emit('fail-c'); // a retry is waiting when it is paused
  await settle();

  const paused = await c.post(`${base}/status`, { status: 'PAUSED' }, { token: await c.csrf(base) });
  t.is(paused.status, 303);
  t.is((await get(hook.id)).status, 'PAUSED');
  const page = (await c.get(base)).text;
  t.regex(page, /badge warn">PAUSED<\/span> <span class="muted">since <time datetime="[^"]+">/, 'when it was paused, beside the status');
  t.regex(page, /badge warn">PAUSED</);
  t.regex(page, />Re-enable<\/button>/);
  // The discarded retry is in the attempts log, as not sent.
  t.regex(page, /<span class="badge muted">DISCARDED<\/span> contact\.created · attempt 2 of 6 · discarded: the endpoint is PAUSED; not sent · <time/);
  t.regex(page, /<h3>Not sent<\/h3>/);
  // A refused form goes back with the reason.
  t.is((await c.post(`${base}/status`, { status: 'AUTO_DISABLED' }, { token: await c.csrf(base) })).status, 303);
  t.regex(c.flash(), /status: must be ACTIVE or PAUSED/);
  t.is((await get(hook.id)).status, 'PAUSED');

  await twoTeams(t0, { b: { name: 'Team C', consoleUser: 'other@status.dev' } });
  const them = new ConsoleClient(t0.baseUrl);
  await them.signIn('other@status.dev');
  t.is((await them.post(`${base}/status`, { status: 'ACTIVE' })).status, 303);
  t.regex(them.flash(), /not found/);
  t.is((await get(hook.id)).status, 'PAUSED');

  await c.post(`${base}/status`, { status: 'ACTIVE' }, { token: await c.csrf(base) });
  t.is((await get(hook.id)).status, 'ACTIVE');
  await t0.request('DELETE', `/v1/webhooks/${hook.id}`);
});

test.serial('final failures recorded side by side count each one, and exactly one of them switches the endpoint', async (t) => {
  const hook = await makeHook();
  const db = t0.app.store.db;
  const repo = createWebhooksRepository(db);
  const n = 8;
  const now = clock.now().toISOString();
  const callIds: number[] = [];
  for (let i = 0; i < n; i++) {
    const eventId = `ev_race${i}${hook.id.slice(3, 12)}`;
    await db.insertInto('webhook_events').values({ id: eventId, team_id: t0.teamId, type: 'contact.created', domain_id: null, body: '{}', created_at: now }).execute();
    const call = await db
      .insertInto('webhook_calls')
      .values({ webhook_id: hook.id, event_id: eventId, state: 'pending', attempts: 5, next_attempt_at: clock.nowMs(), lease_owner: 'racer', lease_until: clock.nowMs() + 60_000, created_at: now, updated_at: now })
      .returning('id')
      .executeTakeFirstOrThrow();
    callIds.push(call.id);
  }
  // All at once, as nodes sharing a PostgreSQL store would (each on its own connection there).
  const results = await Promise.all(
    callIds.map((callId, i) =>
      repo.recordAttempt(
        {
          callId,
          owner: 'racer',
          state: 'failed',
          attempts: 6,
          nextAttemptAt: null,
          disableAfterFailures: n - 2,
          attempt: { public_id: `wa_race${i}${hook.id.slice(3, 12)}`, webhook_id: hook.id, event_id: `ev_race${i}${hook.id.slice(3, 12)}`, event_type: 'contact.created', attempt: 6, url: receiver.url, request_headers_json: '{}', response_status: 503, response_body: 'down', duration_ms: 1, error: 'HTTP 503', succeeded: 0, next_attempt_at: null, created_at: now },
        },
        now,
      ),
    ),
  );
  t.true(results.every((r) => r.recorded));
  t.is(results.filter((r) => r.autoDisabled).length, 1, 'one recorder sees the switch');
  // Counted while active only: the failures recorded after the switch do not add up.
  t.like(await get(hook.id), { status: 'AUTO_DISABLED', consecutiveFailures: n - 2 });
  await t0.request('DELETE', `/v1/webhooks/${hook.id}`);
});
