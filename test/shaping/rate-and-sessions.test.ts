import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld } from '../helpers/mail-world.js';

// Traffic shaping's rate and session limits, on the loopback MX with the injected clock: a
// message rate spaces one rollup's mail evenly (the clock moves, the engine follows) while
// another rollup goes at once; maxDeliveriesPerConnection bounds what one session carries.

const T0 = Date.UTC(2026, 10, 25, 9, 0, 0);

async function sendMany(w: Awaited<ReturnType<typeof startMailWorld>>, to: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const res = await w.t0.request('POST', '/v1/emails', { body: { from: `News <news@${w.domain.name}>`, to: `user${i}@${to}`, subject: `Hi ${i}`, text: 'Hello' } });
    if (res.status !== 200) throw new Error(JSON.stringify(res.body));
    ids.push(res.body.emailId);
  }
  return ids;
}

test('a rule of 5/s to one domain spaces its 60 messages at 5 per second of the clock, while another domain goes at once', async (t) => {
  const clock = new ManualClock(T0);
  const w = await startMailWorld({
    clock,
    overrides: { rateLimit: { perSecond: 1_000_000 }, outbound: { shaping: [{ domain: 'slow.example', messageRate: '5/s' }] } as never },
  });
  t.teardown(() => w.close());
  w.addRecipientDomain('slow.example');
  const receivedAt: Record<string, number[]> = { 'slow.example': [], 'example.net': [] };
  w.sink.setBehaviour({
    onData: (m) => {
      const domain = m.rcptTo[0]!.split('@')[1]!;
      receivedAt[domain]?.push(clock.nowMs());
      return undefined;
    },
  });
  const slowIds = await sendMany(w, 'slow.example', 60);
  await sendMany(w, 'example.net', 60);
  await w.settle();
  // The clock has not moved: the other domain is all through, the limited one has sent one.
  t.is(receivedAt['example.net']!.length, 60);
  t.is(receivedAt['slow.example']!.length, 1);
  // The held ones are parked, not attempted: the operator sees them suspended with the rate as the reason.
  const queued = await w.t0.app.services.queue.messages({ destination: 'slow.example' }, 100);
  t.is(queued.messages.length, 59);
  t.true(queued.messages.every((m) => m.state === 'suspended' && m.attempts === 0 && /message rate 5\/s to slow\.example/.test(m.heldReason ?? '')));

  // Move the clock in steps shorter than the spacing; the engine takes each message as its slot comes.
  for (let step = 0; step < 400 && receivedAt['slow.example']!.length < 60; step++) {
    clock.advance(50);
    await w.settle();
  }
  const times = receivedAt['slow.example']!;
  t.is(times.length, 60);
  const rate = (times.length - 1) / ((times.at(-1)! - times[0]!) / 1000);
  t.true(Math.abs(rate - 5) <= 0.5, `observed ${rate.toFixed(2)}/s`);
  // Evenly spaced, never a burst: no two messages closer than the spacing.
  for (let i = 1; i < times.length; i++) t.true(times[i]! - times[i - 1]! >= 200, `gap ${i}: ${times[i]! - times[i - 1]!} ms`);
  // No attempt was counted for the wait: each email went QUEUED, SENT, DELIVERED, without DELIVERY_DELAYED.
  for (const id of slowIds) {
    const statuses = ((await w.t0.request('GET', `/v1/emails/${id}`)).body.emailEvents as { status: string }[]).map((e) => e.status);
    t.deepEqual(statuses.filter((x) => x !== 'QUEUED' && x !== 'SENT'), ['DELIVERED'], id);
  }
  const summary = await w.t0.app.services.queue.summary();
  t.is(summary.totals.suspended, 0);
  t.true(summary.shaping.rates.some((r) => r.rollup === 'slow.example' && r.messageRate === '5/s' && r.until === null));
});

test('maxDeliveriesPerConnection = 3 (one connection at a time) carries 7 messages in ceil(7/3) = 3 sessions', async (t) => {
  const clock = new ManualClock(T0);
  const w = await startMailWorld({
    clock,
    overrides: { rateLimit: { perSecond: 1_000_000 }, outbound: { shaping: [{ domain: 'example.org', maxDeliveriesPerConnection: 3, connectionLimit: 1 }] } as never },
  });
  t.teardown(() => w.close());
  const before = w.sink.connectionCount;
  await sendMany(w, 'example.org', 7);
  await w.settle();
  t.is(w.sink.messages.length, 7);
  t.is(w.sink.connectionCount - before, 3);
  const byConnection = new Map<string, number>();
  for (const m of w.sink.messages) byConnection.set(m.connectionId, (byConnection.get(m.connectionId) ?? 0) + 1);
  t.deepEqual([...byConnection.values()].sort(), [1, 3, 3]);
});

test('maxRecipientsPerTransaction splits one email to many recipients of a domain into transactions of at most that many', async (t) => {
  const clock = new ManualClock(T0);
  const w = await startMailWorld({ clock, overrides: { outbound: { shaping: [{ domain: 'example.net', maxRecipientsPerTransaction: 2 }] } as never } });
  t.teardown(() => w.close());
  const to = ['a@example.net', 'b@example.net', 'c@example.net', 'd@example.net', 'e@example.net'];
  const res = await w.t0.request('POST', '/v1/emails', { body: { from: `News <news@${w.domain.name}>`, to, subject: 'Hi', text: 'Hello' } });
  t.is(res.status, 200);
  await w.settle();
  t.deepEqual(w.sink.messages.map((m) => m.rcptTo.length), [2, 2, 1]);
  t.deepEqual(w.sink.messages.flatMap((m) => m.rcptTo).sort(), to);
});
