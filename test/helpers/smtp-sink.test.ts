import net from 'node:net';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { createTransport } from 'nodemailer';
import { startSmtpSink, type SmtpSink } from './smtp-sink.js';

type SmtpClientError = Error & { code?: string; responseCode?: number };

const CLIENT_NAME = 'client.posthorn.test';

async function sinkFor(t: ExecutionContext, ...args: Parameters<typeof startSmtpSink>): Promise<SmtpSink> {
  const sink = await startSmtpSink(...args);
  t.teardown(() => sink.close());
  return sink;
}

function transportFor(t: ExecutionContext, sink: SmtpSink, extra: { pool?: boolean; requireTLS?: boolean; ignoreTLS?: boolean } = {}) {
  const transport = createTransport({
    host: sink.host,
    port: sink.port,
    name: CLIENT_NAME,
    // Explicit: a verifying client must accept the sink by pinning its cert.
    tls: { ca: sink.ca, servername: sink.hostname, rejectUnauthorized: true },
    ...(extra.pool ? { pool: true, maxConnections: 1 } : {}),
    ...(extra.requireTLS ? { requireTLS: true } : {}),
    ...(extra.ignoreTLS ? { ignoreTLS: true } : {}),
  });
  t.teardown(() => transport.close());
  return transport;
}

const mail = (n = 1) => ({
  from: 'sender@posthorn.test',
  to: 'rcpt@example.test',
  subject: `message ${n}`,
  text: `body ${n}\n.leading dot\n`,
});

test('records a plain delivery with envelope, body and HELO name', async (t) => {
  const sink = await sinkFor(t);
  const info = await transportFor(t, sink, { ignoreTLS: true }).sendMail({ ...mail(), cc: 'other@example.test' });
  t.regex(info.response, /^250 /);
  const [msg] = await sink.waitForMessages(1);
  t.is(msg.mailFrom, 'sender@posthorn.test');
  t.deepEqual(msg.rcptTo, ['rcpt@example.test', 'other@example.test']);
  t.is(msg.heloName, CLIENT_NAME);
  t.false(msg.secure);
  t.true(msg.connectionId.length > 0);
  const raw = msg.raw.toString('utf8');
  t.regex(raw, /^Subject: message 1\r$/m);
  // Transparency (RFC 5321 4.5.2): the dot-stuffed line arrives unstuffed.
  t.regex(raw, /^\.leading dot\r$/m);
  t.is(sink.connectionCount, 1);
});

test('STARTTLS is used and the pinned certificate verifies', async (t) => {
  const sink = await sinkFor(t);
  await transportFor(t, sink, { requireTLS: true }).sendMail(mail());
  const [msg] = await sink.waitForMessages(1);
  t.true(msg.secure);
});

test('STARTTLS fails verification for a client that does not trust the sink', async (t) => {
  const sink = await sinkFor(t);
  const transport = createTransport({
    host: sink.host,
    port: sink.port,
    requireTLS: true,
    tls: { servername: sink.hostname, rejectUnauthorized: true },
  });
  t.teardown(() => transport.close());
  await t.throwsAsync(transport.sendMail(mail()));
  t.is(sink.messages.length, 0);
});

test('without STARTTLS the extension is not offered and delivery is plain', async (t) => {
  const sink = await sinkFor(t, { starttls: false });
  await transportFor(t, sink).sendMail(mail());
  const [msg] = await sink.waitForMessages(1);
  t.false(msg.secure);
  const err = await t.throwsAsync<SmtpClientError>(transportFor(t, sink, { requireTLS: true }).sendMail(mail(2)));
  t.is(err?.code, 'ETLS');
});

test('setBehaviour toggles STARTTLS for later connections', async (t) => {
  const sink = await sinkFor(t);
  sink.setBehaviour({ starttls: false });
  await transportFor(t, sink).sendMail(mail(1));
  sink.setBehaviour({ starttls: true });
  await transportFor(t, sink).sendMail(mail(2));
  const msgs = await sink.waitForMessages(2);
  t.deepEqual(
    msgs.map((m) => m.secure),
    [false, true],
  );
});

test('a 550 at RCPT reaches the client as 550', async (t) => {
  const sink = await sinkFor(t, {
    onRcpt: (address) => (address.startsWith('unknown@') ? { code: 550, message: '5.1.1 User unknown' } : undefined),
  });
  const transport = transportFor(t, sink);
  const err = await t.throwsAsync<SmtpClientError>(transport.sendMail({ ...mail(), to: 'unknown@example.test' }));
  t.is(err?.responseCode, 550);
  t.regex(err?.message ?? '', /5\.1\.1 User unknown/);

  // One bad recipient among good ones: the rest is still delivered.
  const info = await transport.sendMail({ ...mail(2), to: ['unknown@example.test', 'known@example.test'] });
  t.deepEqual(info.rejected, ['unknown@example.test']);
  t.regex(info.rejectedErrors?.[0]?.message ?? '', /^.*550 5\.1\.1 User unknown/);
  const [msg] = await sink.waitForMessages(1);
  t.deepEqual(msg.rcptTo, ['known@example.test']);
});

test('a 5xx at MAIL FROM is a real 5xx', async (t) => {
  const sink = await sinkFor(t, { onMailFrom: () => ({ code: 553, message: '5.7.1 Sender rejected' }) });
  const err = await t.throwsAsync<SmtpClientError>(transportFor(t, sink).sendMail(mail()));
  t.is(err?.responseCode, 553);
});

test('a 451 at DATA reaches the client and nothing is recorded', async (t) => {
  let seen = 0;
  const sink = await sinkFor(t, {
    onData: (msg) => {
      seen++;
      t.regex(msg.raw.toString(), /Subject: message 1/);
      return { code: 451, message: '4.3.0 Try again later' };
    },
  });
  const err = await t.throwsAsync<SmtpClientError>(transportFor(t, sink).sendMail(mail()));
  t.is(err?.responseCode, 451);
  t.regex(err?.message ?? '', /4\.3\.0 Try again later/);
  t.is(seen, 1);
  t.is(sink.messages.length, 0);
});

test("'drop' at DATA gives the client a connection error", async (t) => {
  const sink = await sinkFor(t, { onData: () => 'drop' });
  const err = await t.throwsAsync<SmtpClientError>(transportFor(t, sink).sendMail(mail()));
  t.is(err?.responseCode, undefined);
  t.truthy(err?.code);
  t.is(sink.messages.length, 0);
});

test("onConnect can refuse with 421 or 'drop' the connection", async (t) => {
  const sink = await sinkFor(t, { onConnect: () => ({ code: 421, message: '4.3.2 Too busy' }) });
  const refused = await t.throwsAsync<SmtpClientError>(transportFor(t, sink).sendMail(mail()));
  t.is(refused?.responseCode, 421);

  sink.setBehaviour({ onConnect: () => 'drop' });
  const dropped = await t.throwsAsync<SmtpClientError>(transportFor(t, sink).sendMail(mail()));
  t.is(dropped?.responseCode, undefined);

  sink.setBehaviour({ onConnect: undefined });
  await transportFor(t, sink).sendMail(mail());
  await sink.waitForMessages(1);
  t.is(sink.connectionCount, 3);
});

test('a pooled transport sends 3 messages over 1 connection', async (t) => {
  const sink = await sinkFor(t);
  const transport = transportFor(t, sink, { pool: true });
  await Promise.all([1, 2, 3].map((n) => transport.sendMail(mail(n))));
  const msgs = await sink.waitForMessages(3);
  t.is(sink.connectionCount, 1);
  t.is(new Set(msgs.map((m) => m.connectionId)).size, 1);
  t.true(msgs.every((m) => m.secure));
});

// The sink skips smtp-server's 100 ms early-talker wait; how fast it greets is not asserted
// here (timing belongs in benchmarks, never in tests), only that the greeting is right.
test('greets a raw connection with its host name', async (t) => {
  const sink = await sinkFor(t);
  const socket = net.connect(sink.port, sink.host);
  t.teardown(() => socket.destroy());
  const greeting = await new Promise<string>((resolve, reject) => {
    socket.once('data', (d) => resolve(d.toString()));
    socket.once('error', reject);
  });
  t.regex(greeting, /^220 mx\.sink\.test /);
});

test('SIZE limit rejects an oversized message with 552', async (t) => {
  const sink = await sinkFor(t, { size: 1024 });
  const err = await t.throwsAsync<SmtpClientError>(transportFor(t, sink).sendMail({ ...mail(), text: 'x'.repeat(4096) }));
  t.is(err?.responseCode, 552);
  t.is(sink.messages.length, 0);
});

test('waitForMessages rejects on timeout and close() does not wait for idle pooled clients', async (t) => {
  const sink = await startSmtpSink();
  await t.throwsAsync(sink.waitForMessages(1, 20), { message: /expected 1 message\(s\) within 20 ms, got 0/ });
  const transport = transportFor(t, sink, { pool: true });
  await transport.sendMail(mail());
  // The pooled connection stays open; close() must end it with a 421 rather
  // than smtp-server's 30 s grace period (ava's timeout would catch that).
  await sink.close();
  t.is(sink.messages.length, 1);
});
