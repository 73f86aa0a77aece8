import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { AuthFailureLockout, clientKey, ConnectionsPerIp } from '../../src/smtp/client-ip-limits.js';

// The per-client tables on their own: which address a limit counts, and that the lockout's table
// stays bounded however many addresses fail.

test('an IPv4-mapped address counts as its IPv4 address; IPv6 is counted by its /64', (t) => {
  t.is(clientKey('::ffff:192.0.2.7'), '192.0.2.7');
  t.is(clientKey('192.0.2.7'), '192.0.2.7');
  t.is(clientKey('2001:db8:1:2:aaaa::1'), '2001:db8:1:2::/64');
  t.is(clientKey('2001:0db8:0001:0002:bbbb:cccc:dddd:eeee'), '2001:db8:1:2::/64');
  t.is(clientKey('2001:db8::1'), '2001:db8:0:0::/64');
  t.is(clientKey('::1'), '0:0:0:0::/64');
  t.is(clientKey('fe80::1:2:3:4'), 'fe80:0:0:0::/64');
});

test('a connection is released once, and an address at zero leaves the table', (t) => {
  const c = new ConnectionsPerIp(1);
  t.true(c.admit('a', '192.0.2.1'));
  t.false(c.admit('b', '192.0.2.1'));
  c.release('b');
  t.false(c.admit('c', '192.0.2.1'), 'a refused connection frees nothing');
  c.release('a');
  c.release('a');
  t.true(c.admit('d', '192.0.2.1'));
  t.false(c.admit('e', '192.0.2.1'), 'releasing twice did not free a second slot');
  t.true(new ConnectionsPerIp(0).admit('x', '192.0.2.1'), '0 is no cap');
});

test('the lockout table drops expired entries and, full of live ones, the least recently failed', (t) => {
  const clock = new ManualClock();
  const l = new AuthFailureLockout(clock, 2, 60_000, 3);
  t.deepEqual(l.fail('192.0.2.1'), { lockedForMs: 0, started: false });
  t.deepEqual(l.fail('192.0.2.1'), { lockedForMs: 60_000, started: true }, 'the second failure locks');
  clock.advance(1_000);
  t.deepEqual(l.fail('192.0.2.1'), { lockedForMs: 59_000, started: false }, 'one finishing after it meets the lockout, neither starting nor lengthening it');
  for (let i = 2; i <= 100; i++) l.fail(`192.0.2.${i}`);
  t.is(l.size, 3);
  t.is(l.lockedFor('192.0.2.1'), 0, 'pushed out by newer addresses');
  clock.advance(60_000);
  l.fail('198.51.100.1');
  t.is(l.size, 1, 'what aged out of the window is gone');
  t.deepEqual(new AuthFailureLockout(clock, 0, 60_000).fail('192.0.2.1'), { lockedForMs: 0, started: false }, '0 is no lockout');
});

test('failures older than the window do not count toward the limit', (t) => {
  const clock = new ManualClock();
  const l = new AuthFailureLockout(clock, 2, 60_000);
  l.fail('192.0.2.1');
  clock.advance(60_000);
  t.is(l.fail('192.0.2.1').lockedForMs, 0);
  clock.advance(59_999);
  t.is(l.fail('192.0.2.1').lockedForMs, 60_000);
  clock.advance(59_999);
  t.is(l.lockedFor('192.0.2.1'), 1);
  clock.advance(1);
  t.is(l.lockedFor('192.0.2.1'), 0);
});
