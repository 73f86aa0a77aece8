import test from 'ava';
import { EventBus, type BusEvent } from '../../src/core/events.js';

const event: BusEvent = { type: 'email.delivered', teamId: 1, domainId: 1, occurredAt: '2026-03-08T12:00:00.000Z', data: {} };

test('settled() waits for the after-commit handlers still running, and for those they set off', async (t) => {
  const bus = new EventBus();
  const done: string[] = [];
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  bus.on('email.delivered', async () => {
    await gate;
    done.push('first');
    // a handler that emits in turn (as a count that unsubscribes a contact does)
    bus.emit({ ...event, type: 'email.failed' });
  });
  bus.on('email.failed', async () => {
    await Promise.resolve();
    done.push('second');
  });
  bus.on('email.delivered', () => {
    throw new Error('a failing handler is logged, never breaks the emitter or settled()');
  });
  bus.emit(event);
  let settled = false;
  const waiting = bus.settled().then(() => (settled = true));
  await Promise.resolve();
  t.false(settled, 'the first handler is still waiting');
  release();
  await waiting;
  t.deepEqual(done, ['first', 'second']);
  await bus.settled(); // nothing running: at once
});

test('inTransaction hands each transactional subscriber the whole batch, and nothing for an empty one', (t) => {
  const bus = new EventBus();
  const seen: number[] = [];
  bus.onInTransaction((batch) => seen.push(batch.length));
  bus.inTransaction([event, { ...event, type: 'email.sent' }]);
  bus.inTransaction([]);
  t.deepEqual(seen, [2]);
});
