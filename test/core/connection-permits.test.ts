import test from 'ava';
import pino from 'pino';
import { createConnectionPermits } from '../../src/core/cluster/connection-permits.js';
import type { ClusterRepository } from '../../src/store/repositories/cluster-repository.js';

/*
 * The store's count of a node's sessions must end equal to what the node holds, whatever the
 * order in which a heartbeat's count write and an acquire or release in flight reach the store.
 * The store here is a map whose operations take effect when the test says so.
 */
function world() {
  const stored = new Map<string, number>();
  const gates: { name: string; open: () => void }[] = [];
  const gate = (name: string) => new Promise<void>((resolve) => gates.push({ name, open: resolve }));
  let acquires = 0;
  const repo = {
    async acquireConnection(key: string) {
      acquires++;
      stored.set(key, (stored.get(key) ?? 0) + 1); // committed at once; the answer comes later
      await gate('acquire');
      return true;
    },
    async releaseConnection(key: string) {
      await gate('release'); // the decrement commits after the gate
      stored.set(key, Math.max(0, (stored.get(key) ?? 0) - 1));
    },
  } as unknown as ClusterRepository;
  const permits = createConnectionPermits({ repo, node: 'node-a', logger: pino({ level: 'silent' }) });
  const write = (held: ReadonlyMap<string, number>) => {
    stored.clear();
    for (const [k, n] of held) stored.set(k, n);
    return Promise.resolve();
  };
  const openAll = async () => {
    for (let i = 0; i < 10; i++) {
      for (const g of gates.splice(0)) g.open();
      await new Promise((resolve) => setImmediate(resolve));
    }
  };
  return { stored, permits, write, openAll, gates, acquires: () => acquires };
}

test('a count write while an acquire is in flight waits for it: the store keeps the new session', async (t) => {
  const w = world();
  const acquired = w.permits.acquire('mx:25', 2);
  await new Promise((resolve) => setImmediate(resolve));
  t.is(w.stored.get('mx:25'), 1);
  const written = w.permits.writeHeld(w.write); // the heartbeat, before the acquire has answered
  await w.openAll();
  t.true(await acquired);
  await written;
  t.is(w.stored.get('mx:25'), 1, 'the store counts the session the node holds');
});

test('a count write while a release is in flight waits for it: the store is not a session short', async (t) => {
  const w = world();
  const two = [w.permits.acquire('mx:25', 2), w.permits.acquire('mx:25', 2)];
  await w.openAll();
  await Promise.all(two);
  t.is(w.stored.get('mx:25'), 2);
  w.permits.release('mx:25');
  const written = w.permits.writeHeld(w.write);
  await w.openAll();
  await written;
  await w.openAll();
  t.is(w.stored.get('mx:25') ?? 0, 1, 'one session is still open');
});

test('an acquire asked for while a count write is under way waits until the write is done', async (t) => {
  const w = world();
  let finish!: () => void;
  const slowWrite = (held: ReadonlyMap<string, number>) => new Promise<void>((resolve) => (finish = () => void w.write(held).then(resolve)));
  const written = w.permits.writeHeld(slowWrite);
  const acquired = w.permits.acquire('mx:25', 2);
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
  t.is(w.acquires(), 0, 'not asked of the store during the write');
  finish();
  await written;
  await w.openAll();
  t.true(await acquired);
  t.is(w.stored.get('mx:25'), 1);
});
