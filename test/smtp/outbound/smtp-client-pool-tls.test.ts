/**
 * TLS policy and relay mode against real servers on loopback. The sink's
 * certificate is self-signed for mx.sink.test: trusted only when the pool is
 * given it as `ca`, and valid only for that name.
 */
import test from 'ava';
import { createDnsClient } from '../../../src/lib/dns/dns-client.js';
import { testCert } from '../../helpers/test-keys.js';
import { startDnsZone } from '../../helpers/dns-zone.js';
import { LOOPBACK, poolFor, request, sinkFor, startTestServer, targetOf } from './pool-helpers.js';

const RELAY_HOST = 'relay.posthorn.test';
const RELAY_USER = 'posthorn';
const RELAY_PASSWORD = 'correct horse battery staple';

// ------------------------------------------------------------ OPPORTUNISTIC

test('OPPORTUNISTIC uses STARTTLS when offered, even with a certificate we do not trust', async (t) => {
  const sink = await sinkFor(t);
  const pool = poolFor(t); // sink's cert not trusted: fine for opportunistic (RFC 7435)
  const res = await pool.send(targetOf(sink), request(['a@example.test']));
  t.true(res.connected);
  t.true(res.secure);
  t.is(res.recipients[0]!.outcome, 'delivered');
  const [msg] = await sink.waitForMessages(1);
  t.true(msg!.secure);
});

test('OPPORTUNISTIC without STARTTLS offered delivers in plaintext', async (t) => {
  const sink = await sinkFor(t, { starttls: false });
  const pool = poolFor(t);
  const res = await pool.send(targetOf(sink), request(['a@example.test']));
  t.true(res.connected);
  t.false(res.secure);
  t.is(res.recipients[0]!.outcome, 'delivered');
  const [msg] = await sink.waitForMessages(1);
  t.false(msg!.secure);
});

test('OPPORTUNISTIC whose TLS handshake fails reconnects once in plaintext, and remembers the host', async (t) => {
  // A server that offers STARTTLS but only speaks TLS 1.0, which our client
  // (TLS 1.2 minimum) refuses: the handshake itself fails after "220 Ready".
  const { key, cert } = await testCert({ hostnames: ['mx.oldtls.test'] });
  const server = await startTestServer(t, { key, cert, minVersion: 'TLSv1', maxVersion: 'TLSv1', authOptional: true, disabledCommands: ['AUTH'] });
  const pool = poolFor(t, { maxMessagesPerConnection: 1 });
  const target = { host: 'mx.oldtls.test', address: LOOPBACK, port: server.port };

  const res = await pool.send(target, request(['a@example.test']));
  t.true(res.connected, res.error);
  t.false(res.secure);
  t.is(res.recipients[0]!.outcome, 'delivered');
  t.is(server.received.length, 1);
  t.false(server.received[0]!.secure);
  t.is(server.connections, 2, 'one failed TLS attempt, one plaintext session');

  // The next session skips the doomed handshake.
  const again = await pool.send(target, request(['b@example.test']));
  t.is(again.recipients[0]!.outcome, 'delivered');
  t.is(server.connections, 3);
});

test('ENFORCED never falls back when the handshake fails', async (t) => {
  const { key, cert } = await testCert({ hostnames: ['mx.oldtls.test'] });
  const server = await startTestServer(t, { key, cert, minVersion: 'TLSv1', maxVersion: 'TLSv1', authOptional: true, disabledCommands: ['AUTH'] });
  const pool = poolFor(t, { ca: cert });
  const res = await pool.send({ host: 'mx.oldtls.test', address: LOOPBACK, port: server.port }, request(['a@example.test'], { tlsPolicy: 'ENFORCED' }));
  t.false(res.connected);
  t.regex(res.error ?? '', /TLS required/);
  t.is(server.received.length, 0);
  t.is(server.connections, 1);
});

// ------------------------------------------------------------ ENFORCED

test('ENFORCED with a certificate that verifies for the MX name delivers over TLS', async (t) => {
  const sink = await sinkFor(t);
  const pool = poolFor(t, { ca: sink.ca });
  const res = await pool.send(targetOf(sink), request(['a@example.test'], { tlsPolicy: 'ENFORCED' }));
  t.true(res.connected, res.error);
  t.true(res.secure);
  t.is(res.recipients[0]!.outcome, 'delivered');
  const [msg] = await sink.waitForMessages(1);
  t.true(msg!.secure);
});

test('ENFORCED without STARTTLS offered: no session, nothing sent in plaintext', async (t) => {
  let mailFromSeen = 0;
  const sink = await sinkFor(t, {
    starttls: false,
    onMailFrom: () => {
      mailFromSeen++;
      return undefined;
    },
  });
  const pool = poolFor(t, { ca: sink.ca });
  const res = await pool.send(targetOf(sink), request(['a@example.test'], { tlsPolicy: 'ENFORCED' }));
  t.false(res.connected);
  t.regex(res.error ?? '', /STARTTLS/);
  t.like(res.recipients[0], { outcome: 'deferred', hardBounce: false });
  t.is(mailFromSeen, 0);
  t.is(sink.messages.length, 0);
});

test('ENFORCED with an untrusted certificate: no session, nothing sent', async (t) => {
  let mailFromSeen = 0;
  const sink = await sinkFor(t, { onMailFrom: () => void mailFromSeen++ });
  const pool = poolFor(t); // system CAs only: the self-signed sink is not trusted
  const res = await pool.send(targetOf(sink), request(['a@example.test'], { tlsPolicy: 'ENFORCED' }));
  t.false(res.connected);
  t.regex(res.error ?? '', /certificate/);
  t.is(mailFromSeen, 0);
  t.is(sink.messages.length, 0);
});

test('ENFORCED with a trusted certificate for another name: no session, nothing sent', async (t) => {
  let mailFromSeen = 0;
  const sink = await sinkFor(t, { onMailFrom: () => void mailFromSeen++ });
  const pool = poolFor(t, { ca: sink.ca });
  const res = await pool.send(targetOf(sink, 'mx.other.test'), request(['a@example.test'], { tlsPolicy: 'ENFORCED' }));
  t.false(res.connected);
  t.regex(res.error ?? '', /certificate/);
  t.regex(res.error ?? '', /mx\.other\.test/);
  t.is(mailFromSeen, 0);
  t.is(sink.messages.length, 0);
});

test('ENFORCED never reuses a plaintext session opened for an OPPORTUNISTIC message', async (t) => {
  const sink = await sinkFor(t, { starttls: false });
  const pool = poolFor(t, { ca: sink.ca });
  const plain = await pool.send(targetOf(sink), request(['a@example.test']));
  t.false(plain.secure);
  sink.setBehaviour({ starttls: true }); // the same host now offers STARTTLS on new connections
  const enforced = await pool.send(targetOf(sink), request(['b@example.test'], { tlsPolicy: 'ENFORCED' }));
  t.true(enforced.connected, enforced.error);
  t.true(enforced.secure);
  t.is(sink.connectionCount, 2);
  const messages = await sink.waitForMessages(2);
  t.deepEqual(messages.map((m) => m.secure), [false, true]);
  // ...while an OPPORTUNISTIC message may ride on the verified TLS session.
  const opportunistic = await pool.send(targetOf(sink), request(['c@example.test']));
  t.true(opportunistic.connected);
  t.is(sink.connectionCount, 2);
});

test('a session whose certificate verified may carry a later ENFORCED message', async (t) => {
  const sink = await sinkFor(t);
  const pool = poolFor(t, { ca: sink.ca });
  const first = await pool.send(targetOf(sink), request(['a@example.test'])); // OPPORTUNISTIC, and the cert happens to verify
  t.true(first.secure);
  const enforced = await pool.send(targetOf(sink), request(['b@example.test'], { tlsPolicy: 'ENFORCED' }));
  t.true(enforced.connected, enforced.error);
  t.is(sink.connectionCount, 1);
  // A different MX name on the same address needs its own verified session.
  const other = await pool.send(targetOf(sink, 'mx.other.test'), request(['c@example.test'], { tlsPolicy: 'ENFORCED' }));
  t.false(other.connected);
  t.is(sink.messages.length, 2);
});

// ------------------------------------------------------------ relay

test('relay with implicit TLS and AUTH: every message goes to the relay, authenticated and verified', async (t) => {
  const { key, cert } = await testCert({ hostnames: [RELAY_HOST] });
  const relay = await startTestServer(t, {
    secure: true,
    key,
    cert,
    authMethods: ['PLAIN', 'LOGIN'],
    onAuth(auth, _session, callback) {
      if (auth.username === RELAY_USER && auth.password === RELAY_PASSWORD) return callback(null, { user: RELAY_USER });
      callback(new Error('Invalid username or password'));
    },
  });
  const pool = poolFor(t, { ca: cert, relay: { host: RELAY_HOST, address: LOOPBACK, port: relay.port, secure: 'implicit', user: RELAY_USER, password: RELAY_PASSWORD } });
  // The MX target is ignored in relay mode.
  const req = request(['a@gmail.test', 'b@yahoo.test']);
  const res = await pool.send({ host: 'gmail-smtp-in.l.google.test', address: '192.0.2.1', port: 25 }, req);
  t.true(res.connected, res.error);
  t.true(res.secure);
  t.is(res.remoteHost, RELAY_HOST);
  t.deepEqual(res.recipients.map((r) => r.outcome), ['delivered', 'delivered']);
  t.is(relay.received.length, 1);
  t.like(relay.received[0], { secure: true, user: RELAY_USER, rcptTo: ['a@gmail.test', 'b@yahoo.test'] });
  t.is(relay.received[0]!.raw.toString('utf8'), req.message.toString('utf8'));
  // Reused, without a second AUTH.
  await pool.send({ host: 'mx.other.test', address: '192.0.2.2', port: 25 }, request(['c@example.test']));
  t.is(relay.connections, 1);
  t.deepEqual(relay.authAttempts, [RELAY_USER]);
});

test('relay with STARTTLS and AUTH', async (t) => {
  const { key, cert } = await testCert({ hostnames: [RELAY_HOST] });
  const relay = await startTestServer(t, {
    key,
    cert,
    authMethods: ['PLAIN', 'LOGIN'],
    onAuth(auth, _session, callback) {
      if (auth.username === RELAY_USER && auth.password === RELAY_PASSWORD) return callback(null, { user: RELAY_USER });
      callback(new Error('Invalid username or password'));
    },
  });
  const pool = poolFor(t, { ca: cert, relay: { host: RELAY_HOST, address: LOOPBACK, port: relay.port, secure: 'starttls', user: RELAY_USER, password: RELAY_PASSWORD } });
  const res = await pool.send({ host: 'mx.example.test', address: '192.0.2.1', port: 25 }, request(['a@example.test']));
  t.true(res.connected, res.error);
  t.true(res.secure);
  t.like(relay.received[0], { secure: true, user: RELAY_USER });
});

test('relay that refuses our credentials: connected false, nothing sent', async (t) => {
  const { key, cert } = await testCert({ hostnames: [RELAY_HOST] });
  const relay = await startTestServer(t, {
    secure: true,
    key,
    cert,
    authMethods: ['PLAIN', 'LOGIN'],
    onAuth: (_auth, _session, callback) => callback(new Error('Invalid username or password')),
  });
  const pool = poolFor(t, { ca: cert, relay: { host: RELAY_HOST, address: LOOPBACK, port: relay.port, secure: 'implicit', user: RELAY_USER, password: 'wrong' } });
  const res = await pool.send({ host: 'mx.example.test', address: '192.0.2.1', port: 25 }, request(['a@example.test']));
  t.false(res.connected);
  t.regex(res.error ?? '', /AUTH/);
  t.like(res.recipients[0], { outcome: 'deferred', code: 535 });
  t.is(relay.received.length, 0);
});

test('relay certificate for another name: connected false', async (t) => {
  const { key, cert } = await testCert({ hostnames: ['not-the-relay.test'] });
  const relay = await startTestServer(t, { secure: true, key, cert, authOptional: true });
  const pool = poolFor(t, { ca: cert, relay: { host: RELAY_HOST, address: LOOPBACK, port: relay.port, secure: 'implicit' } });
  const res = await pool.send({ host: 'mx.example.test', address: '192.0.2.1', port: 25 }, request(['a@example.test']));
  t.false(res.connected);
  t.regex(res.error ?? '', /certificate/);
  t.is(relay.received.length, 0);
});

test('ENFORCED through a relay configured without TLS is refused before connecting', async (t) => {
  const sink = await sinkFor(t, { starttls: false });
  const pool = poolFor(t, { relay: { host: 'relay.local.test', address: LOOPBACK, port: sink.port, secure: 'none' } });
  const res = await pool.send({ host: 'mx.example.test', address: '192.0.2.1', port: 25 }, request(['a@example.test'], { tlsPolicy: 'ENFORCED' }));
  t.false(res.connected);
  t.regex(res.error ?? '', /ENFORCED/);
  t.is(sink.connectionCount, 0);
  // OPPORTUNISTIC goes through.
  const ok = await pool.send({ host: 'mx.example.test', address: '192.0.2.1', port: 25 }, request(['a@example.test']));
  t.is(ok.recipients[0]!.outcome, 'delivered');
});

test('a relay given by name is resolved through our resolver, not the system one', async (t) => {
  const { key, cert } = await testCert({ hostnames: [RELAY_HOST] });
  const relay = await startTestServer(t, { secure: true, key, cert, authOptional: true });
  const zone = await startDnsZone();
  t.teardown(() => zone.close());
  zone.set(RELAY_HOST, 'A', [LOOPBACK]);
  // Patient: this file generates RSA keys in parallel, which can starve the loop for a while.
  const resolver = createDnsClient({ servers: [zone.server], timeoutMs: 2_000, tries: 2 });
  const pool = poolFor(t, { ca: cert, resolver, relay: { host: RELAY_HOST, port: relay.port, secure: 'implicit' } });
  const res = await pool.send({ host: 'mx.example.test', address: '192.0.2.1', port: 25 }, request(['a@example.test']));
  t.true(res.connected, res.error);
  t.is(res.remoteAddress, `${LOOPBACK}:${relay.port}`);
  t.is(relay.received.length, 1);
  t.true(zone.queryCount >= 1);

  const noResolver = poolFor(t, { ca: cert, relay: { host: RELAY_HOST, port: relay.port, secure: 'implicit' } });
  const refused = await noResolver.send({ host: 'mx.example.test', address: '192.0.2.1', port: 25 }, request(['a@example.test']));
  t.false(refused.connected);
  t.regex(refused.error ?? '', /resolver/);
});
