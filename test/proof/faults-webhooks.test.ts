import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { WEBHOOK_MAX_ATTEMPTS, WEBHOOK_RETRY_DELAYS_MS, WEBHOOK_RETRY_JITTER_RATIO } from '../../src/core/webhooks/webhook-retry.js';
import { startMailWorld, sendBody, type MailWorld } from '../helpers/mail-world.js';
import { startFaultyEndpoint, type EndpointMode, type FaultyEndpoint } from './helpers/faulty-endpoint.js';

// Proof: webhook endpoints that hang, answer 500, reset the connection, never finish their
// body or answer slowly never lose an event, never block each other, and every attempt is
// on record. The events are real ones (email.queued from sends through the API), fanned out
// to one endpoint per fault and a healthy one. After recovery every event is acknowledged at
// least once, and each endpoint received exactly as many requests per event as there are
// recorded attempts for it: the only duplicates are retries of attempts recorded as failed.

const clock = new ManualClock(Date.UTC(2026, 6, 1, 8, 0, 0));
const TIMEOUT_MS = 2000;
const EVENTS = 5;

let w: MailWorld;
const endpoints = new Map<string, FaultyEndpoint>();

test.before(async () => {
  w = await startMailWorld({ clock, overrides: { webhooks: { allowPrivate: true, timeoutMs: TIMEOUT_MS } } });
});
test.after.always(async () => {
  await w?.close();
  for (const e of endpoints.values()) await e.close();
});

async function endpoint(label: string, eventTypes: string[]): Promise<{ id: string; ep: FaultyEndpoint }> {
  const ep = await startFaultyEndpoint({ slowMs: 300 });
  endpoints.set(label, ep);
  const res = await w.t0.request('POST', '/v1/webhooks', { body: { url: ep.url, eventTypes, description: label } });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  return { id: res.body.id, ep };
}

async function attempts(webhookId: string): Promise<any[]> {
  const all: any[] = [];
  let cursor: string | null = null;
  do {
    const res: any = await w.t0.request('GET', `/v1/webhooks/${webhookId}/attempts?limit=100${cursor ? `&cursor=${cursor}` : ''}`);
    if (res.status !== 200) throw new Error(JSON.stringify(res.body));
    all.push(...res.body.attempts);
    cursor = res.body.nextCursor;
  } while (cursor);
  return all.reverse(); // oldest first
}

const idle = () => w.t0.app.webhookDispatcher.whenIdle();

async function advancePastRetry(attemptsMade: number): Promise<void> {
  clock.advance(Math.ceil(WEBHOOK_RETRY_DELAYS_MS[attemptsMade - 1]! * (1 + WEBHOOK_RETRY_JITTER_RATIO)) + 1);
  await idle();
}

const FAULTS: { mode: EndpointMode; firstAttempt: 'FAILED' | 'SUCCEEDED'; error?: RegExp }[] = [
  { mode: 'hang', firstAttempt: 'FAILED', error: new RegExp(`timed out after ${TIMEOUT_MS} ms`) },
  { mode: '500', firstAttempt: 'FAILED', error: /HTTP 500/ },
  { mode: 'reset', firstAttempt: 'FAILED', error: /socket hang up|ECONNRESET|closed/i },
  // Headers at once, then a body that never ends: the timeout covers the whole exchange.
  { mode: 'dribble', firstAttempt: 'FAILED', error: new RegExp(`timed out after ${TIMEOUT_MS} ms`) },
  { mode: 'slow', firstAttempt: 'SUCCEEDED' },
];

test.serial('hang, 500, reset, endless body, slow: failed attempts are recorded, nobody blocks anybody, every event arrives after recovery', async (t) => {
  const healthy = await endpoint('healthy', ['email.queued']);
  const faulty = new Map<EndpointMode, { id: string; ep: FaultyEndpoint }>();
  for (const f of FAULTS) {
    const e = await endpoint(f.mode, ['email.queued']);
    e.ep.setMode(f.mode);
    faulty.set(f.mode, e);
  }

  const emailIds: string[] = [];
  for (let i = 0; i < EVENTS; i++) {
    const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: `hook${i}@example.net`, subject: `event ${i}` }) });
    t.is(res.status, 200);
    emailIds.push(res.body.emailId);
  }

  // The healthy endpoint gets every event while the hung one still holds its requests.
  await healthy.ep.waitFor(EVENTS);
  t.true(faulty.get('hang')!.ep.hanging >= 1, 'the hung endpoint is holding requests right now');
  t.true(faulty.get('hang')!.ep.hanging <= 4, 'and only its own concurrency slots');
  t.is((await w.t0.request('GET', '/health')).status, 200);
  await w.settle(); // mail is not held up either
  for (const id of emailIds) t.is((await w.t0.request('GET', `/v1/emails/${id}`)).body.latestStatus, 'DELIVERED');

  await idle();
  const eventIds = [...new Set(healthy.ep.calls.map((c) => c.eventId))];
  t.is(eventIds.length, EVENTS);
  t.deepEqual(healthy.ep.calls.map((c) => c.dataId).sort(), [...emailIds].sort());
  for (const f of FAULTS) {
    const { id, ep } = faulty.get(f.mode)!;
    const list = await attempts(id);
    t.is(list.length, EVENTS, `${f.mode}: one attempt per event so far`);
    for (const a of list) {
      t.is(a.status, f.firstAttempt, `${f.mode}: first attempt ${f.firstAttempt}`);
      t.is(a.attempt, 1);
      if (f.error) {
        t.regex(a.error, f.error, `${f.mode}: the attempt records its cause`);
        t.truthy(a.nextAttemptAt, `${f.mode}: a retry is scheduled`);
      } else t.is(a.nextAttemptAt, null);
    }
    t.deepEqual([...new Set(ep.calls.map((c) => c.eventId))].sort(), [...eventIds].sort(), `${f.mode}: saw every event`);
  }

  // Recovery: every endpoint answers 200 from now on.
  for (const { ep } of faulty.values()) ep.setMode('ok');
  await advancePastRetry(1);

  for (const f of FAULTS) {
    const { id, ep } = faulty.get(f.mode)!;
    const list = await attempts(id);
    for (const eventId of eventIds) {
      const mine = list.filter((a) => a.eventId === eventId);
      t.true(ep.acknowledged(eventId) >= 1, `${f.mode}: ${eventId} acknowledged at least once`);
      t.deepEqual(
        mine.map((a) => a.status),
        f.firstAttempt === 'FAILED' ? ['FAILED', 'SUCCEEDED'] : ['SUCCEEDED'],
        `${f.mode}: ${eventId} attempts on record`,
      );
      t.is(ep.callsFor(eventId).length, mine.length, `${f.mode}: requests received = attempts recorded for ${eventId}`);
    }
  }
  for (const eventId of eventIds) t.is(healthy.ep.callsFor(eventId).length, 1, 'the healthy endpoint got each event exactly once');

  // Nothing more is sent for acknowledged events.
  const before = [...endpoints.values()].map((e) => e.calls.length);
  clock.advance(24 * 3600_000);
  await idle();
  t.deepEqual(
    [...endpoints.values()].map((e) => e.calls.length),
    before,
  );
});

test.serial(`an endpoint that hangs, fails and resets on every try is abandoned after ${WEBHOOK_MAX_ATTEMPTS} recorded attempts; the others carry on`, async (t) => {
  const cycle: EndpointMode[] = ['hang', '500', 'reset'];
  const broken = await endpoint('broken', ['email.sent']);
  broken.ep.setMode((i) => cycle[i % cycle.length]!);
  const healthy = await endpoint('healthy-2', ['email.sent']);

  const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'abandon@example.net' }) });
  t.is(res.status, 200);
  await w.settle();
  await broken.ep.waitFor(1);
  await idle();
  for (let made = 1; made < WEBHOOK_MAX_ATTEMPTS; made++) {
    t.is(broken.ep.calls.length, made, `attempt ${made} made`);
    await advancePastRetry(made);
  }
  t.is(broken.ep.calls.length, WEBHOOK_MAX_ATTEMPTS);
  // Long after, and even with the endpoint healthy again, no 7th attempt: the call was abandoned.
  broken.ep.setMode('ok');
  clock.advance(7 * 24 * 3600_000);
  await idle();
  t.is(broken.ep.calls.length, WEBHOOK_MAX_ATTEMPTS);
  t.is(new Set(broken.ep.calls.map((c) => c.eventId)).size, 1, 'one event, retried');

  const list = await attempts(broken.id);
  t.deepEqual(
    list.map((a) => [a.attempt, a.status, a.maxAttempts]),
    Array.from({ length: WEBHOOK_MAX_ATTEMPTS }, (_, i) => [i + 1, 'FAILED', WEBHOOK_MAX_ATTEMPTS]),
  );
  const causes = [new RegExp(`timed out after ${TIMEOUT_MS} ms`), /HTTP 500/, /socket hang up|ECONNRESET|closed/i];
  list.forEach((a, i) => t.regex(a.error, causes[i % causes.length]!, `attempt ${i + 1} records its cause`));
  t.true(list.slice(0, -1).every((a) => a.nextAttemptAt !== null));
  t.is(list[list.length - 1].nextAttemptAt, null, 'abandoned: no next attempt');

  t.is(healthy.ep.calls.length, 1, 'the healthy endpoint got the same event once');
  t.is(healthy.ep.calls[0]!.eventId, broken.ep.calls[0]!.eventId);
  t.is((await w.t0.request('GET', '/health')).status, 200);
});
