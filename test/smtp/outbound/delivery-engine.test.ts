import test from 'ava';
import { ManualClock } from '../../../src/lib/clock.js';
import { createLogger } from '../../../src/lib/logger.js';
import { DeliveryEngine } from '../../../src/smtp/outbound/delivery-engine.js';
import type { DeliveryGroup, DeliveryService } from '../../../src/core/deliveries/delivery-service.js';

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
