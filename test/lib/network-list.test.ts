import test from 'ava';
import { networkMatcher, networkProblem } from '../../src/lib/network-list.js';

// The lists of addresses and networks the SMTP listeners' exemptNetworks take: both families,
// and an IPv4-mapped IPv6 address (client or entry) counted as the IPv4 address it carries.

test('a list matches its addresses and networks, IPv4-mapped clients as their IPv4 form, and nothing else', (t) => {
  const inList = networkMatcher(['10.0.0.0/8', '192.0.2.7', '2001:db8:1::/48', '::1', '::ffff:198.51.100.0/120']);
  for (const ip of ['10.1.2.3', '::ffff:10.200.0.1', '192.0.2.7', '::FFFF:192.0.2.7', '2001:db8:1:ffff::5', '::1', '198.51.100.200', '::ffff:198.51.100.1']) t.true(inList(ip), ip);
  for (const ip of ['11.0.0.1', '192.0.2.8', '2001:db8:2::1', '::2', '198.51.101.1', '', undefined, 'not-an-ip']) t.false(inList(ip), String(ip));
  t.true(networkMatcher(['fe80::/10'])('fe80::1%eth0'), 'a zone on the client address is ignored');
  t.false(networkMatcher([])('127.0.0.1'), 'empty: nobody');
  t.true(networkMatcher(['0.0.0.0/0'])('203.0.113.9'));
  t.false(networkMatcher(['0.0.0.0/0'])('2001:db8::1'), 'an IPv4 network holds no IPv6 client');
});

test('networkProblem names what is wrong with an entry; networkMatcher refuses one it would not take', (t) => {
  for (const ok of ['10.0.0.0/8', ' 10.0.0.1 ', '::', '2001:db8::/32', '::ffff:10.0.0.0/104', '10.1.2.3/8']) t.is(networkProblem(ok), undefined, ok);
  for (const bad of ['', '10.0.0.0/33', '10.0.0.0/-1', '10.0.0.0/x', '2001:db8::/129', 'example.com', '10.0.0.0/8/1', 'fe80::1%eth0', '::ffff:10.0.0.0/95']) {
    t.truthy(networkProblem(bad), bad);
  }
  t.throws(() => networkMatcher(['10.0.0.0/33']));
});
