/**
 * MX resolution through the real stub resolver against the in-process DNS
 * zone; cache expiry is driven by a ManualClock and observed with the zone's
 * queryCount. Each test owns its zone, resolver and clock.
 */
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { ManualClock } from '../../../src/lib/clock.js';
import { createDnsClient, DnsError } from '../../../src/lib/dns/dns-client.js';
import { createMxResolver, MxLookupError } from '../../../src/smtp/outbound/mx-resolver.js';
import type { MxResolverOptions } from '../../../src/smtp/outbound/mx-resolver.js';
import { startDnsZone } from '../../helpers/dns-zone.js';
import type { DnsZone } from '../../helpers/dns-zone.js';

/** Loopback answers take far less; generous so a busy CI box does not turn an answer into a timeout. */
const DNS_TIMEOUT_MS = 2_000;
/** For the one case that waits for a timeout on purpose. */
const SHORT_DNS_TIMEOUT_MS = 300;
const MS_PER_SECOND = 1000;

async function world(t: ExecutionContext, opts: MxResolverOptions = {}, timeoutMs = DNS_TIMEOUT_MS) {
  const zone = await startDnsZone();
  t.teardown(() => zone.close());
  const clock = new ManualClock();
  const dns = createDnsClient({ servers: [zone.server], timeoutMs, tries: 1 });
  const mx = createMxResolver(dns, clock, opts);
  return { zone, clock, mx };
}

async function rejects(t: ExecutionContext, promise: Promise<unknown>, permanent: boolean, message: RegExp): Promise<void> {
  const err = await t.throwsAsync(promise, { instanceOf: MxLookupError });
  t.is(err?.permanent, permanent, err?.message);
  t.regex(err?.message ?? '', message);
}

function setHost(zone: DnsZone, name: string, v4: string[], v6: string[] = [], ttl?: number): void {
  if (v4.length) zone.set(name, 'A', v4, ttl);
  if (v6.length) zone.set(name, 'AAAA', v6, ttl);
}

test('MX hosts come back in preference order with their addresses, IPv4 before IPv6', async (t) => {
  const { zone, mx } = await world(t);
  zone.set('example.test', 'MX', [
    { exchange: 'backup.example.test', priority: 20 },
    { exchange: 'mx1.example.test', priority: 10 },
  ]);
  setHost(zone, 'mx1.example.test', ['192.0.2.1', '192.0.2.2'], ['2001:db8::1']);
  setHost(zone, 'backup.example.test', [], ['2001:db8::2']);
  const hosts = await mx.resolve('Example.TEST.');
  t.deepEqual(hosts, [
    { host: 'mx1.example.test', priority: 10, addresses: ['192.0.2.1', '192.0.2.2', '2001:db8::1'], dnssec: false },
    { host: 'backup.example.test', priority: 20, addresses: ['2001:db8::2'], dnssec: false },
  ]);
});

test('equal preferences are shuffled on every call, lower preference always first (RFC 5321 5.1)', async (t) => {
  const { zone, mx } = await world(t);
  zone.set('spread.test', 'MX', [
    { exchange: 'a.spread.test', priority: 10 },
    { exchange: 'b.spread.test', priority: 10 },
    { exchange: 'c.spread.test', priority: 5 },
  ]);
  for (const h of ['a', 'b', 'c']) setHost(zone, `${h}.spread.test`, ['192.0.2.10']);
  const seen = new Set<string>();
  // 2^-63 chance that one order never shows up.
  for (let i = 0; i < 64; i++) {
    const hosts = await mx.resolve('spread.test');
    t.is(hosts[0]!.host, 'c.spread.test');
    seen.add(hosts.map((h) => h.host).join(','));
  }
  t.deepEqual([...seen].sort(), ['c.spread.test,a.spread.test,b.spread.test', 'c.spread.test,b.spread.test,a.spread.test']);
});

test('no MX records: the domain itself is the implicit MX with preference 0', async (t) => {
  const { zone, mx } = await world(t);
  zone.set('implicit.test', 'TXT', ['v=spf1 -all']); // the name exists, MX is NODATA
  setHost(zone, 'implicit.test', ['192.0.2.30'], ['2001:db8::30']);
  t.deepEqual(await mx.resolve('implicit.test'), [{ host: 'implicit.test', priority: 0, addresses: ['192.0.2.30', '2001:db8::30'], dnssec: false }]);
});

test('no MX records on an alias: the implicit MX is the name the CNAME leads to, as if it were the initial name (RFC 5321 5.1)', async (t) => {
  const { zone, mx } = await world(t);
  // MTA-STS mx patterns and the certificate check go by the MX host's name: the real host's, not the alias.
  zone.set('alias.test', 'CNAME', ['mail.hosting.test']);
  zone.set('mail.hosting.test', 'TXT', ['v=spf1 -all']); // exists, no MX
  setHost(zone, 'mail.hosting.test', ['192.0.2.31'], ['2001:db8::31']);
  t.deepEqual(await mx.resolve('alias.test'), [{ host: 'mail.hosting.test', priority: 0, addresses: ['192.0.2.31', '2001:db8::31'], dnssec: false }]);
});

test('no MX and no address records: permanent', async (t) => {
  const { zone, mx } = await world(t);
  zone.set('nothing.test', 'TXT', ['hello']);
  await rejects(t, mx.resolve('nothing.test'), true, /no MX records and no A\/AAAA/);
});

test('null MX (RFC 7505) is permanent: the domain accepts no mail', async (t) => {
  const { zone, mx } = await world(t);
  zone.set('nomail.test', 'MX', [{ exchange: '.', priority: 0 }]);
  setHost(zone, 'nomail.test', ['192.0.2.40']); // must not be used as an implicit MX
  await rejects(t, mx.resolve('nomail.test'), true, /null MX/);
});

test('NXDOMAIN is permanent', async (t) => {
  const { mx } = await world(t);
  await rejects(t, mx.resolve('no-such-domain.test'), true, /does not exist/);
});

test('SERVFAIL and timeouts are temporary', async (t) => {
  const { zone, mx } = await world(t, {}, SHORT_DNS_TIMEOUT_MS);
  zone.servfail('broken.test');
  await rejects(t, mx.resolve('broken.test'), false, /SERVFAIL/);
  zone.blackhole('silent.test');
  await rejects(t, mx.resolve('silent.test'), false, /TIMEOUT/);
});

test('FORMERR (a broken resolver or middlebox answers it to everything) is temporary: it must not bounce and suppress every recipient', async (t) => {
  const { zone, mx } = await world(t);
  zone.formerr('formerr.test');
  await rejects(t, mx.resolve('formerr.test'), false, /FORMERR/);
  // The MX is there but its host's address lookups get FORMERR.
  zone.set('mxformerr.test', 'MX', [{ exchange: 'mx.mxformerr.test', priority: 10 }]);
  zone.formerr('mx.mxformerr.test');
  await rejects(t, mx.resolve('mxformerr.test'), false, /FORMERR/);
});

test('an MX host that does not resolve is skipped; when none resolves the failure is temporary', async (t) => {
  const { zone, mx } = await world(t);
  zone.set('partial.test', 'MX', [
    { exchange: 'gone.partial.test', priority: 5 },
    { exchange: 'ok.partial.test', priority: 10 },
  ]);
  setHost(zone, 'ok.partial.test', ['192.0.2.50']);
  t.deepEqual(await mx.resolve('partial.test'), [{ host: 'ok.partial.test', priority: 10, addresses: ['192.0.2.50'], dnssec: false }]);

  zone.set('allbad.test', 'MX', [{ exchange: 'gone.allbad.test', priority: 5 }, { exchange: 'fail.allbad.test', priority: 10 }]);
  zone.servfail('fail.allbad.test');
  await rejects(t, mx.resolve('allbad.test'), false, /none of the MX hosts resolved/);
});

test('MX hosts that do not exist (every target NXDOMAIN) bounce at once, as Postfix says "Host not found"; a temporary failure beside them still defers', async (t) => {
  const { zone, mx } = await world(t, {}, SHORT_DNS_TIMEOUT_MS);
  zone.set('typo.test', 'MX', [
    { exchange: 'mx1.typo-host.test', priority: 10 },
    { exchange: 'mx2.typo-host.test', priority: 20 },
  ]);
  await rejects(t, mx.resolve('typo.test'), true, /no MX host exists \(mx1\.typo-host\.test: .*NXDOMAIN.*; mx2\.typo-host\.test: .*NXDOMAIN/);

  // One host does not exist, the other resolves only to loopback: no address is left either way.
  zone.set('nowhere.test', 'MX', [
    { exchange: 'gone.nowhere.test', priority: 10 },
    { exchange: 'lo.nowhere.test', priority: 20 },
  ]);
  setHost(zone, 'lo.nowhere.test', ['127.0.0.1']);
  await rejects(t, mx.resolve('nowhere.test'), true, /no MX host exists/);

  // SERVFAIL or a timeout for one host, or for one address family of it: the answer may change.
  zone.set('later.test', 'MX', [
    { exchange: 'gone.later.test', priority: 10 },
    { exchange: 'slow.later.test', priority: 20 },
  ]);
  zone.blackhole('slow.later.test');
  await rejects(t, mx.resolve('later.test'), false, /none of the MX hosts resolved \(gone\.later\.test: .*NXDOMAIN.*slow\.later\.test: .*TIMEOUT/);
  const flaky = await world(t);
  const dns = createDnsClient({ servers: [flaky.zone.server], timeoutMs: DNS_TIMEOUT_MS, tries: 1 });
  const failingAaaa = createMxResolver({ ...dns, resolve6: async (name: string) => Promise.reject(new DnsError('SERVFAIL', name, 'AAAA')) }, flaky.clock);
  flaky.zone.set('half.test', 'MX', [{ exchange: 'mx.half.test', priority: 10 }]);
  await rejects(t, failingAaaa.resolve('half.test'), false, /none of the MX hosts resolved/);
});

test('an MX target that is no host name (a NUL, CRLF, a space or a raw 8-bit octet in a label) is skipped and named escaped; alone it is temporary (RFC 5321 2.3.5)', async (t) => {
  const { zone, mx } = await world(t);
  const odd = ['nul\u0000byte.odd.test', 'crlf\r\nrcpt.odd.test', 'a space.odd.test', 'd\u00fcsseldorf.odd.test'];
  for (const name of odd) setHost(zone, name, ['192.0.2.60']);
  setHost(zone, 'ok.odd.test', ['192.0.2.61']);
  setHost(zone, 'under_score.odd.test', ['192.0.2.62']);
  zone.set('odd.test', 'MX', [...odd.map((exchange) => ({ exchange, priority: 5 })), { exchange: 'ok.odd.test', priority: 10 }, { exchange: 'under_score.odd.test', priority: 20 }]);
  t.deepEqual(
    (await mx.resolve('odd.test')).map((h) => h.host),
    ['ok.odd.test', 'under_score.odd.test'],
  );
  zone.set('onlyodd.test', 'MX', odd.map((exchange) => ({ exchange, priority: 5 })));
  const err = await t.throwsAsync(mx.resolve('onlyodd.test'), { instanceOf: MxLookupError });
  t.false(err!.permanent);
  t.regex(err!.message, /none of the MX hosts resolved .*not a host name/);
  t.false(/[\u0000\r\n]/.test(err!.message), err!.message);
  t.true(err!.message.includes('"nul\\u0000byte.odd.test"'), err!.message);
});

test('answers are cached for their TTL by the injected clock', async (t) => {
  const { zone, clock, mx } = await world(t);
  zone.set('cached.test', 'MX', [{ exchange: 'mx.cached.test', priority: 10 }], 60);
  zone.set('mx.cached.test', 'A', ['192.0.2.60'], 600);
  zone.set('mx.cached.test', 'AAAA', ['2001:db8::60'], 600);

  t.deepEqual((await mx.resolve('cached.test'))[0]!.addresses, ['192.0.2.60', '2001:db8::60']);
  const afterFirst = zone.queryCount;
  t.is(afterFirst, 3); // MX, A, AAAA

  clock.advance(59 * MS_PER_SECOND);
  await mx.resolve('cached.test');
  t.is(zone.queryCount, afterFirst, 'all answers still fresh');

  zone.set('cached.test', 'MX', [{ exchange: 'mx.cached.test', priority: 20 }], 60);
  clock.advance(2 * MS_PER_SECOND);
  const hosts = await mx.resolve('cached.test');
  t.is(hosts[0]!.priority, 20, 'the expired MX answer was fetched again');
  t.is(zone.queryCount, afterFirst + 1, 'only the MX record expired; the host addresses are still cached');

  clock.advance(600 * MS_PER_SECOND);
  await mx.resolve('cached.test');
  t.is(zone.queryCount, afterFirst + 4);
});

test('concurrent lookups of one domain share the queries', async (t) => {
  const { zone, mx } = await world(t);
  zone.set('shared.test', 'MX', [{ exchange: 'mx.shared.test', priority: 10 }]);
  setHost(zone, 'mx.shared.test', ['192.0.2.70']);
  const results = await Promise.all(Array.from({ length: 10 }, () => mx.resolve('shared.test')));
  t.true(results.every((r) => r[0]!.addresses[0] === '192.0.2.70'));
  t.is(zone.queryCount, 3);
});

test('temporary failures are cached briefly (negativeTtlSeconds), then asked again', async (t) => {
  const { zone, clock, mx } = await world(t, { negativeTtlSeconds: 30 });
  zone.servfail('flaky.test');
  await rejects(t, mx.resolve('flaky.test'), false, /SERVFAIL/);
  const afterFailure = zone.queryCount;

  zone.clear('flaky.test');
  zone.set('flaky.test', 'MX', [{ exchange: 'mx.flaky.test', priority: 10 }]);
  setHost(zone, 'mx.flaky.test', ['192.0.2.80']);
  clock.advance(29 * MS_PER_SECOND);
  await rejects(t, mx.resolve('flaky.test'), false, /SERVFAIL/);
  t.is(zone.queryCount, afterFailure, 'the failure came from the cache');

  clock.advance(2 * MS_PER_SECOND);
  t.is((await mx.resolve('flaky.test'))[0]!.host, 'mx.flaky.test');
});

test('the cache is bounded: the least recently used answers are dropped', async (t) => {
  const { zone, mx } = await world(t, { maxCacheEntries: 3 });
  for (const d of ['one', 'two']) {
    zone.set(`${d}.test`, 'MX', [{ exchange: `mx.${d}.test`, priority: 10 }]);
    zone.set(`mx.${d}.test`, 'A', ['192.0.2.90']);
  }
  await mx.resolve('one.test'); // MX one, A mx.one, AAAA mx.one: full
  const afterOne = zone.queryCount;
  await mx.resolve('one.test');
  t.is(zone.queryCount, afterOne);
  await mx.resolve('two.test'); // pushes all of one.test out
  const afterTwo = zone.queryCount;
  await mx.resolve('one.test');
  t.is(zone.queryCount, afterTwo + 3);
});

test('a TTL-0 answer is used once: every resolve asks again, also when the other records are cached', async (t) => {
  const { zone, mx } = await world(t);
  zone.set('once.test', 'MX', [{ exchange: 'mx.once.test', priority: 10 }], 600);
  zone.set('mx.once.test', 'A', ['192.0.2.100'], 0);
  t.deepEqual((await mx.resolve('once.test'))[0]!.addresses, ['192.0.2.100']);
  const afterFirst = zone.queryCount;
  zone.set('mx.once.test', 'A', ['192.0.2.101'], 0);
  t.deepEqual((await mx.resolve('once.test'))[0]!.addresses, ['192.0.2.101'], 'the new address, not a remembered answer');
  t.is(zone.queryCount, afterFirst + 1, 'only the TTL-0 record was asked again');
});

test('a remembered answer ends with the first of its records to expire, a host address included', async (t) => {
  const { zone, clock, mx } = await world(t);
  zone.set('memo.test', 'MX', [{ exchange: 'mx.memo.test', priority: 10 }], 600);
  zone.set('mx.memo.test', 'A', ['192.0.2.110'], 30);
  await mx.resolve('memo.test');
  const afterFirst = zone.queryCount;
  const copy = await mx.resolve('memo.test');
  copy[0]!.addresses.push('192.0.2.199'); // a caller changing its copy changes nothing cached
  t.deepEqual((await mx.resolve('memo.test'))[0]!.addresses, ['192.0.2.110']);
  t.is(zone.queryCount, afterFirst);

  zone.set('mx.memo.test', 'A', ['192.0.2.111'], 30);
  clock.advance(31 * MS_PER_SECOND);
  t.deepEqual((await mx.resolve('memo.test'))[0]!.addresses, ['192.0.2.111']);
  t.is(zone.queryCount, afterFirst + 1, 'only the expired A record was asked again');
});

test('addresses on this host are dropped: a domain whose every MX is loopback, 0.0.0.0 or multicast bounces; allowLoopback keeps them', async (t) => {
  const { zone, mx } = await world(t);
  // "MX 0 localhost" and friends: each form of a local address, IPv4-mapped IPv6 included.
  zone.set('loops.test', 'MX', [
    { exchange: 'localhost.loops.test', priority: 10 },
    { exchange: 'zero.loops.test', priority: 20 },
    { exchange: 'six.loops.test', priority: 30 },
  ]);
  setHost(zone, 'localhost.loops.test', ['127.0.0.1']);
  setHost(zone, 'zero.loops.test', ['0.0.0.0', '239.1.2.3']);
  setHost(zone, 'six.loops.test', [], ['::1', '::ffff:127.0.0.2', '::']);
  await rejects(t, mx.resolve('loops.test'), true, /every MX host resolves only to loopback or unroutable addresses \(localhost\.loops\.test: resolves only to loopback or unroutable addresses \(127\.0\.0\.1 is a loopback address\).*outbound\.allowLoopbackMx/);

  // A host with a public address as well keeps that one only; other hosts are unaffected.
  zone.set('mixed.test', 'MX', [
    { exchange: 'half.mixed.test', priority: 10 },
    { exchange: 'lo.mixed.test', priority: 20 },
  ]);
  setHost(zone, 'half.mixed.test', ['127.0.0.1', '192.0.2.50'], ['::1', '2001:db8::50']);
  setHost(zone, 'lo.mixed.test', ['127.0.0.9']);
  t.deepEqual(await mx.resolve('mixed.test'), [{ host: 'half.mixed.test', priority: 10, addresses: ['192.0.2.50', '2001:db8::50'], dnssec: false }]);

  // The implicit MX (no MX records) is judged the same way.
  zone.set('self.test', 'TXT', ['v=spf1 -all']);
  setHost(zone, 'self.test', ['127.0.0.1']);
  await rejects(t, mx.resolve('self.test'), true, /no MX records, and the domain resolves only to loopback or unroutable addresses/);

  // A loopback host beside one that cannot be resolved right now: temporary, the zone may be half-migrated.
  zone.set('partly.test', 'MX', [
    { exchange: 'lo.partly.test', priority: 10 },
    { exchange: 'gone.partly.test', priority: 20 },
  ]);
  setHost(zone, 'lo.partly.test', ['127.0.0.1']);
  zone.set('gone.partly.test', 'TXT', ['nothing here']);
  await rejects(t, mx.resolve('partly.test'), false, /none of the MX hosts resolved/);

  // Loopback by A while the AAAA lookup fails for now: the AAAA may yet be a public address.
  const flaky = await world(t);
  const dns = createDnsClient({ servers: [flaky.zone.server], timeoutMs: DNS_TIMEOUT_MS, tries: 1 });
  const failingAaaa = createMxResolver({ ...dns, resolve6: async (name: string) => Promise.reject(new DnsError('SERVFAIL', name, 'AAAA')) }, flaky.clock);
  flaky.zone.set('v6-later.test', 'MX', [{ exchange: 'mx.v6-later.test', priority: 10 }]);
  setHost(flaky.zone, 'mx.v6-later.test', ['127.0.0.1']);
  await rejects(t, failingAaaa.resolve('v6-later.test'), false, /none of the MX hosts resolved \(mx\.v6-later\.test: resolves only to loopback or unroutable addresses/);
  flaky.zone.set('implicit-v6-later.test', 'TXT', ['v=spf1 -all']);
  setHost(flaky.zone, 'implicit-v6-later.test', ['127.0.0.1']);
  await rejects(t, failingAaaa.resolve('implicit-v6-later.test'), false, /no MX records and the address lookup failed: resolves only to loopback or unroutable addresses/);

  const other = await world(t, { allowLoopback: true });
  other.zone.set('loops.test', 'MX', [{ exchange: 'localhost.loops.test', priority: 10 }]);
  setHost(other.zone, 'localhost.loops.test', ['127.0.0.1']);
  t.deepEqual(await other.mx.resolve('loops.test'), [{ host: 'localhost.loops.test', priority: 10, addresses: ['127.0.0.1'], dnssec: false }]);
});

test('"MX 0 localhost" is loopback whatever the resolver says (RFC 6761 6.3): it bounces at once, and no address the resolver made up is connected to', async (t) => {
  const { zone, mx } = await world(t);
  // A resolver that knows no "localhost" (NXDOMAIN): not a lookup to retry for 72 hours.
  zone.set('nolocal.test', 'MX', [{ exchange: 'localhost', priority: 0 }]);
  await rejects(t, mx.resolve('nolocal.test'), true, /every MX host resolves only to loopback or unroutable addresses \(localhost: .*127\.0\.0\.1 is a loopback address/);
  // One that answers with a public address (NXDOMAIN rewriting, a hostile resolver): never used.
  setHost(zone, 'mail.localhost', ['192.0.2.80']);
  zone.set('hijacked.test', 'MX', [{ exchange: 'mail.localhost', priority: 0 }]);
  await rejects(t, mx.resolve('hijacked.test'), true, /every MX host resolves only to loopback/);
  // A real host beside it is used; localhost names are never asked of the resolver.
  zone.set('beside.test', 'MX', [
    { exchange: 'localhost', priority: 0 },
    { exchange: 'mx.beside.test', priority: 10 },
  ]);
  setHost(zone, 'mx.beside.test', ['192.0.2.81']);
  t.deepEqual(await mx.resolve('beside.test'), [{ host: 'mx.beside.test', priority: 10, addresses: ['192.0.2.81'], dnssec: false }]);
  t.is(zone.queriesFor('localhost', 'A') + zone.queriesFor('mail.localhost', 'A'), 0);
});
