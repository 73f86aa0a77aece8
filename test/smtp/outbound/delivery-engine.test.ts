import test from 'ava';
import { ManualClock } from '../../../src/lib/clock.js';
import { createLogger } from '../../../src/lib/logger.js';
import { DeliveryEngine, type DeliveryEngineOptions } from '../../../src/smtp/outbound/delivery-engine.js';
import type { AttemptResult, DeliveryGroup, DeliveryService } from '../../../src/core/deliveries/delivery-service.js';
import type { TransactionResult } from '../../../src/smtp/outbound/smtp-client-types.js';

// The engine's loop against a store whose claim we hold: the shutdown races that the
// composed app only meets by chance.

function deferred<T>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

test('stop() while a claim is in progress settles once the claim returns, however long the idle poll', async (t) => {
  const claimStarted = deferred<void>();
  const claimResult = deferred<DeliveryGroup[]>();
  let claims = 0;
  const deliveries = {
    claim: () => {
      claims++;
      claimStarted.resolve();
      return claimResult.promise;
    },
  } as unknown as DeliveryService;
  const engine = new DeliveryEngine({
    deliveries,
    messages: {} as never,
    mx: {} as never,
    pool: { abandonQueued: () => 0 } as never,
    clock: new ManualClock(0),
    logger: createLogger('silent'),
    port: 25,
    // An hour: a loop that went to sleep after stop() would hold stop() for the test's timeout.
    idlePollMs: 3_600_000,
  });
  engine.start();
  await claimStarted.promise;
  const stopped = engine.stop();
  claimResult.resolve([]);
  await stopped;
  t.is(claims, 1, 'no claim round after stop()');
});

test('a row whose attempt ends while a claim is being made is not attempted again when that claim returns it', async (t) => {
  // The store's view: the claim's UPDATE took delivery 1 again (its lease had run out and the
  // sweep freed it) just before its attempt's results were written; the engine sees the claim's
  // rows only after that attempt has ended. Sending it again would send the message twice.
  const group = oneGroup();
  const secondClaim = deferred<void>();
  const secondClaimResult = deferred<DeliveryGroup[]>();
  const held = deferred<TransactionResult>();
  const recorded = deferred<void>();
  const attempting: number[][] = [];
  const released: number[][] = [];
  const results: AttemptResult[][] = [];
  let claims = 0;
  let sends = 0;
  const deliveries = {
    claim: (_limit: number, _skip: readonly string[], inFlight?: ReadonlySet<number>) => {
      attempting.push([...(inFlight ?? [])]);
      claims++;
      if (claims === 1) return Promise.resolve([group]);
      if (claims === 2) {
        secondClaim.resolve();
        return secondClaimResult.promise;
      }
      return Promise.resolve([]);
    },
    complete: async (_g: DeliveryGroup, _started: Date | null, r: AttemptResult[]) => {
      results.push(r);
      recorded.resolve();
    },
    releaseGroups: async (groups: DeliveryGroup[]) => {
      released.push(groups.flatMap((g) => g.deliveries.map((d) => d.id)));
    },
    keepLeases: async () => undefined,
    bodyOf: async () => ({ text_body: 'x', html_body: null, attachments_json: null }),
  } as unknown as DeliveryService;
  const engine = routedEngine(deliveries, () => {
    sends++;
    return sends === 1 ? held.promise : Promise.resolve(delivered());
  });
  engine.start();
  t.teardown(() => engine.stop());
  // The first attempt is on the wire; the next claim round starts.
  engine.wake();
  await secondClaim.promise;
  held.resolve(delivered());
  await recorded.promise;
  // The attempt's end (after its results are written) is a few promise steps later.
  await new Promise((r) => setImmediate(r));
  secondClaimResult.resolve([group]);
  await engine.whenIdle();
  t.is(sends, 1, 'sent once');
  t.is(results.length, 1);
  t.deepEqual(released, [[1]], 'the row goes back (its lease, if the results did not clear it)');
  t.deepEqual(attempting[1], [1], 'the claim was told what was in flight (its leases are kept)');
});

test('a domain skipped as full by a claim round is claimed again when its attempt ends during that round', async (t) => {
  // One in flight per domain: the second round skips example.net. Its attempt ends while that
  // round is being made, so the round's "nothing due" says nothing about example.net.
  const group = oneGroup();
  const secondClaim = deferred<void>();
  const secondClaimResult = deferred<DeliveryGroup[]>();
  const held = deferred<TransactionResult>();
  const recorded = deferred<void>();
  const skipped: string[][] = [];
  const deliveries = {
    claim: (_limit: number, skip: readonly string[]) => {
      skipped.push([...skip]);
      if (skipped.length === 1) return Promise.resolve([group]);
      if (skipped.length === 2) {
        secondClaim.resolve();
        return secondClaimResult.promise;
      }
      return Promise.resolve([]);
    },
    complete: async () => recorded.resolve(),
    releaseGroups: async () => undefined,
    keepLeases: async () => undefined,
    bodyOf: async () => ({ text_body: 'x', html_body: null, attachments_json: null }),
  } as unknown as DeliveryService;
  const engine = routedEngine(deliveries, () => held.promise, { maxInFlightPerDomain: 1 });
  engine.start();
  t.teardown(() => engine.stop());
  await secondClaim.promise;
  t.deepEqual(skipped[1], ['example.net']);
  held.resolve(delivered());
  await recorded.promise;
  await new Promise((r) => setImmediate(r));
  secondClaimResult.resolve([]);
  await engine.whenIdle();
  t.is(skipped.length, 3, 'idle only after a round that skipped nothing');
  t.deepEqual(skipped[2], []);
});

test('attempts that end while the leases in flight are being renewed free their slots: the next claim does not wait for the idle poll', async (t) => {
  // Two in flight at most: one attempt fills half, so the loop renews leases and waits for a
  // slot instead of claiming. The attempt ends during the renewal, before anyone waits.
  const renewing = deferred<void>();
  const renewed = deferred<void>();
  const held = deferred<TransactionResult>();
  const recorded = deferred<void>();
  const secondClaim = deferred<void>();
  let claims = 0;
  const deliveries = {
    claim: () => {
      claims++;
      if (claims === 2) secondClaim.resolve();
      return Promise.resolve(claims === 1 ? [oneGroup()] : []);
    },
    keepLeases: () => {
      renewing.resolve();
      return renewed.promise;
    },
    complete: async () => recorded.resolve(),
    releaseGroups: async () => undefined,
    bodyOf: async () => ({ text_body: 'x', html_body: null, attachments_json: null }),
  } as unknown as DeliveryService;
  const engine = routedEngine(deliveries, () => held.promise, { maxInFlight: 2 });
  engine.start();
  t.teardown(() => engine.stop());
  await renewing.promise;
  held.resolve(delivered());
  await recorded.promise;
  await new Promise((r) => setImmediate(r));
  renewed.resolve();
  // With an hour's idle poll, this claim comes only if the loop saw the freed slot itself.
  await secondClaim.promise;
  t.is(claims, 2);
});

/** One email to one recipient at example.net. */
function oneGroup(): DeliveryGroup {
  return {
    email: { id: 'em_1', team_id: 1 },
    domain: { name: 'example.com', bounceLabel: 'b', tlsPolicy: 'OPPORTUNISTIC' },
    rcptDomain: 'example.net',
    deliveries: [{ id: 1, recipient: 'r@example.net' }],
  } as unknown as DeliveryGroup;
}

/** An engine on a fixed route whose transactions `send` answers; an hour's idle poll, so only wakes move it. */
function routedEngine(deliveries: DeliveryService, send: () => Promise<TransactionResult>, extra: Partial<DeliveryEngineOptions> = {}): DeliveryEngine {
  return new DeliveryEngine({
    deliveries,
    messages: { build: async () => Buffer.from('Subject: x\r\n\r\nx\r\n') } as never,
    mx: {} as never,
    pool: { abandonQueued: () => 0, send } as never,
    clock: new ManualClock(0),
    logger: createLogger('silent'),
    port: 25,
    route: { host: 'mx.example.net', address: '127.0.0.1', port: 25 },
    idlePollMs: 3_600_000,
    ...extra,
  });
}

function delivered(): TransactionResult {
  return { connected: true, transactionStarted: true, secure: false, remoteHost: 'mx.example.net', recipients: [{ recipient: 'r@example.net', outcome: 'delivered', code: 250, response: '250 ok' }] } as TransactionResult;
}
