import test from 'ava';
import type { BusEvent } from '../../src/core/events.js';
import { startMailWorld, sendBody, type MailWorld } from '../helpers/mail-world.js';
import { emitCommitted, startWebhookReceiver, verifySignature, type WebhookReceiver } from './webhook-receiver.js';

// A dead endpoint (accepts the connection, never answers) must not delay mail or the other
// endpoints' events. The timeout is long here so the dead endpoint is still hanging while
// everything else completes. Every receiver here is on 127.0.0.1: the per-host cap is off
// (webhooks.maxInFlightPerHost 0), as these are about the limits per endpoint and for failing
// endpoints (webhook-host-fairness.test.ts is about the cap).

let w: MailWorld;
let dead: WebhookReceiver;
let healthy: WebhookReceiver;

test.before(async () => {
  w = await startMailWorld({ overrides: { webhooks: { allowPrivate: true, timeoutMs: 30_000, maxInFlightPerHost: 0 } } });
  dead = await startWebhookReceiver();
  healthy = await startWebhookReceiver();
  dead.reply(() => 'hang');
});
test.after.always(async () => {
  dead?.reply(() => ({ status: 200 }));
  dead?.release();
  await w?.close();
  await dead?.close();
  await healthy?.close();
});

test('a hanging endpoint never holds back sending or another endpoint', async (t) => {
  const types = ['email.queued', 'email.sent', 'email.delivered'];
  await w.t0.request('POST', '/v1/webhooks', { body: { url: dead.url, eventTypes: types } });
  const good = (await w.t0.request('POST', '/v1/webhooks', { body: { url: healthy.url, eventTypes: types } })).body;

  const before = w.sink.messages.length;
  const ids: string[] = [];
  for (let i = 0; i < 6; i++) {
    const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { subject: `n${i}` }) });
    t.is(res.status, 200);
    ids.push(res.body.emailId);
  }
  // Mail flows...
  await w.sink.waitForMessages(before + 6);
  // ...and the healthy endpoint gets all 18 events (queued, sent, delivered for 6 emails)...
  await healthy.waitFor(18);
  // ...while the dead one still holds its requests open.
  t.true(dead.hanging >= 1, `dead endpoint holds ${dead.hanging} requests`);
  t.true(dead.hanging <= 4, 'at most its own concurrency slots');
  t.true(healthy.calls.every((c) => verifySignature(good.secret, c)));
  for (const id of ids) {
    const seen = healthy.calls.filter((c) => c.json.data.id === id).map((c) => c.json.type).sort();
    t.deepEqual(seen, [...types].sort());
  }
  const email = await w.t0.request('GET', `/v1/emails/${ids[5]}`);
  t.is(email.body.latestStatus, 'DELIVERED');
});

async function emit(type: BusEvent['type'], data: Record<string, unknown>): Promise<void> {
  const event: BusEvent = { type, teamId: w.t0.teamId, domainId: null, occurredAt: new Date().toISOString(), data };
  await emitCommitted(w.t0, event);
}

test.serial('endpoints on one host: four hanging ones do not hold back a fifth', async (t) => {
  // Receivers often share a host (one gateway, one SaaS inbox). Four endpoints there with
  // their 4 calls each hanging hold 16 connections to it; the fifth endpoint's call must go
  // out now, not wait for a connection until the others time out (30 s here) and time out itself.
  t.timeout(15_000, 'the fifth endpoint waited for the hanging ones');
  const shared = await startWebhookReceiver();
  t.teardown(async () => {
    shared.reply(() => ({ status: 200 }));
    shared.release();
    await shared.close();
  });
  let hangingMeanwhile = -1;
  shared.reply((call) => {
    if (call.path.startsWith('/slow')) return 'hang';
    hangingMeanwhile = shared.hanging;
    return { status: 204 };
  });
  const base = `http://127.0.0.1:${shared.port}`;
  const create = async (path: string, eventTypes: string[]) => {
    const res = await w.t0.request('POST', '/v1/webhooks', { body: { url: `${base}${path}`, eventTypes } });
    if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  };
  for (let i = 0; i < 4; i++) await create(`/slow${i}`, ['contact.created']);
  await create('/fast', ['contact.updated']);

  for (let i = 0; i < 4; i++) await emit('contact.created', { id: `ct_slow${i}` });
  await shared.waitFor(16);
  t.is(shared.hanging, 16);
  await emit('contact.updated', { id: 'ct_fast' });
  const calls = await shared.waitFor(17);
  t.is(calls[16]!.path, '/fast');
  t.is(hangingMeanwhile, 16, 'it went out while the others still hung');
});

test.serial('endpoints that fail hold at most half of the calls in flight: many hanging ones do not hold back a healthy one', async (t) => {
  // 40 endpoints whose first attempt failed, hanging from then on, with 4 calls each wanted:
  // they take no more than half of the 64 slots, and a healthy endpoint's call goes out now
  // instead of waiting for their 30 s timeouts.
  t.timeout(15_000, 'the healthy endpoint waited for the hanging ones');
  const broken = await startWebhookReceiver();
  const good = await startWebhookReceiver();
  t.teardown(async () => {
    broken.reply(() => ({ status: 200 }));
    broken.release();
    await Promise.all([broken.close(), good.close()]);
  });
  let hang = false;
  broken.reply(() => (hang ? 'hang' : { status: 500 }));
  let hangingMeanwhile = -1;
  good.reply(() => {
    hangingMeanwhile = broken.hanging;
    return { status: 204 };
  });
  const ENDPOINTS = 40;
  for (let i = 0; i < ENDPOINTS; i++) {
    const res = await w.t0.request('POST', '/v1/webhooks', { body: { url: `${broken.url}${i}`, eventTypes: ['domain.created'] } });
    if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  }
  await w.t0.request('POST', '/v1/webhooks', { body: { url: good.url, eventTypes: ['domain.updated'] } });

  await emit('domain.created', { id: 0 });
  await broken.waitFor(ENDPOINTS);
  await w.t0.app.webhookDispatcher.whenIdle(); // each failed once; retries are seconds away
  hang = true;
  for (let i = 1; i <= 8; i++) await emit('domain.created', { id: i });
  await broken.waitFor(ENDPOINTS + 32);
  await emit('domain.updated', { id: 1 });
  await good.waitFor(1);
  t.is(hangingMeanwhile, 32, 'it went out while the failing endpoints held half the slots');
});
