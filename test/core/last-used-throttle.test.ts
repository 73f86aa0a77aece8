import test from 'ava';
import { createLastUsedThrottle } from '../../src/core/api-keys/last-used-throttle.js';

test('a key is due at its first use and once per interval after that', (t) => {
  const throttle = createLastUsedThrottle(60_000);
  t.true(throttle.due(1, 0));
  t.false(throttle.due(1, 60_000));
  t.true(throttle.due(1, 60_001));
  t.true(throttle.due(2, 60_001));
});

test('keys not used within the interval are dropped once many are held, and answer as before', (t) => {
  const throttle = createLastUsedThrottle(60_000);
  for (let id = 0; id < 10_000; id++) throttle.due(id, 0);
  t.is(throttle.size, 10_000);
  t.true(throttle.due(10_000, 60_001)); // every earlier entry is stale: dropped
  t.is(throttle.size, 1);
  t.true(throttle.due(5, 60_002)); // a dropped key is due, as it was while held
  t.false(throttle.due(10_000, 60_002));
});
