import net from 'node:net';
import test from 'ava';
import { createWebhookAgents, postPinned } from '../../src/http-out/http-post.js';

// A reset on a kept-alive connection: the endpoint closed it while it idled, or read the POST
// and then reset. The two cannot be told apart, so it is a failed attempt (retried on the
// schedule), never a second POST within the attempt: every POST an endpoint gets is on record.

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

test('a POST on a kept-alive socket that the endpoint resets is a failed attempt, not sent again; the next POST opens a new connection', async (t) => {
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
  const reset = await post();
  t.is(reset.status, null);
  t.regex(String(reset.error), /ECONNRESET|socket hang up/);
  t.like(await post(), { status: 200, error: null });
  // The reset request was read (request 2 of connection 1) and not sent again.
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
