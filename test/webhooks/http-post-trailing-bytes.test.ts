import net from 'node:net';
import test from 'ava';
import { createWebhookAgents, postPinned } from '../../src/http-out/http-post.js';

// An answer that is complete but followed by bytes that belong to no answer (a 204 sent with a
// chunked terminator, a length that lies short): the answer counts, and the connection, whose
// framing can no longer be trusted, is not used again.

/** An endpoint on raw sockets: its first request gets `first`, every later one a clean 200. */
async function endpoint(first: string) {
  let connections = 0;
  let answered = 0;
  const server = net.createServer((socket) => {
    connections++;
    let buffered = '';
    socket.on('data', (chunk) => {
      buffered += chunk.toString('latin1');
      const head = buffered.indexOf('\r\n\r\n');
      if (head < 0) return;
      const length = Number(/content-length: *(\d+)/i.exec(buffered.slice(0, head))?.[1] ?? 0);
      if (buffered.length < head + 4 + length) return;
      buffered = buffered.slice(head + 4 + length);
      socket.write(++answered === 1 ? first : 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nclean');
    });
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  return { port, connections: () => connections, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

for (const [name, first, expected] of [
  ['a 204 with a chunked terminator after it', 'HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', { status: 204, error: null, body: '' }],
  ['a 200 whose length lies short', 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok, and more', { status: 200, error: null, body: 'ok' }],
] as const) {
  test(`${name}: the complete answer counts, and the next POST goes on a new connection`, async (t) => {
    const server = await endpoint(first);
    t.teardown(() => server.close());
    const agents = createWebhookAgents();
    t.teardown(() => {
      agents.http.destroy();
      agents.https.destroy();
    });
    const url = new URL(`http://127.0.0.1:${server.port}/hook`);
    const target = { url, hostname: '127.0.0.1', address: '127.0.0.1', family: 4 as const };
    const post = () => postPinned(target, { 'content-type': 'application/json' }, '{"id":"ev_1"}', { timeoutMs: 5000, maxBodyBytes: 1024, agents });
    t.like(await post(), expected);
    t.like(await post(), { status: 200, error: null, body: 'clean' });
    t.is(server.connections(), 2);
  });
}
