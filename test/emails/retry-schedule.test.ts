import test from 'ava';
import { MAX_HINT_MS, RETRY_DELAYS_MS, RETRY_JITTER_RATIO, retryDelayMs } from '../../src/core/deliveries/retry-schedule.js';

const MINUTE = 60_000;

test('the schedule steps by attempts made, jittered ±15%, and stays on its last step', (t) => {
  t.is(retryDelayMs(1, undefined, () => 0.5), RETRY_DELAYS_MS[0]);
  t.is(retryDelayMs(1, undefined, () => 0), Math.round(RETRY_DELAYS_MS[0]! * (1 - RETRY_JITTER_RATIO)));
  t.is(retryDelayMs(1, undefined, () => 1), Math.round(RETRY_DELAYS_MS[0]! * (1 + RETRY_JITTER_RATIO)));
  t.is(retryDelayMs(3, undefined, () => 0.5), 10 * MINUTE);
  t.is(retryDelayMs(50, undefined, () => 0.5), RETRY_DELAYS_MS[RETRY_DELAYS_MS.length - 1]);
});

test('a "try again in N" hint longer than the schedule is honoured, never sooner, and jittered so a host\'s deferrals do not return at once', (t) => {
  t.is(retryDelayMs(1, 20 * MINUTE, () => 0), 20 * MINUTE);
  t.is(retryDelayMs(1, 20 * MINUTE, () => 1), Math.round(20 * MINUTE * (1 + RETRY_JITTER_RATIO)));
  const spread = new Set(Array.from({ length: 20 }, (_, i) => retryDelayMs(1, 20 * MINUTE, () => i / 20)));
  t.is(spread.size, 20);
  for (const ms of spread) t.true(ms >= 20 * MINUTE);
  // A hint shorter than the schedule does not make the retry sooner.
  t.is(retryDelayMs(4, 1 * MINUTE, () => 0.5), 20 * MINUTE);
  // A silly hint is capped.
  t.true(retryDelayMs(1, 100 * 60 * MINUTE, () => 0) <= MAX_HINT_MS);
});
