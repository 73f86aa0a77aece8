/**
 * The pool's transactions against the real SMTP sink on loopback: delivery,
 * reuse, per-recipient replies, failures at each stage. TLS and relay cases
 * are in smtp-client-pool-tls.test.ts, limits in smtp-client-pool-limits.test.ts.
 */
import net from 'node:net';
import test from 'ava';
import { HELO_NAME, LOOPBACK, poolFor, request, sinkFor, startCountingProxy, targetOf } from './pool-helpers.js';

test('delivers one message: envelope, body and HELO as the sink recorded them', async (t) => {
  const sink = await sinkFor(t, { starttls: false });
  const pool = poolFor(t);
  const req = request(['a@example.test', 'b@example.test']);
  const res = await pool.send(targetOf(sink), req);

  t.true(res.connected);
  t.false(res.secure);
  t.is(res.remoteHost, 'mx.sink.test');
  t.is(res.remoteAddress, `${LOOPBACK}:${sink.port}`);
  t.is(res.error, undefined);
  t.deepEqual(
    res.recipients.map((r) => [r.recipient, r.outcome, r.code, r.hardBounce]),
    [
      ['a@example.test', 'delivered', 250, false],
      ['b@example.test', 'delivered', 250, false],
    ],
  );
  const [msg] = await sink.waitForMessages(1);
  t.is(msg!.mailFrom, 'bounces+em_1@rp.posthorn.test');
  t.deepEqual(msg!.rcptTo, ['a@example.test', 'b@example.test']);
  t.is(msg!.heloName, HELO_NAME);
  // Byte for byte (a DKIM signature depends on it); dot-stuffing undone by the server.
  t.is(msg!.raw.toString('utf8'), req.message.toString('utf8'));
  t.deepEqual(pool.stats, { connectionsOpened: 1, transactions: 1 });
});

test('several transactions reuse one connection (no RSET after a message the server accepted)', async (t) => {
  const sink = await sinkFor(t, { starttls: false });
  const pool = poolFor(t);
  for (let i = 0; i < 4; i++) {
    const res = await pool.send(targetOf(sink), request([`r${i}@example.test`]));
    t.is(res.recipients[0]!.outcome, 'delivered');
  }
  const messages = await sink.waitForMessages(4);
  t.is(sink.connectionCount, 1);
  t.is(new Set(messages.map((m) => m.connectionId)).size, 1);
  t.deepEqual(
    messages.map((m) => m.rcptTo),
    [['r0@example.test'], ['r1@example.test'], ['r2@example.test'], ['r3@example.test']],
  );
  t.deepEqual(pool.stats, { connectionsOpened: 1, transactions: 4 });
});

test('maxMessagesPerConnection: QUIT after that many, then a fresh connection', async (t) => {
  const sink = await sinkFor(t, { starttls: false });
  const pool = poolFor(t, { maxMessagesPerConnection: 2 });
  for (let i = 0; i < 5; i++) await pool.send(targetOf(sink), request([`r${i}@example.test`]));
  await sink.waitForMessages(5);
  t.is(sink.connectionCount, 3);
  t.is(pool.stats.connectionsOpened, 3);
});

test('a refused recipient gets its own classified outcome while the others are delivered', async (t) => {
  const sink = await sinkFor(t, {
    starttls: false,
    onRcpt: (address) => {
      if (address.startsWith('gone@')) return { code: 550, message: '5.1.1 <gone@example.test>: Recipient address rejected: User unknown' };
      if (address.startsWith('blocked@')) return { code: 550, message: '5.7.1 Client host blocked using zen.spamhaus.org' };
      if (address.startsWith('later@')) return { code: 450, message: '4.2.1 Mailbox busy, try again in 2 minutes' };
      return undefined;
    },
  });
  const pool = poolFor(t);
  const res = await pool.send(targetOf(sink), request(['ok1@example.test', 'gone@example.test', 'blocked@example.test', 'later@example.test', 'ok2@example.test']));
  t.true(res.connected);
  const by = new Map(res.recipients.map((r) => [r.recipient, r]));
  t.is(by.get('ok1@example.test')!.outcome, 'delivered');
  t.is(by.get('ok2@example.test')!.outcome, 'delivered');
  t.like(by.get('gone@example.test'), { outcome: 'bounced', code: 550, hardBounce: true });
  t.regex(by.get('gone@example.test')!.response, /5\.1\.1/);
  t.like(by.get('blocked@example.test'), { outcome: 'bounced', code: 550, hardBounce: false });
  t.like(by.get('later@example.test'), { outcome: 'deferred', code: 450, hardBounce: false, retryAfterMs: 120_000 });
  const [msg] = await sink.waitForMessages(1);
  t.deepEqual(msg!.rcptTo, ['ok1@example.test', 'ok2@example.test']);
});

test('a refusal at RCPT that is about our sender (it names our MAIL FROM) never hard-bounces the recipient', async (t) => {
  // Postfix checks sender restrictions at RCPT (smtpd_delay_reject) and may use a dead-mailbox code.
  const sink = await sinkFor(t, { starttls: false, onRcpt: () => ({ code: 550, message: '5.1.1 <bounces+em_1@rp.posthorn.test>: rejected' }) });
  const pool = poolFor(t);
  const res = await pool.send(targetOf(sink), request(['bob@example.test']));
  t.like(res.recipients[0], { outcome: 'bounced', code: 550, hardBounce: false, category: 'sender' });
});

test('a non-ASCII address goes to a server without SMTPUTF8 never: refused here as a soft bounce (5.6.7), the others delivered', async (t) => {
  const sink = await sinkFor(t, { starttls: false, smtputf8: false });
  const pool = poolFor(t);
  const res = await pool.send(targetOf(sink), request(['"jösé"@example.test', 'ok@example.test']));
  const by = new Map(res.recipients.map((r) => [r.recipient, r]));
  t.like(by.get('"jösé"@example.test'), { outcome: 'bounced', code: 553, hardBounce: false });
  t.regex(by.get('"jösé"@example.test')!.response, /5\.6\.7 .*SMTPUTF8/);
  t.is(by.get('ok@example.test')!.outcome, 'delivered');
  const [msg] = await sink.waitForMessages(1);
  t.deepEqual(msg!.rcptTo, ['ok@example.test']);
  // Only such addresses: no transaction at all, and the session is still good for the next.
  const alone = await pool.send(targetOf(sink), request(['"jösé"@example.test']));
  t.is(alone.recipients[0]!.outcome, 'bounced');
  t.is((await pool.send(targetOf(sink), request(['ok2@example.test']))).recipients[0]!.outcome, 'delivered');
  // A server that offers SMTPUTF8 gets it.
  const utf8 = await sinkFor(t, { starttls: false });
  t.is((await pool.send(targetOf(utf8), request(['"jösé"@example.test']))).recipients[0]!.outcome, 'delivered');
});

test('every recipient refused: no DATA, each outcome classified, the session stays usable', async (t) => {
  let refuse = true;
  const sink = await sinkFor(t, { starttls: false, onRcpt: () => (refuse ? { code: 550, message: '5.1.1 No such user' } : undefined) });
  const pool = poolFor(t);
  const res = await pool.send(targetOf(sink), request(['x@example.test', 'y@example.test']));
  t.true(res.connected);
  t.deepEqual(res.recipients.map((r) => [r.outcome, r.hardBounce]), [['bounced', true], ['bounced', true]]);
  t.falsy(res.hostFailure, 'replies about the recipients: no other MX is tried');
  t.is(sink.messages.length, 0);
  refuse = false;
  const again = await pool.send(targetOf(sink), request(['x@example.test']));
  t.is(again.recipients[0]!.outcome, 'delivered');
  t.is(sink.connectionCount, 1);
});

test('451 at DATA: every accepted recipient is deferred, and the connection is reused', async (t) => {
  let failData = true;
  const sink = await sinkFor(t, { starttls: false, onData: () => (failData ? { code: 451, message: '4.3.0 Temporary local problem, try again in 3 minutes' } : undefined) });
  const pool = poolFor(t);
  const res = await pool.send(targetOf(sink), request(['a@example.test', 'b@example.test']));
  t.true(res.connected);
  t.is(res.error, undefined);
  for (const r of res.recipients) t.like(r, { outcome: 'deferred', code: 451, hardBounce: false, retryAfterMs: 180_000 });
  t.falsy(res.hostFailure);
  failData = false;
  const ok = await pool.send(targetOf(sink), request(['a@example.test']));
  t.is(ok.recipients[0]!.outcome, 'delivered');
  t.is(sink.connectionCount, 1);
});

test('5xx at DATA with several recipients bounces them all but suppresses none', async (t) => {
  const sink = await sinkFor(t, { starttls: false, onData: () => ({ code: 550, message: '5.1.1 User unknown' }) });
  const pool = poolFor(t);
  const many = await pool.send(targetOf(sink), request(['a@example.test', 'b@example.test']));
  t.deepEqual(many.recipients.map((r) => [r.outcome, r.hardBounce]), [['bounced', false], ['bounced', false]]);
  // With one recipient the reply can only be about that one.
  const one = await pool.send(targetOf(sink), request(['a@example.test']));
  t.like(one.recipients[0], { outcome: 'bounced', hardBounce: true, code: 550 });
});

test('a connection dropped mid-DATA defers every recipient; the next send reconnects', async (t) => {
  let drop = true;
  const sink = await sinkFor(t, { starttls: false, onData: () => (drop ? 'drop' : undefined) });
  const pool = poolFor(t);
  const res = await pool.send(targetOf(sink), request(['a@example.test', 'b@example.test']));
  t.true(res.connected);
  t.truthy(res.error);
  for (const r of res.recipients) t.like(r, { outcome: 'deferred', hardBounce: false });
  // The recipients were accepted: the message may be half-taken here, so no other MX now.
  t.falsy(res.hostFailure);
  t.is(sink.messages.length, 0);
  drop = false;
  const ok = await pool.send(targetOf(sink), request(['a@example.test']));
  t.is(ok.recipients[0]!.outcome, 'delivered');
  t.is(sink.connectionCount, 2);
});

test('a drop after one RCPT was refused keeps that refusal and defers the rest', async (t) => {
  const sink = await sinkFor(t, {
    starttls: false,
    onRcpt: (a) => (a.startsWith('gone@') ? { code: 550, message: '5.1.1 User unknown' } : undefined),
    onData: () => 'drop',
  });
  const pool = poolFor(t);
  const res = await pool.send(targetOf(sink), request(['gone@example.test', 'ok@example.test']));
  t.like(res.recipients[0], { recipient: 'gone@example.test', outcome: 'bounced', hardBounce: true });
  t.like(res.recipients[1], { recipient: 'ok@example.test', outcome: 'deferred', hardBounce: false });
});

test('421 greeting: connected is false so the caller tries the next MX', async (t) => {
  const sink = await sinkFor(t, { starttls: false, onConnect: () => ({ code: 421, message: 'mx.sink.test too busy, try again in 10 minutes' }) });
  const pool = poolFor(t);
  const res = await pool.send(targetOf(sink), request(['a@example.test']));
  t.false(res.connected);
  t.regex(res.error ?? '', /421/);
  t.like(res.recipients[0], { recipient: 'a@example.test', outcome: 'deferred', code: 421, hardBounce: false, retryAfterMs: 600_000 });
  t.is(sink.messages.length, 0);
  t.is(pool.stats.connectionsOpened, 0);
});

test('421 at RCPT closes that session: the transaction is deferred and the next one reconnects', async (t) => {
  let shutting = true;
  const sink = await sinkFor(t, { starttls: false, onRcpt: () => (shutting ? { code: 421, message: '4.3.2 Shutting down' } : undefined) });
  const pool = poolFor(t);
  const res = await pool.send(targetOf(sink), request(['a@example.test', 'b@example.test']));
  t.true(res.connected);
  for (const r of res.recipients) t.like(r, { outcome: 'deferred', hardBounce: false });
  t.is(res.recipients[0]!.code, 421);
  t.true(res.hostFailure, 'a 421 is about the host: the next MX is tried');
  shutting = false;
  const ok = await pool.send(targetOf(sink), request(['a@example.test']));
  t.is(ok.recipients[0]!.outcome, 'delivered');
  t.is(sink.connectionCount, 2);
});

test('a reused session answered with 421 at MAIL FROM (per-connection cap) is retried on a fresh one', async (t) => {
  let mailCommands = 0;
  // Exim's smtp_accept_max_per_connection style: the second MAIL on a connection gets 421.
  const sink = await sinkFor(t, { starttls: false, onMailFrom: () => (++mailCommands === 2 ? { code: 421, message: '4.7.0 Too many messages for this connection' } : undefined) });
  const pool = poolFor(t);
  t.is((await pool.send(targetOf(sink), request(['a@example.test']))).recipients[0]!.outcome, 'delivered');
  const res = await pool.send(targetOf(sink), request(['b@example.test']));
  t.true(res.connected);
  t.is(res.recipients[0]!.outcome, 'delivered');
  t.is(sink.connectionCount, 2);
  t.is(mailCommands, 3);
});

test('421 at MAIL FROM on a fresh session defers (no retry loop)', async (t) => {
  let mailCommands = 0;
  const sink = await sinkFor(t, {
    starttls: false,
    onMailFrom: () => {
      mailCommands++;
      return { code: 421, message: '4.7.0 Too many messages from your IP, try again in 15 minutes' };
    },
  });
  const pool = poolFor(t);
  const res = await pool.send(targetOf(sink), request(['a@example.test']));
  t.like(res.recipients[0], { outcome: 'deferred', code: 421, retryAfterMs: 15 * 60_000 });
  t.true(res.hostFailure);
  t.is(mailCommands, 1);
});

test('MAIL FROM refused: every recipient bounces, none as a hard bounce (it is about the sender)', async (t) => {
  const sink = await sinkFor(t, { starttls: false, onMailFrom: () => ({ code: 553, message: '5.1.1 Sender address unknown' }) });
  const pool = poolFor(t);
  const res = await pool.send(targetOf(sink), request(['a@example.test', 'b@example.test']));
  t.true(res.connected);
  for (const r of res.recipients) t.like(r, { outcome: 'bounced', code: 553, hardBounce: false });
  t.falsy(res.hostFailure);
});

test('connection refused: connected false with the reason', async (t) => {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, LOOPBACK, () => resolve()));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  const pool = poolFor(t);
  const res = await pool.send({ host: 'mx.down.test', address: LOOPBACK, port }, request(['a@example.test']));
  t.false(res.connected);
  t.regex(res.error ?? '', /ECONNREFUSED/);
  t.like(res.recipients[0], { outcome: 'deferred', hardBounce: false });
});

test('a server that never sends its greeting: connected false after greetingTimeoutMs', async (t) => {
  const sockets = new Set<net.Socket>();
  const silent = net.createServer((socket) => sockets.add(socket)); // accepts, says nothing
  await new Promise<void>((resolve) => silent.listen(0, LOOPBACK, () => resolve()));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    silent.close();
  });
  const port = (silent.address() as net.AddressInfo).port;
  const pool = poolFor(t, { greetingTimeoutMs: 200 });
  const res = await pool.send({ host: 'mx.silent.test', address: LOOPBACK, port }, request(['a@example.test']));
  t.false(res.connected);
  t.regex(res.error ?? '', /GREETING_TIMEOUT|Greeting/i);
  t.like(res.recipients[0], { outcome: 'deferred', hardBounce: false });
});

test('addresses that cannot be written into a command are refused locally; the rest is sent', async (t) => {
  const sink = await sinkFor(t, { starttls: false });
  const pool = poolFor(t);
  const res = await pool.send(targetOf(sink), request(['ok@example.test', 'bad\r\nRCPT TO:<x@evil.test>@example.test', 'ok@example.test']));
  t.deepEqual(res.recipients.map((r) => r.outcome), ['delivered', 'bounced', 'delivered']);
  const [msg] = await sink.waitForMessages(1);
  t.deepEqual(msg!.rcptTo, ['ok@example.test']);
});

test('a pooled connection that died while idle is replaced without failing the next send', async (t) => {
  const sink = await sinkFor(t, { starttls: false });
  const proxy = await startCountingProxy(t, sink.port);
  const pool = poolFor(t);
  const target = { host: 'mx.sink.test', address: LOOPBACK, port: proxy.port };
  t.is((await pool.send(target, request(['a@example.test']))).recipients[0]!.outcome, 'delivered');
  proxy.dropAll();
  const res = await pool.send(target, request(['b@example.test']));
  t.true(res.connected);
  t.is(res.recipients[0]!.outcome, 'delivered');
  t.is(proxy.accepted, 2);
});

test('a reused session found dead at MAIL FROM (no RSET probe first) is replaced: the message is delivered once', async (t) => {
  const sink = await sinkFor(t, { starttls: false });
  // Forwards both ways, but cuts a connection at its second MAIL FROM without passing it on:
  // the peer went away while the session sat idle and nobody noticed.
  const server = net.createServer((client) => {
    let mails = 0;
    const upstream = net.connect(sink.port, LOOPBACK);
    upstream.on('data', (chunk: Buffer) => client.write(chunk));
    client.on('data', (chunk: Buffer) => {
      if (/^MAIL FROM:/im.test(chunk.toString('latin1')) && ++mails === 2) {
        client.destroy();
        upstream.destroy();
        return;
      }
      upstream.write(chunk);
    });
    for (const s of [client, upstream]) {
      s.on('error', () => {});
      s.on('close', () => (s === client ? upstream : client).destroy());
    }
  });
  await new Promise<void>((resolve) => server.listen(0, LOOPBACK, () => resolve()));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const pool = poolFor(t);
  const target = { host: 'mx.sink.test', address: LOOPBACK, port: (server.address() as net.AddressInfo).port };
  t.is((await pool.send(target, request(['a@example.test']))).recipients[0]!.outcome, 'delivered');
  const res = await pool.send(target, request(['b@example.test']));
  t.like(res, { connected: true });
  t.is(res.recipients[0]!.outcome, 'delivered');
  const messages = await sink.waitForMessages(2);
  t.deepEqual(messages.map((m) => m.rcptTo), [['a@example.test'], ['b@example.test']]);
  t.is(pool.stats.connectionsOpened, 2);
});

test('the SIZE the server announces is respected before sending (RFC 1870)', async (t) => {
  const sink = await sinkFor(t, { starttls: false, size: 100 });
  const pool = poolFor(t);
  const res = await pool.send(targetOf(sink), request(['a@example.test']));
  t.true(res.connected);
  t.like(res.recipients[0], { outcome: 'bounced', hardBounce: false });
  t.falsy(res.hostFailure);
  t.regex(res.recipients[0]!.reason ?? '', /size|message/i);
  t.is(sink.messages.length, 0);
  // Refused by the client before MAIL FROM: no transaction began (no SENT for the email).
  t.false(res.transactionStarted);
});

test('a reply to MAIL FROM without a numeric code is no SIZE refusal: the recipients are deferred, not bounced', async (t) => {
  // nodemailer gives such a reply no responseCode, like its own SIZE check: it was read as a
  // 552 5.3.4 "message too big" and bounced every recipient for a server's garbage.
  const server = net.createServer((s) => {
    s.on('error', () => {});
    s.write('220 mx.raw.test ESMTP\r\n');
    let buffered = '';
    s.on('data', (c) => {
      buffered += c.toString('latin1');
      for (let eol = buffered.indexOf('\r\n'); eol >= 0; eol = buffered.indexOf('\r\n')) {
        const line = buffered.slice(0, eol);
        buffered = buffered.slice(eol + 2);
        if (/^EHLO/i.test(line)) s.write('250 mx.raw.test\r\n');
        else if (/^MAIL/i.test(line)) s.write('abc what\r\n');
        else if (/^QUIT/i.test(line)) s.end('221 bye\r\n');
        else s.write('250 ok\r\n');
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, LOOPBACK, resolve));
  t.teardown(() => server.close());
  const pool = poolFor(t);
  const res = await pool.send(targetOf({ hostname: 'mx.raw.test', port: (server.address() as net.AddressInfo).port }), request(['a@example.test', 'b@example.test']));
  t.true(res.connected);
  for (const r of res.recipients) {
    t.like(r, { outcome: 'deferred', hardBounce: false });
    t.regex(r.response, /abc what/);
  }
  t.true(res.transactionStarted, 'MAIL FROM went out');
});

test('a message the announced SIZE refuses before MAIL FROM is no transaction: not counted in stats, nor against the connection\'s messages', async (t) => {
  let mailFroms = 0;
  const sink = await sinkFor(t, {
    starttls: false,
    size: 2000,
    onMailFrom: () => {
      mailFroms++;
      return undefined;
    },
  });
  const pool = poolFor(t, { maxMessagesPerConnection: 2 });
  const big = await pool.send(targetOf(sink), request(['big@example.test'], { message: bigMessage(5000) }));
  t.like(big.recipients[0], { outcome: 'bounced', hardBounce: false });
  t.false(big.transactionStarted);
  t.deepEqual(pool.stats, { connectionsOpened: 1, transactions: 0 });
  for (let i = 0; i < 2; i++) t.is((await pool.send(targetOf(sink), request([`r${i}@example.test`]))).recipients[0]!.outcome, 'delivered');
  await sink.waitForMessages(2);
  // Two MAIL FROMs on the wire, both on the session the refused message was meant for.
  t.is(mailFroms, 2);
  t.deepEqual(pool.stats, { connectionsOpened: 1, transactions: 2 });
  t.is(sink.connectionCount, 1);
});

/** A message of about `bytes`, with dot lines and a body that does not end in CRLF. */
function bigMessage(bytes: number): Buffer {
  const head = 'From: sender@posthorn.test\r\nTo: a@example.test\r\nSubject: big\r\nMessage-ID: <big@posthorn.test>\r\n\r\n';
  const lines: string[] = [];
  for (let n = head.length; n < bytes; n += 78) lines.push(lines.length % 7 === 0 ? `.${'d'.repeat(75)}` : 'x'.repeat(76));
  return Buffer.from(`${head}${lines.join('\r\n')}`);
}

for (const starttls of [false, true]) {
  test(`a 3 MiB message arrives byte for byte and the session is reused (${starttls ? 'STARTTLS' : 'plaintext'})`, async (t) => {
    const sink = await sinkFor(t, { starttls });
    const pool = poolFor(t);
    const message = bigMessage(3 * 1024 * 1024);
    for (let i = 0; i < 2; i++) {
      const res = await pool.send(targetOf(sink), request([`big${i}@example.test`], { message }));
      t.is(res.recipients[0]!.outcome, 'delivered');
      t.is(res.secure, starttls);
    }
    const received = await sink.waitForMessages(2);
    // Dots stuffed by the client and removed by the server; a body without a final CRLF gets one.
    for (const m of received) t.true(m.raw.equals(Buffer.concat([message, Buffer.from('\r\n')])));
    t.is(pool.stats.connectionsOpened, 1);
  });
}

test('a 4xx to MAIL FROM is about the host (hostFailure: the next MX is tried); a 4xx to every RCPT is not', async (t) => {
  const busy = await sinkFor(t, { starttls: false, onMailFrom: () => ({ code: 451, message: '4.3.0 Temporary system problem' }) });
  const pool = poolFor(t);
  const res = await pool.send(targetOf(busy), request(['a@example.test']));
  t.like(res.recipients[0], { outcome: 'deferred', code: 451 });
  t.true(res.hostFailure);
  const grey = await sinkFor(t, { starttls: false, onRcpt: () => ({ code: 450, message: '4.7.1 Greylisted' }) });
  const greyed = await pool.send(targetOf(grey), request(['a@example.test', 'b@example.test']));
  for (const r of greyed.recipients) t.like(r, { outcome: 'deferred', code: 450 });
  t.falsy(greyed.hostFailure);
});
