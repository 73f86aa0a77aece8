import test, { type ExecutionContext } from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { createLogger } from '../../src/lib/logger.js';
import { WebhookDispatcher } from '../../src/http-out/webhook-dispatcher.js';
import type { ClaimedCall, WebhookOutbox } from '../../src/core/webhooks/webhook-outbox.js';

// The dispatcher's loop against an outbox whose answers we time: the interleavings that the
// composed app meets only by chance, under load, on a store with several connections.

function deferred<T>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** An outbox with nothing else due and nothing to prune, whose claims, lookups and records the test writes. */
function fakeOutbox(parts: Pick<WebhookOutbox, 'claim' | 'nextDueForWebhook' | 'resolveTarget' | 'recordAttempt'>): WebhookOutbox {
  return {
    leaseMs: 300_000,
    dueByWebhook: async () => [],
    prune: async () => 0,
    signedRequest: (c: ClaimedCall) => ({ url: c.url, headers: {}, body: c.body }),
    ...parts,
  } as unknown as WebhookOutbox;
}

/** A started dispatcher (polls and sweeps out of the way) told that `webhookId` has a call due now. */
function startDispatcher(t: ExecutionContext, outbox: WebhookOutbox, clock: ManualClock, webhookId: string): WebhookDispatcher {
  const dispatcher = new WebhookDispatcher({ outbox, clock, logger: createLogger('silent'), timeoutMs: 1000, idlePollMs: 3_600_000, sweepIntervalMs: 3_600_000 });
  dispatcher.start();
  t.teardown(() => dispatcher.stop());
  dispatcher.noteDue(webhookId, 0);
  dispatcher.wake();
  return dispatcher;
}

test('a retry recorded while the claim round asks for the endpoint\'s next due call is not forgotten', async (t) => {
  // The claim round asks the store when the endpoint's next call is due; the store answers
  // from before the attempt's result committed (the call was leased: nothing due). The answer
  // arrives after the attempt noted its retry. The retry must still be attempted once due.
  const clock = new ManualClock(0);
  const row = { state: 'pending' as 'pending' | 'delivered', next: 0, leased: false, attempts: 0 };
  const call: ClaimedCall = { id: 1, webhookId: 'wh_1', eventId: 'ev_1', eventType: 'email.opened', attempts: 0, url: 'http://hook.test/', secret: 'whsec_x', body: '{}' };
  const staleAnswer = deferred<number | null>();
  const firstRecorded = deferred<void>();
  let lookups = 0;
  const outbox = fakeOutbox({
    claim: async () => {
      if (row.state !== 'pending' || row.leased || row.next > clock.nowMs()) return [];
      row.leased = true;
      return [{ ...call, attempts: row.attempts }];
    },
    nextDueForWebhook: async () => {
      lookups++;
      if (lookups === 1) return staleAnswer.promise;
      return row.state === 'pending' && !row.leased ? row.next : null;
    },
    // The attempt fails at once (no network here): the first is retried 5 s later, the second succeeds.
    resolveTarget: async () => {
      throw new Error('refused');
    },
    recordAttempt: async () => {
      row.attempts++;
      row.leased = false;
      if (row.attempts === 1) {
        row.next = clock.nowMs() + 5000;
        firstRecorded.resolve();
        return row.next;
      }
      row.state = 'delivered';
      return null;
    },
  });
  const dispatcher = startDispatcher(t, outbox, clock, 'wh_1');
  await firstRecorded.promise;
  // The attempt's end (it notes its retry once the record returns) is a few promise steps later.
  await new Promise((r) => setImmediate(r));
  staleAnswer.resolve(null);
  await dispatcher.whenIdle();
  t.is(row.attempts, 1);

  clock.advance(5000);
  await dispatcher.whenIdle();
  t.is(row.attempts, 2, 'the retry was attempted once due');
  t.is(row.state, 'delivered');
});

test('a call whose attempt ends while a claim re-takes its lapsed lease is not posted again', async (t) => {
  // The app clock jumps past the lease while the call is on the wire; the next claim takes the
  // row again, and the attempt records its result before that claim's answer arrives.
  const clock = new ManualClock(0);
  const call: ClaimedCall = { id: 7, webhookId: 'wh_7', eventId: 'ev_7', eventType: 'email.delivered', attempts: 0, url: 'http://hook.test/', secret: 'whsec_x', body: '{}' };
  const onTheWire = deferred<void>();
  const released = deferred<void>();
  const recorded = deferred<void>();
  const secondClaim = deferred<ClaimedCall[]>();
  let claims = 0;
  let attempts = 0;
  const outbox = fakeOutbox({
    claim: async () => {
      claims++;
      if (claims === 1) return [call];
      if (claims === 2) return secondClaim.promise;
      return [];
    },
    nextDueForWebhook: async () => null,
    resolveTarget: async () => {
      attempts++;
      onTheWire.resolve();
      await released.promise;
      throw new Error('refused'); // no network here: the outcome does not matter
    },
    recordAttempt: async () => {
      recorded.resolve();
      return null;
    },
  });
  const dispatcher = startDispatcher(t, outbox, clock, 'wh_7');
  await onTheWire.promise;
  clock.advance(300_001);
  dispatcher.noteDue('wh_7', clock.nowMs());
  dispatcher.wake();
  while (claims < 2) await new Promise((r) => setImmediate(r));
  released.resolve();
  await recorded.promise;
  await new Promise((r) => setImmediate(r));
  secondClaim.resolve([call]);
  await dispatcher.whenIdle();
  t.is(attempts, 1, 'posted once');
});

test('a claim the store refuses is tried again after an idle poll, not in a tight loop', async (t) => {
  // The store is away (PostgreSQL failing over, a full disk): every claim fails at once. The
  // endpoint is looked at again an idle poll later, not every millisecond with an error logged
  // each time, and is not forgotten.
  t.timeout(10_000, 'the dispatcher kept claiming, never idle');
  const clock = new ManualClock(0);
  const call: ClaimedCall = { id: 3, webhookId: 'wh_3', eventId: 'ev_3', eventType: 'email.sent', attempts: 0, url: 'http://hook.test/', secret: 'whsec_x', body: '{}' };
  let claims = 0;
  let storeBack = false;
  let attempts = 0;
  const outbox = fakeOutbox({
    claim: async () => {
      claims++;
      if (!storeBack) throw new Error('connect ECONNREFUSED');
      storeBack = false; // one call, claimed once
      return [call];
    },
    nextDueForWebhook: async () => null,
    resolveTarget: async () => {
      attempts++;
      throw new Error('refused'); // no network here: the outcome does not matter
    },
    recordAttempt: async () => null,
  });
  const dispatcher = new WebhookDispatcher({ outbox, clock, logger: createLogger('silent'), timeoutMs: 1000, idlePollMs: 1000, sweepIntervalMs: 3_600_000 });
  dispatcher.start();
  t.teardown(() => dispatcher.stop());
  dispatcher.noteDue('wh_3', 0);
  await dispatcher.whenIdle();
  t.is(claims, 1, 'one failed claim, then a wait');

  storeBack = true;
  clock.advance(1000);
  await dispatcher.whenIdle();
  t.is(claims, 2, 'claimed again an idle poll later');
  t.is(attempts, 1);
});
