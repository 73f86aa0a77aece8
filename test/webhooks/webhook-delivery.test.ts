import { rmSync } from 'node:fs';
import net from 'node:net';
import test from 'ava';
import { UseSend } from 'usesend-js';
import { ManualClock } from '../../src/lib/clock.js';
import { WEBHOOK_MAX_ATTEMPTS, WEBHOOK_RETRY_DELAYS_MS, WEBHOOK_RETRY_JITTER_RATIO } from '../../src/core/webhooks/webhook-retry.js';
import type { BusEvent } from '../../src/core/events.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { until } from '../helpers/until.js';
import { emitCommitted, startWebhookReceiver, verifySignature, type ReceivedCall, type WebhookReceiver } from './webhook-receiver.js';

// Delivery through the outbox, driven by a manual clock: retries happen when the test moves
// the clock and wakes the dispatcher, never after real minutes.

const clock = new ManualClock(Date.UTC(2026, 2, 1, 9, 0, 0));
let t0: TestApp;
let receiver: WebhookReceiver;
let domainId: number;

const overrides = { webhooks: { allowPrivate: true, timeoutMs: 400 } };

test.before(async () => {
  t0 = await startTestApp({ clock, overrides });
  receiver = await startWebhookReceiver();
  domainId = (await t0.request('POST', '/v1/domains', { body: { name: 'hooks.dev', region: 'local' } })).body.id;
});
test.after.always(async () => {
  const { zone, dataDir } = t0 ?? {};
  await t0?.close();
  // The restart test hands the zone and data dir to a second app, which does not own them.
  await zone?.close();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  await receiver?.close();
});

async function makeHook(body: Record<string, unknown>) {
  const res = await t0.request('POST', '/v1/webhooks', { body: { url: receiver.url, eventTypes: [], ...body } });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  return res.body as { id: string; secret: string };
}

async function emit(type: BusEvent['type'], data: Record<string, unknown>, domain: number | null = domainId) {
  const event: BusEvent = { type, teamId: t0.teamId, domainId: domain, occurredAt: clock.now().toISOString(), data };
  await emitCommitted(t0, event);
}

async function settle() {
  await t0.app.webhookDispatcher.whenIdle();
}

async function attempts(id: string) {
  const res = await t0.request('GET', `/v1/webhooks/${id}/attempts?limit=100`);
  return res.body.attempts as any[];
}

/** Moves the clock past the longest possible wait before attempt n+1 and lets the dispatcher run. */
async function advancePastRetry(attemptsMade: number) {
  clock.advance(Math.ceil(WEBHOOK_RETRY_DELAYS_MS[attemptsMade - 1]! * (1 + WEBHOOK_RETRY_JITTER_RATIO)) + 1);
  await settle();
}

test.serial('deliveries are signed over the raw body; an independent HMAC and the useSend SDK both verify them', async (t) => {
  const hook = await makeHook({ eventTypes: ['email.delivered'] });
  const before = receiver.calls.length;
  await emit('email.delivered', { id: 'em_x', status: 'DELIVERED', to: ['ünïcode@example.net'], subject: 'Grüße ✓' });
  const [call] = (await receiver.waitFor(before + 1)).slice(before);
  await settle();
  t.is(call!.method, 'POST');
  t.is(call!.path, '/hook');
  t.regex(String(call!.headers['content-type']), /^application\/json/);
  t.is(call!.headers['x-service-timestamp'], String(clock.nowMs()), 'milliseconds since the epoch');
  t.true(verifySignature(hook.secret, call!));
  t.false(verifySignature('whsec_wrong', call!));
  // One changed byte breaks the signature.
  const tampered = { ...call!, raw: Buffer.from(call!.raw.toString('utf8').replace('DELIVERED', 'DELIVERES')) };
  t.false(verifySignature(hook.secret, tampered));

  t.deepEqual(Object.keys(call!.json), ['id', 'type', 'createdAt', 'data']);
  t.regex(call!.json.id, /^ev_[A-Za-z0-9]{21}$/);
  t.is(call!.json.type, 'email.delivered');
  t.is(call!.json.createdAt, clock.now().toISOString());
  t.like(call!.json.data, { id: 'em_x', subject: 'Grüße ✓' });

  const sdk = new UseSend('us_unused', 'http://127.0.0.1:1').webhooks(hook.secret);
  const headers = Object.fromEntries(Object.entries(call!.headers).map(([k, v]) => [k, String(v)]));
  const event = sdk.constructEvent(call!.raw, { headers, tolerance: -1 }) as { id: string };
  t.is(event.id, call!.json.id);
});

test.serial('an endpoint that fails then succeeds gets the same event again on the backoff table', async (t) => {
  const hook = await makeHook({ eventTypes: ['contact.created'] });
  const before = receiver.calls.length;
  receiver.reply((_c, i) => (i < before + 2 ? { status: 503, body: 'busy' } : { status: 204 }));
  await emit('contact.created', { id: 'ct_1', email: 'a@b.dev' }, null);
  await receiver.waitFor(before + 1);
  await settle();

  // Not before the table's first wait (5 s)...
  clock.advance(WEBHOOK_RETRY_DELAYS_MS[0]! - 1);
  await settle();
  t.is(receiver.calls.length, before + 1);
  // ...but after it (plus jitter).
  clock.advance(1);
  await advancePastRetry(1);
  t.is(receiver.calls.length, before + 2);
  await advancePastRetry(2);
  t.is(receiver.calls.length, before + 3);
  receiver.reply(() => ({ status: 200, body: 'ok' }));

  const got = receiver.calls.slice(before);
  t.is(new Set(got.map((c) => c.json.id)).size, 1, 'the event id is stable across retries');
  t.is(new Set(got.map((c) => c.raw.toString('hex'))).size, 1, 'the same bytes every time');
  t.true(got.every((c) => verifySignature(hook.secret, c)));

  const list = await attempts(hook.id);
  t.deepEqual(
    list.map((a) => [a.attempt, a.status, a.response?.status]),
    [
      [3, 'SUCCEEDED', 204],
      [2, 'FAILED', 503],
      [1, 'FAILED', 503],
    ],
  );
  t.is(list[1].response.body, 'busy');
  t.regex(list[1].error, /HTTP 503/);
  t.truthy(list[1].nextAttemptAt);
  t.is(list[0].nextAttemptAt, null);

  // Nothing more happens for a delivered call.
  clock.advance(24 * 3600_000);
  await settle();
  t.is(receiver.calls.length, before + 3);
});

test.serial(`a call is abandoned after ${WEBHOOK_MAX_ATTEMPTS} attempts`, async (t) => {
  const hook = await makeHook({ eventTypes: ['domain.updated'] });
  const before = receiver.calls.length;
  receiver.reply(() => ({ status: 500, body: 'down' }));
  await emit('domain.updated', { id: domainId });
  await receiver.waitFor(before + 1);
  await settle();
  for (let made = 1; made < WEBHOOK_MAX_ATTEMPTS; made++) {
    await advancePastRetry(made);
    t.is(receiver.calls.length, before + made + 1);
  }
  clock.advance(7 * 24 * 3600_000);
  await settle();
  t.is(receiver.calls.length, before + WEBHOOK_MAX_ATTEMPTS, 'nothing after the last attempt');
  receiver.reply(() => ({ status: 200, body: 'ok' }));

  const list = await attempts(hook.id);
  t.is(list.length, WEBHOOK_MAX_ATTEMPTS);
  t.true(list.every((a) => a.status === 'FAILED' && a.response.status === 500));
  t.deepEqual(
    list.map((a) => a.attempt),
    [6, 5, 4, 3, 2, 1],
  );
  t.is(list[0].nextAttemptAt, null, 'abandoned: no next attempt');
  t.true(list.slice(1).every((a) => a.nextAttemptAt !== null));
  // The waits grew along the table.
  const times = list.map((a) => Date.parse(a.createdAt)).reverse();
  for (let i = 1; i < times.length; i++) t.true(times[i]! - times[i - 1]! >= WEBHOOK_RETRY_DELAYS_MS[i - 1]!);
});

test.serial('a redirect, a timeout and a refused connection are failures; bodies are kept up to 4 KB', async (t) => {
  const hook = await makeHook({ eventTypes: ['email.sent'] });
  // This event's calls only: a retry of an earlier test's call may come when the clock moves.
  const mine = (c: ReceivedCall) => c.raw.toString().includes('"em_r"');
  const steps: ((i: number) => ReturnType<Parameters<WebhookReceiver['reply']>[0]>)[] = [
    () => ({ status: 302, headers: { location: `http://127.0.0.1:${receiver.port}/elsewhere` } }),
    () => 'hang',
    () => ({ status: 200, body: 'x'.repeat(10_000) }),
  ];
  let n = 0;
  receiver.reply((c, i) => (mine(c) ? (steps[n++]?.(i) ?? { status: 200 }) : { status: 200 }));
  await emit('email.sent', { id: 'em_r' });
  await until(() => receiver.calls.some(mine));
  await settle();
  await advancePastRetry(1);
  await advancePastRetry(2);
  receiver.release();
  t.is(receiver.calls.filter(mine).length, 3);
  t.false(receiver.calls.some((c) => c.path === '/elsewhere'), 'the redirect was not followed');

  const [third, second, first] = await attempts(hook.id);
  t.is(first.status, 'FAILED');
  t.is(first.response.status, 302);
  t.regex(first.error, /redirects are not followed: HTTP 302 to http:\/\/127\.0\.0\.1:\d+\/elsewhere/);
  t.is(second.status, 'FAILED');
  t.is(second.response, null);
  t.is(second.error, 'timed out after 400 ms');
  t.true(second.durationMs >= 390);
  t.is(third.status, 'SUCCEEDED');
  t.is(third.response.body.length, 4096);

  // Nothing listening: connection refused is an attempt like any other.
  const dead = await startWebhookReceiver();
  const deadUrl = dead.url;
  await dead.close();
  const gone = (await t0.request('POST', '/v1/webhooks', { body: { url: deadUrl, eventTypes: ['email.failed'] } })).body;
  await emit('email.failed', { id: 'em_f' });
  await settle();
  const [refused] = await attempts(gone.id);
  t.is(refused.status, 'FAILED');
  t.regex(refused.error, /ECONNREFUSED/);
  t.truthy(refused.nextAttemptAt);
  await t0.request('DELETE', `/v1/webhooks/${gone.id}`);
});

/** A raw endpoint answering every request with `answer` once its head is read; the connections it took. */
async function rawEndpoint(answer: string): Promise<{ url: string; requests: () => number; close(): Promise<void> }> {
  let requests = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => {});
    let head = '';
    s.on('data', (c: Buffer) => {
      head += c.toString('latin1');
      if (head.includes('\r\n\r\n')) {
        head = '';
        requests++;
        s.write(answer);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/hook`,
    requests: () => requests,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

test.serial('a 101 Switching Protocols answer is a failed attempt, recorded, and the call is retried', async (t) => {
  // node:http hands a 101 to an 'upgrade' listener and never to the response callback: without
  // one the attempt never ended, its call stayed in flight in memory and was never retried.
  const endpoint = await rawEndpoint('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
  const hook = (await t0.request('POST', '/v1/webhooks', { body: { url: endpoint.url, eventTypes: ['contact.created'] } })).body;
  await emit('contact.created', { id: 'c_101' });
  await settle();
  const [first] = await attempts(hook.id);
  t.is(first?.status, 'FAILED');
  t.regex(first?.error ?? '', /101/);
  t.truthy(first?.nextAttemptAt);
  await advancePastRetry(1);
  t.is(endpoint.requests(), 2, 'retried on the table');
  t.is((await attempts(hook.id)).length, 2);
  await t0.request('DELETE', `/v1/webhooks/${hook.id}`);
  await endpoint.close();
});

test.serial("a redirect's Location is named in the error cut short: a server's header does not make the stored error grow", async (t) => {
  const location = `http://elsewhere.example/${'l'.repeat(12_000)}`;
  const endpoint = await rawEndpoint(`HTTP/1.1 302 Found\r\nLocation: ${location}\r\nContent-Length: 0\r\n\r\n`);
  const hook = (await t0.request('POST', '/v1/webhooks', { body: { url: endpoint.url, eventTypes: ['contact.updated'] } })).body;
  await emit('contact.updated', { id: 'c_302' });
  await settle();
  const [first] = await attempts(hook.id);
  t.is(first?.status, 'FAILED');
  t.is(first?.response?.status, 302);
  t.true(first?.error.startsWith(`redirects are not followed: HTTP 302 to ${location.slice(0, 100)}`), first?.error.slice(0, 200));
  t.true(first?.error.length <= 600, `${first?.error.length} characters`);
  await t0.request('DELETE', `/v1/webhooks/${hook.id}`);
  await endpoint.close();
});

test.serial('a rotated secret signs the next delivery at once, retries of older events included', async (t) => {
  const hook = await makeHook({ eventTypes: ['email.opened'] });
  const before = receiver.calls.length;
  receiver.reply((_c, i) => (i === before ? { status: 500 } : { status: 200 }));
  await emit('email.opened', { id: 'em_o' });
  await receiver.waitFor(before + 1);
  await settle();
  t.true(verifySignature(hook.secret, receiver.calls[before]!));

  const rotated = (await t0.request('PATCH', `/v1/webhooks/${hook.id}`, { body: { rotateSecret: true } })).body;
  t.not(rotated.secret, hook.secret);
  await advancePastRetry(1);
  t.is(receiver.calls.length, before + 2, 'the retry went out once due');
  const retry = receiver.calls[before + 1]!;
  t.is(retry.json.id, receiver.calls[before]!.json.id);
  t.true(verifySignature(rotated.secret, retry));
  t.false(verifySignature(hook.secret, retry), 'the old secret is dead');

  await emit('email.opened', { id: 'em_o2' });
  const [fresh] = (await receiver.waitFor(before + 3)).slice(before + 2);
  t.true(verifySignature(rotated.secret, fresh!));
  t.false(verifySignature(hook.secret, fresh!));
  await settle();
});

test.serial('events go to the endpoints whose eventTypes and domainIds match', async (t) => {
  const other = (await t0.request('POST', '/v1/domains', { body: { name: 'other-hooks.dev', region: 'local' } })).body.id as number;
  const onlyHere = await startWebhookReceiver();
  const all = await startWebhookReceiver();
  t.teardown(() => Promise.all([onlyHere.close(), all.close()]));
  const create = async (url: string, body: Record<string, unknown>) => (await t0.request('POST', '/v1/webhooks', { body: { url, ...body } })).body;
  await create(onlyHere.url, { eventTypes: ['email.bounced', 'contact.deleted'], domainIds: [domainId] });
  await create(all.url, { eventTypes: [] });

  await emit('email.bounced', { id: 'em_1' }, other); // wrong domain for onlyHere
  await emit('email.delivered', { id: 'em_2' }, domainId); // wrong type for onlyHere
  await emit('email.bounced', { id: 'em_3' }, domainId); // matches both
  await emit('contact.deleted', { id: 'ct_9' }, null); // no domain: passes the domain filter
  await all.waitFor(4);
  await onlyHere.waitFor(2);
  await settle();
  // Up to 4 calls per endpoint are in flight at once: which events arrived, not in what order.
  const received = (r: WebhookReceiver) => r.calls.map((c) => c.json.data.id as string).sort();
  t.deepEqual(received(onlyHere), ['ct_9', 'em_3']);
  t.deepEqual(received(all), ['ct_9', 'em_1', 'em_2', 'em_3']);
  const ids = (r: WebhookReceiver, dataId: string) => r.calls.find((c) => c.json.data.id === dataId)!.json.id;
  t.is(ids(onlyHere, 'em_3'), ids(all, 'em_3'), 'one event id for every endpoint');
});

test.serial('a response body with a NUL byte is kept with its attempt, and the call is not posted again', async (t) => {
  // PostgreSQL text cannot hold U+0000: the attempt could not be recorded, so the acknowledged
  // call was posted again after every lease, with no attempt ever on record.
  const hook = await makeHook({ eventTypes: ['email.clicked'] });
  const before = receiver.calls.length;
  receiver.reply(() => ({ status: 200, body: 'ok\u0000binary' }));
  await emit('email.clicked', { id: 'em_nul' });
  await receiver.waitFor(before + 1);
  await settle();
  receiver.reply(() => ({ status: 200, body: 'ok' }));
  const list = await attempts(hook.id);
  t.deepEqual(
    list.map((a) => [a.status, a.response?.body]),
    [['SUCCEEDED', 'ok\uFFFDbinary']],
  );
  clock.advance(t0.config.webhooks.leaseMs + 1);
  await settle();
  // This event's posts only: a retry of an earlier test's call may come due with the clock.
  t.is(receiver.calls.filter((c) => c.json.data.id === 'em_nul').length, 1, 'acknowledged once, posted once');
});

test.serial('credentials in the URL are sent as given, a bare % in the password included', async (t) => {
  // The userinfo is percent-decoded as the URL standard does: "%21" is "!", a "%" before
  // anything but two hex digits is itself (decodeURIComponent threw on it: every attempt failed).
  const res = await t0.request('POST', '/v1/webhooks', { body: { url: `http://hook:50%off%21@127.0.0.1:${receiver.port}/creds`, eventTypes: ['email.delivery_delayed'] } });
  t.is(res.status, 200);
  const before = receiver.calls.length;
  await emit('email.delivery_delayed', { id: 'em_pct' });
  await settle();
  const [attempt] = await attempts(res.body.id);
  t.is(attempt.status, 'SUCCEEDED', String(attempt.error));
  const [call] = receiver.calls.slice(before);
  t.is(call?.path, '/creds');
  t.is(call?.headers.authorization, `Basic ${Buffer.from('hook:50%off!').toString('base64')}`);
});

test.serial('a pending call survives a restart and is delivered by the next process', async (t) => {
  const flaky = await startWebhookReceiver();
  flaky.reply(() => ({ status: 500 }));
  const hook = (await t0.request('POST', '/v1/webhooks', { body: { url: flaky.url, eventTypes: ['email.queued'] } })).body;
  await emit('email.queued', { id: 'em_restart' });
  await flaky.waitFor(1);
  await settle();
  const eventId = flaky.calls[0]!.json.id;

  const { dataDir, zone } = t0;
  await t0.stop();
  flaky.reply(() => ({ status: 200 }));
  t0 = await startTestApp({ clock, overrides, dataDir, zone });
  await advancePastRetry(1);
  await flaky.waitFor(2);
  t.is(flaky.calls[1]!.json.id, eventId);
  t.true(verifySignature(hook.secret, flaky.calls[1]!));
  const list = await attempts(hook.id);
  t.deepEqual(
    list.map((a) => a.status),
    ['SUCCEEDED', 'FAILED'],
  );
  await flaky.close();
});
