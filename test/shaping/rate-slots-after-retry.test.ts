import test from 'ava';
import { HOLDS_REFRESH_MS } from '../../src/core/shaping/traffic-shaper.js';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld } from '../helpers/mail-world.js';

// The slots the message rate hands to parked mail follow the mail that still waits: an operator's
// retry (or bounce) of parked mail does not push the mail claimed next behind slots no one will
// use, and the rate still holds (never a burst).

const T0 = Date.UTC(2026, 10, 25, 9, 0, 0);
const MIN = 60_000;

async function world(t: import('ava').ExecutionContext) {
  const clock = new ManualClock(T0);
  const w = await startMailWorld({
    clock,
    overrides: { rateLimit: { perSecond: 1_000_000 }, outbound: { shaping: [{ domain: 'slow.example', messageRate: '1/min' }] } as never },
  });
  t.teardown(() => w.close());
  w.addRecipientDomain('slow.example');
  const sentAt: number[] = [];
  w.sink.setBehaviour({
    onData: () => {
      sentAt.push(clock.nowMs());
      return undefined;
    },
  });
  const send = async (n: number, from = 0) => {
    for (let i = from; i < from + n; i++) {
      const res = await w.t0.request('POST', '/v1/emails', { body: { from: `News <news@${w.domain.name}>`, to: `user${i}@slow.example`, subject: `Hi ${i}`, text: 'Hello' } });
      if (res.status !== 200) throw new Error(JSON.stringify(res.body));
    }
  };
  const parkedAt = async () =>
    (await w.t0.app.services.queue.messages({ destination: 'slow.example' }, 100)).messages.map((m) => Date.parse(m.nextAttemptAt) - T0).sort((a, b) => a - b);
  /** Moves the clock to `ms` after T0 in steps shorter than the spacing, letting the engine follow. */
  const runTo = async (ms: number) => {
    while (clock.nowMs() < T0 + ms) {
      clock.advance(Math.min(5_000, T0 + ms - clock.nowMs()));
      await w.settle();
    }
  };
  return { w, clock, sentAt, send, parkedAt, runTo };
}

const minutes = (xs: number[]) => xs.map((x) => x / MIN);

test('a retry of mail parked for its rate slot re-plans it at the next free slots, not after the old ones, and keeps the rate', async (t) => {
  const { w, sentAt, send, parkedAt, runTo } = await world(t);
  await send(10);
  await w.settle();
  t.is(sentAt.length, 1);
  t.deepEqual(minutes(await parkedAt()), [1, 2, 3, 4, 5, 6, 7, 8, 9]);
  await runTo(MIN);
  t.is(sentAt.length, 2);

  // The operator retries the 8 still parked at minute 1: the slot of minute 1 is used, so none may go
  // now; they are parked again at minutes 2..9, the next free slots, not at 10..17.
  const { retried } = await w.t0.app.services.queue.retry('cli', { destination: 'slow.example' });
  t.is(retried, 8);
  await w.settle();
  t.is(sentAt.length, 2, 'no burst after the retry');
  t.deepEqual(minutes(await parkedAt()), [2, 3, 4, 5, 6, 7, 8, 9]);

  // Mail sent now waits behind them, at the next slot after the last one that waits.
  await send(1, 10);
  await w.settle();
  t.deepEqual(minutes(await parkedAt()), [2, 3, 4, 5, 6, 7, 8, 9, 10]);

  await runTo(10 * MIN);
  t.is(sentAt.length, 11);
  // One a minute: no gap longer than the spacing (nothing idled), none shorter (no burst).
  t.deepEqual(minutes(sentAt.map((x) => x - T0)), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
});

test('a retry of one delivery parked in the middle of the backlog leaves no idle slot', async (t) => {
  const { w, sentAt, send, parkedAt, runTo } = await world(t);
  await send(6);
  await w.settle();
  t.deepEqual(minutes(await parkedAt()), [1, 2, 3, 4, 5]);
  const third = (await w.t0.app.services.queue.messages({ destination: 'slow.example' }, 100)).messages.find((m) => Date.parse(m.nextAttemptAt) === T0 + 3 * MIN)!;
  await runTo(10_000);
  await w.t0.app.services.queue.retryDelivery('cli', third.deliveryId);
  await w.settle();
  // Its own slot is the first free one: it keeps its place, and nothing is parked behind a hole.
  t.deepEqual(minutes(await parkedAt()), [1, 2, 3, 4, 5]);
  await send(1, 6);
  await w.settle();
  t.deepEqual(minutes(await parkedAt()), [1, 2, 3, 4, 5, 6]);
  await runTo(6 * MIN);
  t.deepEqual(minutes(sentAt.map((x) => x - T0)), [0, 1, 2, 3, 4, 5, 6]);
});

test('mail an operator bounced while parked for its rate slot leaves no phantom slots: new mail goes at the next free slot', async (t) => {
  const { w, sentAt, send, parkedAt, runTo } = await world(t);
  await send(10);
  await w.settle();
  t.deepEqual(minutes(await parkedAt()), [1, 2, 3, 4, 5, 6, 7, 8, 9]);
  await runTo(10_000);
  const { bounced } = await w.t0.app.services.queue.bounce('cli', { destination: 'slow.example', reason: 'not wanted' });
  t.is(bounced, 9);
  // The engine finds that the mail no longer waits when it next reads the holds.
  await runTo(10_000 + HOLDS_REFRESH_MS);
  await send(2, 10);
  await w.settle();
  t.deepEqual(minutes(await parkedAt()), [1, 2]);
  await runTo(2 * MIN);
  t.deepEqual(minutes(sentAt.map((x) => x - T0)), [0, 1, 2]);
});
