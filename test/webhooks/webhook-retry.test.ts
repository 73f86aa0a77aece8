import test from 'ava';
import { WEBHOOK_MAX_ATTEMPTS, WEBHOOK_RETRY_DELAYS_MS, WEBHOOK_RETRY_JITTER_RATIO, webhookRetryDelayMs } from '../../src/core/webhooks/webhook-retry.js';

test('six attempts: five growing waits from the table, jittered upward only, then abandoned', (t) => {
  t.is(WEBHOOK_MAX_ATTEMPTS, 6);
  t.is(WEBHOOK_RETRY_DELAYS_MS.length, WEBHOOK_MAX_ATTEMPTS - 1);
  for (let i = 1; i < WEBHOOK_RETRY_DELAYS_MS.length; i++) t.true(WEBHOOK_RETRY_DELAYS_MS[i]! > WEBHOOK_RETRY_DELAYS_MS[i - 1]!);
  for (let made = 1; made < WEBHOOK_MAX_ATTEMPTS; made++) {
    const base = WEBHOOK_RETRY_DELAYS_MS[made - 1]!;
    t.is(webhookRetryDelayMs(made, () => 0), base);
    t.is(webhookRetryDelayMs(made, () => 0.999999), Math.round(base * (1 + WEBHOOK_RETRY_JITTER_RATIO * 0.999999)));
  }
  t.is(webhookRetryDelayMs(WEBHOOK_MAX_ATTEMPTS), null);
  t.is(webhookRetryDelayMs(WEBHOOK_MAX_ATTEMPTS + 3), null);
});
