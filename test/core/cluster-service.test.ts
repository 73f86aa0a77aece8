import test from 'ava';
import pino from 'pino';
import { createClusterService } from '../../src/core/cluster/cluster-service.js';
import { ManualClock } from '../../src/lib/clock.js';
import type { ClusterRepository } from '../../src/store/repositories/cluster-repository.js';

/*
 * A node's beats never overlap, and none runs once it has left: a heartbeat written after its
 * row was deleted would make the others take it for alive, then for dead. The store here
 * records the calls made to it; a heartbeat waits until the test lets it go.
 */
function world() {
  const calls: string[] = [];
  let held: (() => void) | undefined;
  let onHeld = () => undefined as void;
  const none = { deliveries: 0, webhookCalls: 0, campaignBatches: 0, idempotencyKeys: 0, connections: 0, contactImports: 0, bounceNotices: 0 };
  const repo = {
    async join() {
      calls.push('join');
      return undefined;
    },
    async heartbeat() {
      calls.push('heartbeat');
      await new Promise<void>((resolve) => {
        held = resolve;
        onHeld();
      });
      return Date.now();
    },
    async setConnections() {
      calls.push('setConnections');
    },
    async members() {
      return [{ id: 'node-a' }];
    },
    async releaseOwn() {
      return none;
    },
    async releaseDeadOwners() {
      calls.push('sweep');
      return { live: ['node-a'], freed: none };
    },
    async silentSince() {
      return [];
    },
    async forgetSilent() {
      return 0;
    },
    async pruneRuns() {
      return 0;
    },
    async leave() {
      calls.push('leave');
    },
  } as unknown as ClusterRepository;
  const service = createClusterService({ repo, clock: new ManualClock(Date.now()), logger: pino({ level: 'silent' }), node: { id: 'node-a', hostname: 'h', pid: 1 }, listeners: () => ({}) });
  /** Resolves once a heartbeat waits; `go()` lets it through. */
  const heartbeatHeld = () => new Promise<void>((resolve) => (onHeld = () => (held ? resolve() : undefined)));
  const go = () => {
    const h = held;
    held = undefined;
    h?.();
  };
  return { calls, service, heartbeatHeld, go };
}

test('a sweep asked for during a beat runs after it, and a stop asked for meanwhile waits for both before the node leaves', async (t) => {
  const { calls, service, heartbeatHeld, go } = world();
  let waiting = heartbeatHeld();
  const started = service.start();
  await waiting;
  go();
  await started;
  calls.length = 0;
  // One beat under way (held in its heartbeat), then an operator's sweep, then a stop.
  waiting = heartbeatHeld();
  const first = service.sweepNow();
  await waiting;
  waiting = heartbeatHeld();
  const second = service.sweepNow();
  const stopped = service.stop();
  go();
  await waiting;
  t.deepEqual(calls, ['heartbeat', 'setConnections', 'sweep', 'heartbeat'], 'the second beat starts once the first has ended');
  go();
  await Promise.all([first, second, stopped]);
  t.is(calls.at(-1), 'leave', `nothing after the node left: ${calls.join(', ')}`);
  t.is(calls.filter((c) => c === 'leave').length, 1);
  const after = calls.length;
  await service.sweepNow();
  t.is(calls.length, after, 'no beat once the node has left');
});

test('a sweep that failed is tried again at the next beat, not half a minute later', async (t) => {
  // node-b is seen, then gone: the sweep that follows fails once (the store away for a moment).
  const none = { deliveries: 0, webhookCalls: 0, campaignBatches: 0, idempotencyKeys: 0, connections: 0, contactImports: 0, bounceNotices: 0 };
  let beats = 0;
  let sweeps = 0;
  let onBeat = () => undefined as void;
  const repo = {
    join: async () => undefined,
    async heartbeat() {
      beats++;
      onBeat();
      return Date.now();
    },
    setConnections: async () => undefined,
    members: async () => (beats === 1 ? [{ id: 'node-a' }, { id: 'node-b' }] : [{ id: 'node-a' }]),
    releaseOwn: async () => none,
    async releaseDeadOwners() {
      if (++sweeps === 2) throw new Error('canceling statement due to lock timeout');
      return { live: ['node-a'], freed: none };
    },
    silentSince: async () => [],
    forgetSilent: async () => 0,
    pruneRuns: async () => 0,
    leave: async () => undefined,
  } as unknown as ClusterRepository;
  const service = createClusterService({ repo, clock: new ManualClock(Date.now()), logger: pino({ level: 'silent' }), node: { id: 'node-a', hostname: 'h', pid: 1 }, listeners: () => ({}) });
  // The beat timer does not keep a process alive; this test has to be.
  const alive = setInterval(() => undefined, 1000);
  t.teardown(async () => {
    clearInterval(alive);
    await service.stop();
  });
  await service.start();
  // The beat after the failed one has ended once the one after it begins (beats never overlap).
  await new Promise<void>((resolve) => (onBeat = () => (beats === 4 ? resolve() : undefined)));
  t.is(sweeps, 3, 'beat 1 swept, beat 2 failed to, beat 3 swept again');
});

test('a sweep that freed bounce notice claims has this node claim them before the beat ends; one that freed none does not', async (t) => {
  const none = { deliveries: 0, webhookCalls: 0, campaignBatches: 0, idempotencyKeys: 0, connections: 0, contactImports: 0, bounceNotices: 0 };
  const freed = [{ ...none, bounceNotices: 2 }, none];
  let sweeps = 0;
  const repo = {
    join: async () => undefined,
    heartbeat: async () => Date.now(),
    setConnections: async () => undefined,
    members: async () => [{ id: 'node-a' }],
    releaseOwn: async () => none,
    releaseDeadOwners: async () => ({ live: ['node-a'], freed: freed[sweeps++] ?? none }),
    silentSince: async () => [],
    forgetSilent: async () => 0,
    pruneRuns: async () => 0,
    leave: async () => undefined,
  } as unknown as ClusterRepository;
  const claimedAfter: number[] = [];
  const service = createClusterService({
    repo,
    clock: new ManualClock(Date.now()),
    logger: pino({ level: 'silent' }),
    node: { id: 'node-a', hostname: 'h', pid: 1 },
    listeners: () => ({}),
    onBounceNoticesFreed: async () => {
      claimedAfter.push(sweeps);
    },
  });
  t.teardown(() => service.stop());
  await service.start(); // its first beat sweeps, and frees two
  t.deepEqual(claimedAfter, [1]);
  await service.sweepNow();
  t.is(sweeps, 2);
  t.deepEqual(claimedAfter, [1], 'nothing freed: nothing to claim');
});
