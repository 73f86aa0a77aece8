import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { createPort25Watch, PORT25_WINDOW_MS } from '../../src/core/operators/port25-watch.js';
import { unreachedReason } from '../../src/smtp/outbound/smtp-session.js';
import type { SmtpError } from '../../src/smtp/outbound/smtp-client-types.js';
import { capturedLog } from '../helpers/captured-log.js';

// The port 25 watch's rule on its own (docs/outbound.md, "When port 25 is blocked"): how many
// hosts and domains, the window, what stands for a domain that is not known; and which connect
// errors count. The end-to-end cases are in test/operations/port25-blocked.test.ts.

function watch() {
  const clock = new ManualClock(Date.UTC(2026, 2, 2, 9, 0, 0));
  const log = capturedLog();
  const w = createPort25Watch({ clock, logger: log.logger, port: 25 });
  const fail = (host: string, address: string, domain?: string) => w.record({ reached: false, host, address, error: 'connection refused', ...(domain ? { domain } : {}) });
  const warnings = () => log.lines.filter((l) => l.event === 'outbound.port25_blocked').length;
  return { clock, w, fail, warnings };
}

test('three MX hosts of one recipient domain failing is that domain, not the port', (t) => {
  const { w, fail, warnings } = watch();
  fail('mx1.big.example', '192.0.2.1', 'big.example');
  fail('mx2.big.example', '192.0.2.2', 'big.example');
  fail('mx3.big.example', '198.51.100.3', 'big.example');
  t.false(w.blocked());
  t.like(w.state(), { state: 'ok', attempts: 3, failedHosts: 3 });
  fail('mx.other.example', '203.0.113.9', 'other.example');
  t.true(w.blocked());
  t.is(warnings(), 1);
});

test('without the domain, addresses in two /24s stand for two domains', (t) => {
  const { w, fail } = watch();
  fail('a.test', '192.0.2.1');
  fail('b.test', '192.0.2.2');
  fail('c.test', '192.0.2.3');
  t.false(w.blocked(), 'one /24');
  fail('d.test', '198.51.100.1');
  t.true(w.blocked());
});

test('failures older than the window do not count', (t) => {
  const { w, fail, clock } = watch();
  fail('a.test', '192.0.2.1', 'a.example');
  fail('b.test', '198.51.100.1', 'b.example');
  clock.advance(PORT25_WINDOW_MS + 1);
  fail('c.test', '203.0.113.1', 'c.example');
  t.false(w.blocked());
  t.like(w.state(), { attempts: 1, failedHosts: 1 });
});

test('a success in the window holds it off; while on, only a success clears it', (t) => {
  const { w, fail, clock } = watch();
  w.record({ reached: true, host: 'ok.test', address: '192.0.2.50' });
  clock.advance(60_000);
  fail('a.test', '192.0.2.1', 'a.example');
  fail('b.test', '198.51.100.1', 'b.example');
  fail('c.test', '203.0.113.1', 'c.example');
  t.false(w.blocked());
  clock.advance(PORT25_WINDOW_MS);
  fail('a.test', '192.0.2.1', 'a.example');
  t.true(w.blocked());
  // Hours without any attempt: still on (nothing got through since).
  clock.advance(10 * PORT25_WINDOW_MS);
  t.true(w.blocked());
  w.record({ reached: true, host: 'ok.test', address: '192.0.2.50' });
  t.false(w.blocked());
  t.like(w.state(), { state: 'ok', since: null, attempts: 0, failedHosts: 0, lastError: null });
});

const err = (fields: Partial<SmtpError>): SmtpError => Object.assign(new Error('x'), fields);

test('what counts as not connecting: before the TCP connection is up, a timeout, a refusal, no route, a local firewall', (t) => {
  t.is(unreachedReason(err({ code: 'ETIMEDOUT', timeoutType: 'CONNECT_TIMEOUT' }), 'init'), 'connect timeout');
  t.is(unreachedReason(err({ code: 'ESOCKET', originalCode: 'ECONNREFUSED' }), 'init'), 'connection refused');
  t.is(unreachedReason(err({ code: 'ESOCKET', originalCode: 'EHOSTUNREACH' }), 'init'), 'host unreachable');
  t.is(unreachedReason(err({ code: 'ESOCKET', originalCode: 'ENETUNREACH' }), 'init'), 'network unreachable');
  t.is(unreachedReason(err({ code: 'ESOCKET', originalCode: 'ETIMEDOUT' }), 'init'), 'connect timeout');
  t.is(unreachedReason(err({ code: 'ESOCKET', originalCode: 'EPERM' }), 'init'), 'connect not permitted by this host');
  // Not a sign of a blocked port: a local address that is not ours.
  t.is(unreachedReason(err({ code: 'ESOCKET', originalCode: 'EADDRNOTAVAIL' }), 'init'), undefined);
  // Once connected, whatever follows (no greeting, a 5xx greeting) reached the server.
  t.is(unreachedReason(err({ code: 'ETIMEDOUT', timeoutType: 'GREETING_TIMEOUT' }), 'connected'), undefined);
  t.is(unreachedReason(err({ code: 'EPROTOCOL', responseCode: 554 }), 'connected'), undefined);
  t.is(unreachedReason(undefined, 'connected'), undefined);
});
