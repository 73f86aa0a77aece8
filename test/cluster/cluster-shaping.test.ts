import { Writable } from 'node:stream';
import test from 'ava';
import { pino } from 'pino';
import type { DeepPartial } from '../../src/config/load.js';
import type { Config } from '../../src/config/defaults.js';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld, sendBody, type MailWorld } from '../helpers/mail-world.js';
import { createTestDatabase, dropTestDatabase } from '../helpers/pg-databases.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

// Traffic shaping's promises to remote servers hold for the cluster, not per node: two nodes in
// one process on one PostgreSQL database, one ManualClock. A message rate of N/min is N/min
// for both together, a warm-up budget of N a day is N for both, and a (source, rollup)'s
// connection limit counts the sessions of both. Each node greets with its own EHLO name, so the
// MX can tell who sent what.

interface Pair {
  w: MailWorld;
  b: TestApp;
  clock: ManualClock;
  /** Waits until both engines have nothing in flight and nothing due. */
  settle(): Promise<void>;
  close(): Promise<void>;
}

/** A debug logger that tells onLine about each line's event field. */
function eventLogger(onEvent: (event: string, line: Record<string, unknown>) => void) {
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) {
        const parsed = JSON.parse(line) as Record<string, unknown>;
        if (typeof parsed.event === 'string') onEvent(parsed.event, parsed);
      }
      done();
    },
  });
  return pino({ level: 'debug' }, stream);
}

async function twoNodes(
  t: { teardown(fn: () => Promise<void>): void },
  clock: ManualClock,
  outbound: Record<string, unknown>,
  onEvent?: (node: string, event: string, line: Record<string, unknown>) => void,
): Promise<Pair> {
  const url = await createTestDatabase();
  const shared: DeepPartial<Config> = { store: { url }, rateLimit: { perSecond: 1_000_000 } };
  const logger = (node: string) => (onEvent ? eventLogger((event, line) => onEvent(node, event, line)) : undefined);
  const w = await startMailWorld({ clock, logger: logger('node-a'), overrides: { ...shared, hostname: 'node-a.posthorn.test', cluster: { nodeName: 'node-a' }, outbound } as never });
  const b = await startTestApp({
    zone: w.zone,
    clock,
    logger: logger('node-b'),
    overrides: { ...shared, hostname: 'node-b.posthorn.test', cluster: { nodeName: 'node-b' }, outbound: { ...w.t0.config.outbound, ...outbound } } as never,
  });
  (b as { key: string }).key = w.t0.key;
  const pair: Pair = {
    w,
    b,
    clock,
    async settle() {
      b.app.engine.wake();
      await Promise.all([w.settle(), b.app.engine.whenIdle()]);
    },
    async close() {
      await b.close();
      await w.close();
      await dropTestDatabase(url);
    },
  };
  t.teardown(() => pair.close());
  return pair;
}

/** Sends one message per recipient, alternating between the nodes' APIs. */
async function sendAlternating(p: Pair, recipients: string[]): Promise<void> {
  const nodes = [p.w.t0, p.b];
  for (let i = 0; i < recipients.length; i++) {
    const res = await nodes[i % 2]!.request('POST', '/v1/emails', { body: sendBody(p.w, { to: recipients[i]!, subject: `shaped ${i}` }) });
    if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  }
}

test('a message rate of 120/min is 120/min for the two nodes together, evenly spaced, both sending', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 10, 27, 9, 0, 0));
  const p = await twoNodes(t, clock, { shaping: [{ domain: 'slow.example', messageRate: '120/min' }] });
  p.w.addRecipientDomain('slow.example');
  const got: { at: number; helo: string }[] = [];
  p.w.sink.setBehaviour({
    onData: (m) => {
      if (m.rcptTo[0]!.endsWith('@slow.example')) got.push({ at: clock.nowMs(), helo: m.heloName });
      return undefined;
    },
  });
  const N = 30;
  await sendAlternating(p, Array.from({ length: N }, (_, i) => `user${i}@slow.example`));
  await p.settle();
  t.is(got.length, 1, 'the clock has not moved: one message for the cluster, not one per node');
  // Steps shorter than the spacing (500 ms); both engines take what is due at each.
  for (let step = 0; step < 400 && got.length < N; step++) {
    clock.advance(100);
    await p.settle();
  }
  t.is(got.length, N);
  const span = got.at(-1)!.at - got[0]!.at;
  const perMinute = ((N - 1) / span) * 60_000;
  t.true(Math.abs(perMinute - 120) <= 12, `observed ${perMinute.toFixed(1)}/min over ${span} ms (one node's rate each would be twice that)`);
  for (let i = 1; i < got.length; i++) t.true(got[i]!.at - got[i - 1]!.at >= 500, `gap ${i}: ${got[i]!.at - got[i - 1]!.at} ms`);
  const byNode = (helo: string) => got.filter((g) => g.helo === helo).length;
  t.true(byNode('node-a.posthorn.test') > 0 && byNode('node-b.posthorn.test') > 0, `a sent ${byNode('node-a.posthorn.test')}, b sent ${byNode('node-b.posthorn.test')}`);
  // What waited was parked, never attempted.
  const attempts = await p.w.t0.app.store.db.selectFrom('deliveries').select((eb) => eb.fn.max('attempts').as('n')).where('rcpt_domain', '=', 'slow.example').executeTakeFirstOrThrow();
  t.is(Number(attempts.n), 1);
});

test('a warm-up budget of 10 a day is 10 for the cluster: 30 messages over two nodes, 10 on day 1, 10 on day 2', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 11, 1, 10, 0, 0));
  const sources = [{ name: 'fresh', localAddress: '127.0.0.2', ehloName: 'fresh.sender.test', warmup: { start: '2026-12-01', schedule: [10, 10] } }];
  const p = await twoNodes(t, clock, { sources });
  // Several transactions ask at once on both nodes: the budget is taken atomically in the store.
  await sendAlternating(p, Array.from({ length: 30 }, (_, i) => `warm${i}@example.net`));
  await p.settle();
  const delivered = () => p.w.sink.messages.filter((m) => m.rcptTo[0]!.startsWith('warm')).length;
  t.is(delivered(), 10, 'day 1: the budget, once for both nodes');
  const used = await p.w.t0.app.store.db.selectFrom('warmup_usage').selectAll().execute();
  t.deepEqual(used.map((u) => [u.source, u.rollup, u.day, u.used]), [['fresh', 'example.net', '2026-12-01', 10]]);
  const waiting = (await p.b.app.services.queue.messages({ destination: 'example.net' }, 100)).messages;
  t.is(waiting.length, 20);
  t.true(waiting.every((m) => m.state === 'suspended' && m.attempts === 0 && /^warm-up: day 1 budget of 10/.test(m.heldReason ?? '')));
  clock.set(Date.UTC(2026, 11, 2, 0, 0, 1));
  await p.settle();
  t.is(delivered(), 20, 'day 2: ten more');
  clock.set(Date.UTC(2026, 11, 3, 0, 0, 1));
  await p.settle();
  t.is(delivered(), 30, 'after the schedule, no cap');
  t.true(p.w.sink.messages.every((m) => m.heloName === 'fresh.sender.test'));
});

test('a (source, rollup) connection limit of 1 is one session for the cluster', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 10, 27, 9, 0, 0));
  // A node refused a session by the cluster's count for the shaped (source, rollup) logs it.
  let onRefusal: (node: string) => void = () => undefined;
  const p = await twoNodes(t, clock, { shaping: [{ domain: 'one.example', connectionLimit: 1 }] }, (node, event, line) => {
    if (event === 'cluster.connection_limit' && String(line.destination).startsWith('shape ')) onRefusal(node);
  });
  p.w.addRecipientDomain('one.example');
  // DATA replies wait, so the one session stays busy while both nodes hold mail for the
  // rollup; without the cluster's count each node would open its own.
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const refusedBy = new Set<string>();
  const refused = new Promise<void>((resolve) => {
    onRefusal = (node) => {
      refusedBy.add(node);
      resolve();
    };
  });
  let exceeded!: () => void;
  const tooMany = new Promise<void>((resolve) => (exceeded = resolve));
  let heldFirst!: () => void;
  const firstHeld = new Promise<void>((resolve) => (heldFirst = resolve));
  p.w.sink.setBehaviour({
    holdData: () => {
      heldFirst();
      return gate;
    },
    onConnect: () => {
      if (p.w.sink.peakConnections > 1) exceeded();
      return undefined;
    },
  });
  const before = p.w.sink.messages.length;
  const send = (node: TestApp, i: number) => node.request('POST', '/v1/emails', { body: sendBody(p.w, { to: `one${i}@one.example`, subject: `one ${i}` }) });
  try {
    // Node a has the rollup's one session busy; then node b gets mail for it too.
    t.is((await send(p.w.t0, 0)).status, 200);
    await firstHeld;
    for (let i = 1; i < 12; i++) t.is((await send(p.b, i)).status, 200);
    await Promise.race([refused, tooMany]);
    t.log(`refused a session: ${[...refusedBy].join(', ')}`);
    t.is(p.w.sink.peakConnections, 1, 'one session while both nodes hold mail for the rollup');
  } finally {
    release();
    p.w.sink.setBehaviour({ holdData: undefined, onConnect: undefined });
    onRefusal = () => undefined;
  }
  await p.w.sink.waitForMessages(before + 12, 30_000);
  await p.settle();
  t.is(p.w.sink.peakConnections, 1);
});
