/**
 * Connection limits, the FIFO queue, idle expiry and shutdown. Sessions are
 * counted by a TCP proxy in front of the sink (pool-helpers.ts), which sees
 * what is on the wire rather than what the pool believes.
 */
import { spawn } from 'node:child_process';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { LOOPBACK, poolFor, request, sinkFor, startCountingProxy } from './pool-helpers.js';
import type { SessionCounter } from './pool-helpers.js';

/** Deadline for the child process to exit by itself; hitting it means a handle kept it alive. */
const CHILD_EXIT_DEADLINE_MS = 15_000;

const via = (proxy: { port: number }, host = 'mx.sink.test') => ({ host, address: LOOPBACK, port: proxy.port });

test('per-host limit: 10 concurrent messages share 2 sessions, the rest wait their turn', async (t) => {
  const sink = await sinkFor(t, { starttls: false });
  const proxy = await startCountingProxy(t, sink.port);
  const pool = poolFor(t, { maxConnectionsPerHost: 2 });
  const results = await Promise.all(Array.from({ length: 10 }, (_, i) => pool.send(via(proxy), request([`r${i}@example.test`]))));
  t.true(results.every((r) => r.recipients[0]!.outcome === 'delivered'));
  await sink.waitForMessages(10);
  t.is(proxy.counter.maxActive, 2);
  t.is(proxy.accepted, 2);
  t.deepEqual(pool.stats, { connectionsOpened: 2, transactions: 10 });
});

test('global limit across destinations, with idle sessions evicted for waiting hosts', async (t) => {
  const counter: SessionCounter = { active: 0, maxActive: 0 };
  const sinkA = await sinkFor(t, { starttls: false });
  const sinkB = await sinkFor(t, { starttls: false });
  const proxyA = await startCountingProxy(t, sinkA.port, counter);
  const proxyB = await startCountingProxy(t, sinkB.port, counter);
  const pool = poolFor(t, { maxConnections: 3, maxConnectionsPerHost: 3 });
  const sends = Array.from({ length: 12 }, (_, i) => pool.send(via(i % 2 ? proxyB : proxyA), request([`r${i}@example.test`])));
  const results = await Promise.all(sends);
  t.true(results.every((r) => r.recipients[0]!.outcome === 'delivered'));
  await sinkA.waitForMessages(6);
  await sinkB.waitForMessages(6);
  t.true(counter.maxActive <= 3, `at most 3 sessions at once, saw ${counter.maxActive}`);
  t.true(proxyA.accepted >= 1 && proxyB.accepted >= 1);
});

test('a waiter blocked by the global limit evicts an idle session of another host (QUIT first)', async (t) => {
  const counter: SessionCounter = { active: 0, maxActive: 0 };
  const sinkA = await sinkFor(t, { starttls: false });
  const sinkB = await sinkFor(t, { starttls: false });
  const proxyA = await startCountingProxy(t, sinkA.port, counter);
  const proxyB = await startCountingProxy(t, sinkB.port, counter);
  const pool = poolFor(t, { maxConnections: 1 });
  t.is((await pool.send(via(proxyA), request(['a@example.test']))).recipients[0]!.outcome, 'delivered');
  t.is((await pool.send(via(proxyB), request(['b@example.test']))).recipients[0]!.outcome, 'delivered');
  await proxyA.waitForEnded(1);
  t.is(counter.maxActive, 1);
  t.is(pool.stats.connectionsOpened, 2);
});

test('requests over the limit are served first come, first served', async (t) => {
  const sink = await sinkFor(t, { starttls: false });
  const pool = poolFor(t, { maxConnectionsPerHost: 1 });
  const target = { host: 'mx.sink.test', address: LOOPBACK, port: sink.port };
  await Promise.all(Array.from({ length: 6 }, (_, i) => pool.send(target, request([`r${i}@example.test`]))));
  const messages = await sink.waitForMessages(6);
  t.deepEqual(
    messages.map((m) => m.rcptTo[0]),
    Array.from({ length: 6 }, (_, i) => `r${i}@example.test`),
  );
  t.is(sink.connectionCount, 1);
});

test('idle sessions are closed after idleTimeoutMs, and the next message opens a new one', async (t) => {
  const sink = await sinkFor(t, { starttls: false });
  const proxy = await startCountingProxy(t, sink.port);
  const pool = poolFor(t, { idleTimeoutMs: 50 });
  await pool.send(via(proxy), request(['a@example.test']));
  await proxy.waitForEnded(1); // the pool said QUIT on its own
  t.is(proxy.counter.active, 0);
  const res = await pool.send(via(proxy), request(['b@example.test']));
  t.is(res.recipients[0]!.outcome, 'delivered');
  t.is(proxy.accepted, 2);
});

test('close(): the transaction in flight completes, queued ones are refused, later sends too', async (t) => {
  const sink = await sinkFor(t, { starttls: false });
  const proxy = await startCountingProxy(t, sink.port);
  const pool = poolFor(t, { maxConnectionsPerHost: 1 });
  const first = pool.send(via(proxy), request(['a@example.test']));
  const queued = pool.send(via(proxy), request(['b@example.test']));
  const closing = pool.close();
  t.is((await first).recipients[0]!.outcome, 'delivered');
  const refused = await queued;
  t.false(refused.connected);
  t.regex(refused.error ?? '', /closed/);
  t.true(refused.notAttempted, 'the caller puts it back instead of recording a deferral');
  t.is((await first).notAttempted, undefined);
  await closing;
  t.is(proxy.counter.active, 0, 'the session was ended with QUIT');
  const after = await pool.send(via(proxy), request(['c@example.test']));
  t.false(after.connected);
  t.true(after.notAttempted);
  await pool.close(); // idempotent
});

test('after close() the pool holds no handles: a process using it exits by itself', async (t) => {
  const plain = await sinkFor(t, { starttls: false });
  const tls = await sinkFor(t);
  const dead = net.createServer();
  await new Promise<void>((resolve) => dead.listen(0, LOOPBACK, () => resolve()));
  const deadPort = (dead.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => dead.close(() => resolve()));

  const child = spawn(process.execPath, [fileURLToPath(new URL('./fixtures/pool-exit-child.js', import.meta.url)), String(plain.port), String(tls.port), String(deadPort)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), CHILD_EXIT_DEADLINE_MS);
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on('exit', (c, s) => resolve([c, s])));
  clearTimeout(timer);
  t.is(signal, null, `the child had to be killed: something kept it alive. stderr: ${stderr}`);
  t.is(code, 0, stderr);
  t.deepEqual(JSON.parse(stdout), [
    { connected: true, secure: false, outcome: 'delivered' },
    { connected: true, secure: false, outcome: 'delivered' },
    { connected: true, secure: true, outcome: 'delivered' },
    { connected: false, secure: false, outcome: 'deferred' },
  ]);
  // The sinks are still running: the child closed its sessions itself.
  t.is(plain.messages.length + tls.messages.length, 3);
});

test('abandonQueued(): sends waiting for a session are answered notAttempted, the one in flight completes, and the pool keeps working', async (t) => {
  const sink = await sinkFor(t, { starttls: false });
  const proxy = await startCountingProxy(t, sink.port);
  const pool = poolFor(t, { maxConnectionsPerHost: 1 });
  const first = pool.send(via(proxy), request(['a@example.test']));
  const queued = pool.send(via(proxy), request(['b@example.test']));
  t.is(pool.abandonQueued(), 1);
  const abandoned = await queued;
  t.true(abandoned.notAttempted);
  t.is((await first).recipients[0]!.outcome, 'delivered');
  t.is((await pool.send(via(proxy), request(['c@example.test']))).recipients[0]!.outcome, 'delivered');
  const [, second] = await sink.waitForMessages(2);
  t.deepEqual(second!.rcptTo, ['c@example.test']);
});
