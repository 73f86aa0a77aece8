import net from 'node:net';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { createTransport } from 'nodemailer';
import { DataEndScanner, startFastSink, type FastSink } from '../../bench/fast-sink.js';

async function sinkFor(t: ExecutionContext): Promise<FastSink> {
  const sink = await startFastSink();
  t.teardown(() => sink.close());
  return sink;
}

/** A raw client that collects replies and waits for them by pattern (no sleeps). */
async function rawClient(t: ExecutionContext, port: number) {
  const socket = net.connect(port, '127.0.0.1');
  t.teardown(() => socket.destroy());
  let text = '';
  const listeners = new Set<() => void>();
  socket.on('data', (d: Buffer) => {
    text += d.toString('utf8');
    for (const l of listeners) l();
  });
  const until = (re: RegExp) =>
    new Promise<string>((resolve, reject) => {
      const check = () => {
        if (re.test(text)) {
          listeners.delete(check);
          resolve(text);
        }
      };
      listeners.add(check);
      socket.once('close', () => reject(new Error(`closed before ${re}; got: ${text}`)));
      check();
    });
  const write = (data: string) => new Promise<void>((resolve, reject) => socket.write(data, (err) => (err ? reject(err) : resolve())));
  await until(/^220 /);
  return { until, write, text: () => text };
}

test('a pooled nodemailer transport delivers several messages, with dots and large bodies', async (t) => {
  const sink = await sinkFor(t);
  const transport = createTransport({ host: '127.0.0.1', port: sink.port, pool: true, maxConnections: 2 });
  t.teardown(() => transport.close());
  const bodies = [
    'hello',
    '.\n..\n. leading dots must be stuffed\n.',
    'x'.repeat(256 * 1024), // spans many TCP chunks
    'ünïcödé 8bit body ✓',
    '',
  ];
  const infos = await Promise.all(
    bodies.map((text, i) => transport.sendMail({ from: 'bench@posthorn.test', to: `r${i}@example.test`, subject: `m${i}`, text })),
  );
  for (const info of infos) t.regex(info.response, /^250 /);
  await sink.onCount(bodies.length);
  t.is(sink.received, bodies.length);
});

test('pipelined commands in one chunk get their replies in order', async (t) => {
  const sink = await sinkFor(t);
  const c = await rawClient(t, sink.port);
  await c.write('EHLO c.test\r\nMAIL FROM:<a@x.test>\r\nRCPT TO:<b@y.test>\r\nRCPT TO:<c@y.test>\r\nDATA\r\n');
  const afterData = await c.until(/^354 /m);
  t.regex(afterData, /250-PIPELINING\r\n250-8BITMIME\r\n250-SMTPUTF8\r\n250 SIZE \d+\r\n250 [^\r]*\r\n250 [^\r]*\r\n250 [^\r]*\r\n354 /);
  // End of data, a second transaction and QUIT, all in one write.
  await c.write('Subject: 1\r\n\r\n..x\r\n.\r\nRSET\r\nMAIL FROM:<a@x.test>\r\nRCPT TO:<b@y.test>\r\nDATA\r\n');
  await c.until(/354 [^\r]*\r\n[\s\S]*354 /);
  await c.write('body\r\n.\r\nNOOP\r\nQUIT\r\n');
  const all = await c.until(/^221 /m);
  t.is(sink.received, 2);
  t.regex(all, /250 2\.0\.0 OK queued\r\n250 2\.0\.0 OK\r\n221 /);
});

test('end-of-data over a raw socket, with look-alikes and an empty message', async (t) => {
  const sink = await sinkFor(t);
  const c = await rawClient(t, sink.port);
  await c.write('HELO c.test\r\nMAIL FROM:<a@x.test>\r\nRCPT TO:<b@y.test>\r\nDATA\r\n');
  await c.until(/^354 /m);
  // Bare-LF and dot-stuffed look-alikes must not end the message.
  await c.write('a\n.\nb\r\n..\r\n');
  for (const byte of '\r\n.\r\n') await c.write(byte);
  await sink.onCount(1);
  t.is(sink.received, 1);
  // An empty message: the CRLF ending DATA is the start of the marker.
  await c.write('MAIL FROM:<a@x.test>\r\nRCPT TO:<b@y.test>\r\nDATA\r\n');
  await c.until(/354 [\s\S]*354 /);
  await c.write('.\r\n');
  await sink.onCount(2);
  t.is(sink.received, 2);
});

test('out-of-order commands are refused', async (t) => {
  const sink = await sinkFor(t);
  const c = await rawClient(t, sink.port);
  await c.write('MAIL FROM:<a@x.test>\r\nEHLO c.test\r\nRCPT TO:<b@y.test>\r\nDATA\r\nSTARTTLS\r\nQUIT\r\n');
  const all = await c.until(/^221 /m);
  t.regex(all, /^503 [^\r]*\r\n250-/m);
  t.regex(all, /250 SIZE \d+\r\n503 [^\r]*\r\n503 [^\r]*\r\n502 [^\r]*\r\n221 /);
  t.notRegex(all, /STARTTLS/);
  t.is(sink.received, 0);
});

/** Feeds `chunks` to a fresh scanner; returns the offset past the marker in the whole stream, or -1. */
function scan(chunks: Buffer[]): number {
  const scanner = new DataEndScanner();
  let offset = 0;
  for (const chunk of chunks) {
    const end = scanner.push(chunk);
    if (end !== -1) return offset + end;
    offset += chunk.length;
  }
  return -1;
}

test('DataEndScanner finds the marker at every possible chunk split', (t) => {
  const body = 'Subject: x\r\n\r\na\n.\nb\r\n..\r\n.x\r\n';
  const stream = Buffer.from(`${body}.\r\nQUIT\r\n`);
  const expected = body.length + 3;
  t.is(scan([stream]), expected);
  for (let i = 1; i < stream.length; i++) {
    t.is(scan([stream.subarray(0, i), stream.subarray(i)]), expected, `split at ${i}`);
  }
  // One byte at a time: the marker never sits inside a single chunk.
  t.is(scan([...stream].map((b) => Buffer.from([b]))), expected);
  // Empty message: the CRLF that ended DATA begins the marker.
  t.is(scan([Buffer.from('.\r\n')]), 3);
  t.is(scan([Buffer.from('.'), Buffer.from('\r'), Buffer.from('\n')]), 3);
  // Look-alikes only.
  t.is(scan([Buffer.from('a\n.\n'), Buffer.from('..\r\n'), Buffer.from('\r\n.x\r\n')]), -1);
});
