import type { TestFn } from 'ava';
import { installPgCounters, installSqliteCounters } from '../../../bench/store-counters.js';
import { ManualClock } from '../../../src/lib/clock.js';
import { startMailWorld, type MailWorld } from '../../helpers/mail-world.js';
import { testStoreKind } from '../../helpers/pg-databases.js';
import { startWebhookReceiver, type WebhookReceiver } from '../../webhooks/webhook-receiver.js';

/** A mail world with two webhook receivers (one per team) and a count of the store's write transactions. */
export interface ClaimBatchWorld {
  w: MailWorld;
  hookA: WebhookReceiver;
  hookB: WebhookReceiver;
  /** Write transactions committed so far. */
  writes(): number;
}

/**
 * The world of the tests that one claim records many closed groups in one write; call at the
 * top of the file: the counters patch the store drivers, so they go in before the store opens.
 */
export function claimBatchWorld(test: TestFn): ClaimBatchWorld {
  const counters = testStoreKind() === 'postgres' ? installPgCounters() : installSqliteCounters();
  const clock = new ManualClock(Date.UTC(2026, 10, 22, 8, 0, 0));
  const world = { writes: () => counters.read().writeTransactions } as ClaimBatchWorld;
  test.before(async () => {
    world.w = await startMailWorld({ clock, overrides: { webhooks: { allowPrivate: true } } });
    world.hookA = await startWebhookReceiver();
    world.hookB = await startWebhookReceiver();
  });
  test.after.always(async () => {
    await world.w?.close();
    await world.hookA?.close();
    await world.hookB?.close();
  });
  return world;
}
