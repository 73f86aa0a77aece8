/**
 * The pool's part of traffic shaping: a (source, rollup)'s connection limit across its MX
 * addresses, its per-session limits, sessions that are never lent to another source or
 * shape, and the source's local address and EHLO name on the wire.
 */
import test from 'ava';
import { LOOPBACK, poolFor, request, sinkFor, startCountingProxy } from './pool-helpers.js';
import type { SessionCounter } from './pool-helpers.js';

const via = (proxy: { port: number }, host = 'mx.sink.test') => ({ host, address: LOOPBACK, port: proxy.port });

test('connectionLimit holds across every MX address of the rollup: 12 messages over two hosts, never more than 2 sessions at once', async (t) => {
  const counter: SessionCounter = { active: 0, maxActive: 0 };
  const sinkA = await sinkFor(t, { starttls: false });
  const sinkB = await sinkFor(t, { starttls: false });
  const proxyA = await startCountingProxy(t, sinkA.port, counter);
  const proxyB = await startCountingProxy(t, sinkB.port, counter);
  const pool = poolFor(t, { maxConnectionsPerHost: 5 });
  const shape = { key: 'default\u0000example.net', connectionLimit: 2 };
  const results = await Promise.all(Array.from({ length: 12 }, (_, i) => pool.send(via(i % 2 ? proxyB : proxyA), request([`r${i}@example.test`], { shape }))));
  t.true(results.every((r) => r.recipients[0]!.outcome === 'delivered'));
  t.is(sinkA.messages.length + sinkB.messages.length, 12);
  t.true(counter.maxActive <= 2, `at most 2 sessions at once, saw ${counter.maxActive}`);
  // Another shape (or none) is not held by it.
  const other = await Promise.all(Array.from({ length: 4 }, (_, i) => pool.send(via(proxyA), request([`o${i}@example.test`]))));
  t.true(other.every((r) => r.recipients[0]!.outcome === 'delivered'));
});

test('maxDeliveriesPerConnection and idleTimeout come from the shape; an idle session of one shape is not lent to another', async (t) => {
  const sink = await sinkFor(t, { starttls: false });
  const proxy = await startCountingProxy(t, sink.port);
  const pool = poolFor(t, { maxConnectionsPerHost: 1, idleTimeoutMs: 60_000 });
  const shaped = { key: 'default\u0000a.example', maxDeliveriesPerConnection: 2, idleTimeoutMs: 200 };
  for (let i = 0; i < 4; i++) await pool.send(via(proxy), request([`r${i}@example.test`], { shape: shaped }));
  t.is(proxy.accepted, 2, '2 messages per session');
  // The shaped session closes after its own idle timeout, not the pool's minute.
  await new Promise<void>((resolve) => {
    const poll = setInterval(() => {
      if (pool.openByHost().size === 0) {
        clearInterval(poll);
        resolve();
      }
    }, 20);
  });
  // An unshaped request opens its own session rather than reuse one of the shape.
  await pool.send(via(proxy), request(['x@example.test'], { shape: { key: 'default\u0000b.example', maxDeliveriesPerConnection: 10 } }));
  await pool.send(via(proxy), request(['y@example.test']));
  t.is(proxy.accepted, 4);
});

test('a source binds the connection to its local address and greets with its EHLO name; sessions of two sources are never shared', async (t) => {
  const sink = await sinkFor(t, { starttls: false });
  const pool = poolFor(t);
  const target = { host: 'mx.sink.test', address: LOOPBACK, port: sink.port };
  await pool.send(target, request(['a@example.test'], { source: { name: 'ip2', localAddress: '127.0.0.2', ehloName: 'ip2.out.test' } }));
  await pool.send(target, request(['b@example.test'], { source: { name: 'ip3', localAddress: '127.0.0.3', ehloName: 'ip3.out.test' } }));
  await pool.send(target, request(['c@example.test'], { source: { name: 'ip2', localAddress: '127.0.0.2', ehloName: 'ip2.out.test' } }));
  await pool.send(target, request(['d@example.test']));
  await sink.waitForMessages(4);
  t.deepEqual(
    sink.messages.map((m) => [m.remoteAddress, m.heloName]),
    [
      ['127.0.0.2', 'ip2.out.test'],
      ['127.0.0.3', 'ip3.out.test'],
      ['127.0.0.2', 'ip2.out.test'],
      ['127.0.0.1', 'out.posthorn.test'],
    ],
  );
  // The first and third shared a session (same source); the others each had their own.
  t.is(new Set(sink.messages.map((m) => m.connectionId)).size, 3);
  t.is(sink.messages[0]!.connectionId, sink.messages[2]!.connectionId);
});
