import net from 'node:net';
import test from 'ava';
import { createWebhookAgents, postPinned } from '../../src/http-out/http-post.js';

// A keep-alive connection the receiver closes while it idles (a server's keep-alive timeout,
// a proxy) can be reused for the next POST in the moment before the close arrives: the write
// meets a reset, and the receiver never answered. That is no failed attempt of the endpoint's;
// the POST goes again at once on a new connection, as HTTP clients do for a stale socket.

/** An HTTP endpoint on raw sockets: its first connection answers one request, then resets at the next. */
async function resettingEndpoint() {
  const seen: { connection: number; request: number }[] = [];
  let connections = 0;
  const server = net.createServer((socket) => {
    const connection = ++connections;
    let buffered = '';
    let requests = 0;
    socket.on('data', (chunk) => {
      buffered += chunk.toString('latin1');
      for (;;) {
        const head = buffered.indexOf('\r\n\r\n');
        if (head < 0) return;
        const length = Number(/content-length: *(\d+)/i.exec(buffered.slice(0, head))?.[1] ?? 0);
        if (buffered.length < head + 4 + length) return;
        buffered = buffered.slice(head + 4 + length);
        requests++;
        if (connection === 1 && requests === 2) {
          socket.resetAndDestroy();
          return;
        }
        seen.push({ connection, request: requests });
        socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok');
      }
    });
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  return { port, seen, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

test('a POST on a kept-alive socket that the endpoint reset is sent again on a new connection, once', async (t) => {
  const endpoint = await resettingEndpoint();
  t.teardown(() => endpoint.close());
  const agents = createWebhookAgents();
  t.teardown(() => {
    agents.http.destroy();
    agents.https.destroy();
  });
  const url = new URL(`http://127.0.0.1:${endpoint.port}/hook`);
  const target = { url, hostname: '127.0.0.1', address: '127.0.0.1', family: 4 as const };
  const post = () => postPinned(target, { 'content-type': 'application/json' }, '{"id":"ev_1"}', { timeoutMs: 5000, maxBodyBytes: 1024, agents });
  t.like(await post(), { status: 200, error: null });
  const second = await post();
  t.like(second, { status: 200, error: null }, JSON.stringify(second));
  t.deepEqual(endpoint.seen, [{ connection: 1, request: 1 }, { connection: 2, request: 1 }]);
});

test('a reset on a new connection is the attempt\'s failure: not sent again', async (t) => {
  let connections = 0;
  const server = net.createServer((socket) => {
    connections++;
    socket.once('data', () => socket.resetAndDestroy());
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const agents = createWebhookAgents();
  t.teardown(() => agents.http.destroy());
  const port = (server.address() as net.AddressInfo).port;
  const target = { url: new URL(`http://127.0.0.1:${port}/`), hostname: '127.0.0.1', address: '127.0.0.1', family: 4 as const };
  const outcome = await postPinned(target, {}, '{}', { timeoutMs: 5000, maxBodyBytes: 1024, agents });
  t.is(outcome.status, null);
  t.regex(String(outcome.error), /ECONNRESET|socket hang up/);
  t.is(connections, 1);
});
