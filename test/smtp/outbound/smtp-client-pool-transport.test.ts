/**
 * The pool's side of transport security: a TransportRequirement judges what each session saw of
 * TLS before MAIL FROM (a new session, an idle one offered for reuse, one that failed), a session
 * it refuses carries nothing, and the verdict is on the transaction result.
 */
import net from 'node:net';
import test from 'ava';
import type { TlsObservation, TransportRequirement } from '../../../src/smtp/outbound/smtp-client-types.js';
import type { TlsVerdict } from '../../../src/core/tls-reports/tls-verdict.js';
import { poolFor, request, sinkFor, targetOf } from './pool-helpers.js';

function requirement(opts: { requireTls: boolean; accept: (o: TlsObservation) => boolean }, seen: TlsObservation[] = []): TransportRequirement {
  return {
    requireTls: opts.requireTls,
    judge(o) {
      seen.push(o);
      const ok = opts.accept(o);
      const verdict: TlsVerdict = {
        policy: { type: 'sts', domain: 'example.test', strings: [], mxHosts: [] },
        mode: 'enforce',
        result: ok ? 'success' : o.secure ? 'certificate-not-trusted' : 'starttls-not-supported',
        mxHost: o.host,
        proceeded: ok,
      };
      return { proceed: ok, verdict };
    },
  };
}

test('the judge sees the session (TLS, Node PKIX verdict, the peer chain) and its verdict is on the result', async (t) => {
  const sink = await sinkFor(t);
  const pool = poolFor(t, { ca: sink.ca });
  const seen: TlsObservation[] = [];
  const res = await pool.send(targetOf(sink), request(['a@example.test'], { transport: requirement({ requireTls: true, accept: () => true }, seen) }));
  t.true(res.connected, res.error);
  t.is(res.recipients[0]!.outcome, 'delivered');
  t.like(res.tls, { result: 'success', mxHost: sink.hostname, proceeded: true });
  t.like(seen[0], { host: sink.hostname, secure: true, pkixError: null, remoteIp: '127.0.0.1', localIp: '127.0.0.1' });
  t.is(seen[0]!.peerChain!()[0]!.subject, `CN=${sink.hostname}`);
});

test('a session the judge refuses is closed before MAIL FROM and reported as no session', async (t) => {
  let mailFroms = 0;
  const sink = await sinkFor(t, { onMailFrom: () => void mailFroms++ });
  const pool = poolFor(t); // the sink's certificate is not trusted: pkixError is set
  const seen: TlsObservation[] = [];
  const res = await pool.send(targetOf(sink), request(['a@example.test'], { transport: requirement({ requireTls: true, accept: (o) => o.pkixError === null }, seen) }));
  t.false(res.connected);
  t.like(res.tls, { result: 'certificate-not-trusted', proceeded: false });
  t.regex(seen[0]!.pkixError ?? '', /SELF_SIGNED/);
  t.is(mailFroms, 0);
  t.is(sink.messages.length, 0);
});

test('an idle session is reused only when the next request judges it acceptable', async (t) => {
  const sink = await sinkFor(t);
  const pool = poolFor(t); // untrusted certificate
  const lenient = requirement({ requireTls: false, accept: () => true });
  const strict = requirement({ requireTls: true, accept: (o) => o.pkixError === null });
  t.is((await pool.send(targetOf(sink), request(['a@example.test'], { transport: lenient }))).recipients[0]!.outcome, 'delivered');
  t.is((await pool.send(targetOf(sink), request(['b@example.test'], { transport: lenient }))).recipients[0]!.outcome, 'delivered');
  t.is(sink.connectionCount, 1, 'reused');
  const refused = await pool.send(targetOf(sink), request(['c@example.test'], { transport: strict }));
  t.false(refused.connected);
  t.is(sink.connectionCount, 2, 'the idle session was not offered to the strict request; a fresh one was judged and refused');
  t.is(sink.messages.length, 2);
});

test('STARTTLS required but not offered: no session, and the judge names it', async (t) => {
  const sink = await sinkFor(t, { starttls: false });
  const pool = poolFor(t, { ca: sink.ca });
  const seen: TlsObservation[] = [];
  const res = await pool.send(targetOf(sink), request(['a@example.test'], { transport: requirement({ requireTls: true, accept: (o) => o.secure }, seen) }));
  t.false(res.connected);
  t.like(seen[0], { secure: false, tlsFailure: 'not-offered' });
  t.like(res.tls, { result: 'starttls-not-supported' });
  t.is(sink.messages.length, 0);
});

test('opportunistic under a requirement: plaintext when STARTTLS is not offered, and the judge is told why', async (t) => {
  const sink = await sinkFor(t, { starttls: false });
  const pool = poolFor(t);
  const seen: TlsObservation[] = [];
  const res = await pool.send(targetOf(sink), request(['a@example.test'], { transport: requirement({ requireTls: false, accept: () => true }, seen) }));
  t.true(res.connected);
  t.false(res.secure);
  t.like(seen[0], { secure: false, tlsFailure: 'not-offered' });
  t.is(sink.messages.length, 1);
});

test('STARTTLS required and the connection cut at STARTTLS (a man in the middle): no session, and the judge names it', async (t) => {
  // Offers STARTTLS, then hangs up on the command: what a middlebox that strips TLS does when the
  // client insists. The session is not used, and the failure is a TLS verdict (RFC 8460) like a refusal.
  const server = net.createServer((socket) => {
    socket.write('220 mx.cut.test ESMTP\r\n');
    socket.on('data', (chunk) => {
      const line = chunk.toString();
      if (/^EHLO/i.test(line)) socket.write('250-mx.cut.test\r\n250 STARTTLS\r\n');
      else if (/^STARTTLS/i.test(line)) socket.destroy();
      else socket.write('500 no\r\n');
    });
    socket.on('error', () => {});
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const pool = poolFor(t);
  const seen: TlsObservation[] = [];
  const port = (server.address() as net.AddressInfo).port;
  const res = await pool.send({ host: 'mx.cut.test', address: '127.0.0.1', port }, request(['a@example.test'], { transport: requirement({ requireTls: true, accept: (o) => o.secure }, seen) }));
  t.false(res.connected);
  t.like(seen[0], { secure: false, tlsFailure: 'not-offered' });
  t.like(res.tls, { result: 'starttls-not-supported', proceeded: false });
});
