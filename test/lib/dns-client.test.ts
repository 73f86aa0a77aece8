/**
 * The stub resolver against real DNS over loopback: every test gets its own
 * startDnsZone() so queryCount assertions are not disturbed by neighbours.
 */
import { spawn } from 'node:child_process';
import dgram from 'node:dgram';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import dnsPacket from 'dns-packet';
import type { DecodedPacket, Packet } from 'dns-packet';
import { spf } from 'mailauth/lib/spf/index.js';
import type { DNSResolver } from 'mailauth';
import { adTrusted, createDnsClient, DnsError, parseDnsServers } from '../../src/lib/dns/dns-client.js';
import { toNodeStyleResolver } from '../../src/lib/dns/node-style-resolver.js';
import type { DnsErrorCode } from '../../src/lib/dns/dns-client.js';
import { startDnsZone } from '../helpers/dns-zone.js';
import type { DnsZone } from '../helpers/dns-zone.js';

/** Short enough to keep the suite fast, long enough for a loaded box to answer on loopback (200 ms
 *  timed out answering queries at load average 12). */
const SHORT_TIMEOUT_MS = 1000;
/** Deadline for the leak-check child process; hitting it means a handle kept the process alive. */
const CHILD_EXIT_DEADLINE_MS = 15_000;

async function zoneFor(t: ExecutionContext): Promise<DnsZone> {
  const zone = await startDnsZone();
  t.teardown(() => zone.close());
  return zone;
}

async function rejectsWith(t: ExecutionContext, promise: Promise<unknown>, code: DnsErrorCode, temporary: boolean): Promise<DnsError> {
  const err = await t.throwsAsync(promise, { instanceOf: DnsError });
  t.is(err?.code, code);
  t.is(err?.temporary, temporary);
  return err as DnsError;
}

async function nodeCode(resolver: (name: string, rrtype?: string) => Promise<unknown>, name: string, rrtype: string): Promise<unknown> {
  try {
    await resolver(name, rrtype);
    return 'resolved';
  } catch (err) {
    return (err as { code?: unknown }).code;
  }
}

/** A port with nothing behind it: bind, note, close. The kernel answers datagrams to it with ICMP port unreachable. */
async function deadPort(): Promise<number> {
  const s = dgram.createSocket('udp4');
  await new Promise<void>((resolve) => s.bind(0, '127.0.0.1', () => resolve()));
  const { port } = s.address();
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

interface RawServer {
  server: string;
  queries: DecodedPacket[];
  close(): Promise<void>;
}

/** A misbehaving server for wire-level cases the well-behaved zone cannot produce. */
async function rawServer(t: ExecutionContext, onQuery: (query: DecodedPacket, send: (reply: Packet | Buffer) => void) => void): Promise<RawServer> {
  const socket = dgram.createSocket('udp4');
  const queries: DecodedPacket[] = [];
  socket.on('message', (msg, rinfo) => {
    const query = dnsPacket.decode(msg);
    queries.push(query);
    onQuery(query, (reply) => socket.send(Buffer.isBuffer(reply) ? reply : dnsPacket.encode(reply), rinfo.port, rinfo.address));
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', () => resolve()));
  const raw = {
    server: `127.0.0.1:${socket.address().port}`,
    queries,
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
  t.teardown(() => raw.close());
  return raw;
}

function replyTo(query: DecodedPacket, overrides: Partial<Packet> = {}): Packet {
  return { type: 'response', id: query.id, flags: dnsPacket.RECURSION_AVAILABLE, questions: query.questions, answers: [], ...overrides };
}

// ------------------------------------------------------------------ TXT

test('TXT: a single-chunk record', async (t) => {
  const zone = await zoneFor(t);
  zone.set('example.com', 'TXT', ['v=spf1 -all'], 120);
  const dns = createDnsClient({ servers: [zone.server] });
  t.deepEqual(await dns.resolveTxt('example.com'), { records: [['v=spf1 -all']], ttlSeconds: 120, authenticated: false });
});

test('TXT: explicit chunks stay separate and several records come back as several arrays', async (t) => {
  const zone = await zoneFor(t);
  zone.set('sel._domainkey.example.com', 'TXT', [['v=DKIM1; k=rsa; ', 'p=MIIB'], 'second']);
  const dns = createDnsClient({ servers: [zone.server] });
  const answer = await dns.resolveTxt('sel._domainkey.example.com');
  t.deepEqual(answer.records, [['v=DKIM1; k=rsa; ', 'p=MIIB'], ['second']]);
});

test('TXT: a long string is split into 255-octet chunks on character boundaries', async (t) => {
  const zone = await zoneFor(t);
  const ascii = 'a'.repeat(600);
  const utf8 = 'é'.repeat(200); // 400 octets; a naive byte split would cut a character in half
  zone.set('long.example.com', 'TXT', [ascii, utf8]);
  const dns = createDnsClient({ servers: [zone.server] });
  const { records } = await dns.resolveTxt('long.example.com');
  t.deepEqual(records[0]!.map((c) => c.length), [255, 255, 90]);
  t.is(records[0]!.join(''), ascii);
  t.true(records[1]!.every((c) => Buffer.byteLength(c) <= 255));
  t.is(records[1]!.join(''), utf8);
  t.is(zone.queryCount, 1, 'about 1 KB fits the 1232-octet EDNS0 UDP size, so no TCP retry');
});

test('TXT: an answer too big for UDP is fetched again over TCP', async (t) => {
  const zone = await zoneFor(t);
  const big = Array.from({ length: 4 }, (_, i) => `k${i}=${'x'.repeat(1500)}`);
  zone.set('big.example.com', 'TXT', big, 77);
  const dns = createDnsClient({ servers: [zone.server] });
  const answer = await dns.resolveTxt('big.example.com');
  t.deepEqual(answer.records.map((r) => r.join('')), big);
  t.is(answer.ttlSeconds, 77);
  t.is(zone.queryCount, 2, 'one truncated UDP answer, then one TCP query');
});

// ------------------------------------------------------------------ MX

test('MX: order as given, priorities kept, exchange lowercased without trailing dot', async (t) => {
  const zone = await zoneFor(t);
  zone.set('example.com', 'MX', [
    { exchange: 'MX2.Example.COM.', priority: 20 },
    { exchange: 'mx1.example.com', priority: 10 },
    { exchange: 'backup.example.net', priority: 20 },
  ]);
  const dns = createDnsClient({ servers: [zone.server] });
  t.deepEqual((await dns.resolveMx('example.com')).records, [
    { exchange: 'mx2.example.com', priority: 20 },
    { exchange: 'mx1.example.com', priority: 10 },
    { exchange: 'backup.example.net', priority: 20 },
  ]);
});

test('MX: a null MX (RFC 7505) comes back as an empty exchange', async (t) => {
  const zone = await zoneFor(t);
  zone.set('nomail.example.com', 'MX', [{ exchange: '.', priority: 0 }]);
  const dns = createDnsClient({ servers: [zone.server] });
  t.deepEqual((await dns.resolveMx('nomail.example.com')).records, [{ exchange: '', priority: 0 }]);
});

// ------------------------------------------------------------------ A / AAAA / CNAME

test('A and AAAA', async (t) => {
  const zone = await zoneFor(t);
  zone.set('host.example.com', 'A', ['192.0.2.1', '192.0.2.2']);
  zone.set('host.example.com', 'AAAA', ['2001:db8:0:0:0:0:0:1']);
  const dns = createDnsClient({ servers: [zone.server] });
  t.deepEqual((await dns.resolve4('host.example.com')).records, ['192.0.2.1', '192.0.2.2']);
  t.deepEqual((await dns.resolve6('host.example.com')).records, ['2001:db8::1']);
});

test('CNAME chains in the answer are followed and their TTLs count', async (t) => {
  const zone = await zoneFor(t);
  zone.set('www.example.com', 'CNAME', ['Edge.CDN.example.net.'], 60);
  zone.set('edge.cdn.example.net', 'CNAME', ['pop1.cdn.example.net'], 3600);
  zone.set('pop1.cdn.example.net', 'A', ['198.51.100.7'], 300);
  const dns = createDnsClient({ servers: [zone.server] });
  t.deepEqual(await dns.resolve4('www.example.com'), { records: ['198.51.100.7'], ttlSeconds: 60, authenticated: false, canonicalName: 'pop1.cdn.example.net' });
  t.deepEqual(await dns.resolveCname('www.example.com'), { records: ['edge.cdn.example.net'], ttlSeconds: 60, authenticated: false });
  await rejectsWith(t, dns.resolveCname('pop1.cdn.example.net'), 'NODATA', false);
});

test('CNAME to a missing name is NOTFOUND, to a name without that type NODATA', async (t) => {
  const zone = await zoneFor(t);
  zone.set('dangling.example.com', 'CNAME', ['gone.example.net']);
  zone.set('alias.example.com', 'CNAME', ['target.example.com']);
  zone.set('target.example.com', 'A', ['192.0.2.9']);
  const dns = createDnsClient({ servers: [zone.server] });
  await rejectsWith(t, dns.resolve4('dangling.example.com'), 'NOTFOUND', false);
  await rejectsWith(t, dns.resolveMx('alias.example.com'), 'NODATA', false);
});

// ------------------------------------------------------------------ negative answers and failures

test('NXDOMAIN is NOTFOUND and NOERROR without data is NODATA, both permanent', async (t) => {
  const zone = await zoneFor(t);
  zone.set('example.com', 'A', ['192.0.2.1']);
  zone.set('sel._domainkey.example.com', 'TXT', ['v=DKIM1; p=']);
  const dns = createDnsClient({ servers: [zone.server] });
  const missing = await rejectsWith(t, dns.resolveTxt('missing.example.com'), 'NOTFOUND', false);
  t.is(missing.hostname, 'missing.example.com');
  t.is(missing.rrtype, 'TXT');
  const nodata = await rejectsWith(t, dns.resolveMx('example.com'), 'NODATA', false);
  t.is(nodata.rrtype, 'MX');
  // An empty non-terminal exists (RFC 8020), so it must not look like NXDOMAIN.
  await rejectsWith(t, dns.resolveTxt('_domainkey.example.com'), 'NODATA', false);
});

test('SERVFAIL is temporary, is not hammered on the same server, and clears', async (t) => {
  const zone = await zoneFor(t);
  zone.set('flaky.example.com', 'TXT', ['ok']);
  zone.servfail('flaky.example.com');
  const dns = createDnsClient({ servers: [zone.server] });
  await rejectsWith(t, dns.resolveTxt('flaky.example.com'), 'SERVFAIL', true);
  t.is(zone.queryCount, 1);
  zone.clear('flaky.example.com');
  t.deepEqual((await dns.resolveTxt('flaky.example.com')).records, [['ok']]);
});

test('SERVFAIL reached through a CNAME is SERVFAIL too', async (t) => {
  const zone = await zoneFor(t);
  zone.set('alias.example.com', 'CNAME', ['broken.example.net']);
  zone.servfail('broken.example.net');
  const dns = createDnsClient({ servers: [zone.server] });
  await rejectsWith(t, dns.resolve4('alias.example.com'), 'SERVFAIL', true);
});

test('an unanswered query times out after timeoutMs per try', async (t) => {
  const zone = await zoneFor(t);
  zone.blackhole('slow.example.com');
  const dns = createDnsClient({ servers: [zone.server], timeoutMs: SHORT_TIMEOUT_MS, tries: 1 });
  const started = performance.now();
  const err = await rejectsWith(t, dns.resolveTxt('slow.example.com'), 'TIMEOUT', true);
  t.true(performance.now() - started >= SHORT_TIMEOUT_MS - 5);
  t.is(err.hostname, 'slow.example.com');
  t.is(zone.queryCount, 1);
});

test('tries counts attempts per server', async (t) => {
  const zone = await zoneFor(t);
  zone.blackhole('slow.example.com');
  const dns = createDnsClient({ servers: [zone.server], timeoutMs: SHORT_TIMEOUT_MS / 2, tries: 3 });
  await rejectsWith(t, dns.resolve4('slow.example.com'), 'TIMEOUT', true);
  t.is(zone.queryCount, 3);
});

test('a silent or failing server is skipped for the next one', async (t) => {
  const [bad, good] = await Promise.all([zoneFor(t), zoneFor(t)]);
  bad.blackhole('example.com');
  good.set('example.com', 'A', ['192.0.2.80']);
  const viaTimeout = createDnsClient({ servers: [bad.server, good.server], timeoutMs: SHORT_TIMEOUT_MS, tries: 1 });
  t.deepEqual((await viaTimeout.resolve4('example.com')).records, ['192.0.2.80']);

  bad.clear('example.com');
  bad.servfail('example.com');
  const viaServfail = createDnsClient({ servers: [bad.server, good.server] });
  t.deepEqual((await viaServfail.resolve4('example.com')).records, ['192.0.2.80']);
  t.is(bad.queryCount, 2);
  t.is(good.queryCount, 2);
});

test('a port with nothing listening fails fast as REFUSED and the next server is used', async (t) => {
  const zone = await zoneFor(t);
  zone.set('example.com', 'A', ['192.0.2.81']);
  const dead = `127.0.0.1:${await deadPort()}`;
  const dns = createDnsClient({ servers: [dead, zone.server], tries: 1 });
  t.deepEqual((await dns.resolve4('example.com')).records, ['192.0.2.81']);
  const onlyDead = createDnsClient({ servers: [dead], tries: 1 });
  await rejectsWith(t, onlyDead.resolve4('example.com'), 'REFUSED', true);
});

test('a server the socket cannot even connect to fails as a temporary error and the next server is used', async (t) => {
  // connect() to the broadcast address without SO_BROADCAST fails at once with EACCES, as an
  // unreachable network (ENETUNREACH: a laptop offline, an IPv6 resolver without a v6 route) does;
  // no datagram leaves the host.
  const zone = await zoneFor(t);
  zone.set('example.com', 'A', ['192.0.2.82']);
  const dns = createDnsClient({ servers: ['255.255.255.255', zone.server], tries: 1 });
  t.deepEqual((await dns.resolve4('example.com')).records, ['192.0.2.82']);
  const onlyUnreachable = createDnsClient({ servers: ['255.255.255.255'], tries: 1 });
  const err = await rejectsWith(t, onlyUnreachable.resolve4('example.com'), 'TIMEOUT', true);
  t.regex(err.message, /255\.255\.255\.255: EACCES/);
});

test('the REFUSED rcode is temporary', async (t) => {
  const raw = await rawServer(t, (q, send) => send(replyTo(q, { flags: dnsPacket.RECURSION_AVAILABLE | 5 })));
  const dns = createDnsClient({ servers: [raw.server] });
  await rejectsWith(t, dns.resolve4('example.com'), 'REFUSED', true);
  t.is(raw.queries.length, 1);
});

// ------------------------------------------------------------------ names, TTLs, wire hygiene

test('names: one trailing dot stripped, case ignored, invalid names rejected without a query', async (t) => {
  const zone = await zoneFor(t);
  zone.set('Mixed.Example.com', 'A', ['192.0.2.5']);
  const dns = createDnsClient({ servers: [zone.server] });
  t.deepEqual((await dns.resolve4('MIXED.example.COM.')).records, ['192.0.2.5']);
  t.is(zone.queryCount, 1);
  for (const bad of ['', '.', 'a..b.example', 'example.com..', `${'l'.repeat(64)}.example.com`, `${'abcdefghi.'.repeat(26)}com`]) {
    await rejectsWith(t, dns.resolve4(bad), 'FORMERR', false);
  }
  t.is(zone.queryCount, 1);
});

test('internationalised names are queried as A-labels', async (t) => {
  const zone = await zoneFor(t);
  zone.set('xn--bcher-kva.example', 'A', ['192.0.2.44']);
  const dns = createDnsClient({ servers: [zone.server] });
  t.deepEqual((await dns.resolve4('Bücher.example')).records, ['192.0.2.44']);
});

test('ttlSeconds is the minimum TTL of the records used', async (t) => {
  const raw = await rawServer(t, (q, send) =>
    send(
      replyTo(q, {
        answers: [
          { type: 'A', name: 'example.com', ttl: 900, data: '192.0.2.1' },
          { type: 'A', name: 'example.com', ttl: 45, data: '192.0.2.2' },
          // Not ours: must not pull the minimum down.
          { type: 'A', name: 'other.example.com', ttl: 1, data: '192.0.2.3' },
        ],
      }),
    ),
  );
  const dns = createDnsClient({ servers: [raw.server] });
  t.deepEqual(await dns.resolve4('example.com'), { records: ['192.0.2.1', '192.0.2.2'], ttlSeconds: 45, authenticated: false });
});

test('responses with the wrong id or question are ignored; the right one is taken', async (t) => {
  const raw = await rawServer(t, (q, send) => {
    const answer = (data: string) => [{ type: 'A' as const, name: 'example.com', ttl: 60, data }];
    send(replyTo(q, { id: (q.id! + 1) % 0x10000, answers: answer('203.0.113.1') }));
    send(replyTo(q, { questions: [{ type: 'A', name: 'evil.example' }], answers: answer('203.0.113.2') }));
    send(replyTo(q, { questions: [{ type: 'AAAA', name: 'example.com' }], answers: answer('203.0.113.3') }));
    send(Buffer.from('not dns at all'));
    send(replyTo(q, { answers: answer('192.0.2.10') }));
  });
  const dns = createDnsClient({ servers: [raw.server] });
  t.deepEqual((await dns.resolve4('example.com')).records, ['192.0.2.10']);
});

test('query ids are random', async (t) => {
  const raw = await rawServer(t, (q, send) => send(replyTo(q, { answers: [{ type: 'A', name: 'example.com', ttl: 60, data: '192.0.2.1' }] })));
  const dns = createDnsClient({ servers: [raw.server] });
  for (let i = 0; i < 8; i++) await dns.resolve4('example.com');
  t.true(new Set(raw.queries.map((q) => q.id)).size > 1);
});

test('a server that rejects EDNS with FORMERR is asked again in plain RFC 1035, and remembered', async (t) => {
  const raw = await rawServer(t, (q, send) => {
    if (q.additionals?.some((a) => a.type === 'OPT')) send(replyTo(q, { flags: dnsPacket.RECURSION_AVAILABLE | 1 }));
    else send(replyTo(q, { answers: [{ type: 'A', name: 'example.com', ttl: 60, data: '192.0.2.11' }] }));
  });
  const dns = createDnsClient({ servers: [raw.server] });
  t.deepEqual((await dns.resolve4('example.com')).records, ['192.0.2.11']);
  t.deepEqual((await dns.resolve4('example.com')).records, ['192.0.2.11']);
  t.is(raw.queries.length, 3);
});

test('a server that FORMERRs a plain query too gives FORMERR, temporary (a broken resolver says nothing about the name)', async (t) => {
  const raw = await rawServer(t, (q, send) => send(replyTo(q, { flags: dnsPacket.RECURSION_AVAILABLE | 1 })));
  const dns = createDnsClient({ servers: [raw.server] });
  await rejectsWith(t, dns.resolve4('example.com'), 'FORMERR', true);
  // One we raise for a name that can not be encoded stays permanent: no such name can exist.
  await rejectsWith(t, dns.resolve4(`${'a'.repeat(64)}.example.com`), 'FORMERR', false);
});

test('many concurrent queries do not get their answers mixed up', async (t) => {
  const zone = await zoneFor(t);
  const names = Array.from({ length: 50 }, (_, i) => `h${i}.example.com`);
  names.forEach((name, i) => zone.set(name, 'A', [`10.0.${Math.floor(i / 250)}.${i % 250}`]));
  const dns = createDnsClient({ servers: [zone.server] });
  const answers = await Promise.all(names.map((name) => dns.resolve4(name)));
  t.deepEqual(
    answers.map((a) => a.records[0]),
    names.map((_, i) => `10.0.${Math.floor(i / 250)}.${i % 250}`),
  );
});

// ------------------------------------------------------------------ server lists

test('parseDnsServers trims, drops empties and accepts the documented forms', (t) => {
  t.deepEqual(parseDnsServers(' 1.2.3.4 , ,1.2.3.4:5353,::1, [::1]:5353,[2001:db8::53],'), ['1.2.3.4', '1.2.3.4:5353', '::1', '[::1]:5353', '[2001:db8::53]']);
  t.deepEqual(parseDnsServers(''), []);
  t.deepEqual(parseDnsServers(' , '), []);
});

test('parseDnsServers names the bad entry', (t) => {
  for (const bad of ['dns.google', '1.2.3.4:0', '1.2.3.4:65536', '1.2.3.4:', '1.2.3', '[::1', '[1.2.3.4]:53', '[::1]:x', '1.2.3.4:53:53']) {
    const err = t.throws(() => parseDnsServers(`9.9.9.9, ${bad}`), { instanceOf: Error });
    t.true(err?.message.includes(`"${bad}"`), `${bad}: ${err?.message}`);
  }
});

test('createDnsClient validates servers and options; an empty list means the system servers', (t) => {
  t.throws(() => createDnsClient({ servers: ['localhost'] }), { message: /"localhost"/ });
  t.throws(() => createDnsClient({ servers: ['127.0.0.1'], timeoutMs: 0 }), { instanceOf: RangeError });
  t.throws(() => createDnsClient({ servers: ['127.0.0.1'], tries: 1.5 }), { instanceOf: RangeError });
  t.notThrows(() => createDnsClient({ servers: [] }));
});

// ------------------------------------------------------------------ node-style adapter

test('toNodeStyleResolver returns node:dns shapes', async (t) => {
  const zone = await zoneFor(t);
  zone.set('example.com', 'TXT', [['v=spf1 ', '-all'], 'hello']);
  zone.set('example.com', 'MX', [{ exchange: 'mx.example.com', priority: 5 }]);
  zone.set('example.com', 'A', ['192.0.2.1']);
  zone.set('example.com', 'AAAA', ['2001:db8::1']);
  zone.set('www.example.com', 'CNAME', ['example.com']);
  const resolve = toNodeStyleResolver(createDnsClient({ servers: [zone.server] }));
  t.deepEqual(await resolve('example.com', 'TXT'), [['v=spf1 ', '-all'], ['hello']]);
  t.deepEqual(await resolve('example.com', 'MX'), [{ exchange: 'mx.example.com', priority: 5 }]);
  t.deepEqual(await resolve('example.com', 'A'), ['192.0.2.1']);
  t.deepEqual(await resolve('example.com'), ['192.0.2.1'], 'rrtype defaults to A like dns.resolve');
  t.deepEqual(await resolve('example.com', 'aaaa'), ['2001:db8::1']);
  t.deepEqual(await resolve('www.example.com', 'CNAME'), ['example.com']);
});

test('toNodeStyleResolver uses node error codes', async (t) => {
  const zone = await zoneFor(t);
  zone.set('example.com', 'A', ['192.0.2.1']);
  zone.servfail('broken.example.com');
  zone.blackhole('slow.example.com');
  const resolve = toNodeStyleResolver(createDnsClient({ servers: [zone.server], timeoutMs: SHORT_TIMEOUT_MS, tries: 1 }));
  t.is(await nodeCode(resolve, 'missing.example.com', 'TXT'), 'ENOTFOUND');
  t.is(await nodeCode(resolve, 'example.com', 'MX'), 'ENODATA');
  t.is(await nodeCode(resolve, 'broken.example.com', 'A'), 'ESERVFAIL');
  t.is(await nodeCode(resolve, 'slow.example.com', 'TXT'), 'ETIMEOUT');
  t.is(await nodeCode(resolve, 'example.com', 'NS'), 'ENOTIMP');
  const err = await t.throwsAsync(resolve('missing.example.com', 'TXT'));
  t.like(err, { message: 'queryTxt ENOTFOUND missing.example.com', hostname: 'missing.example.com', syscall: 'queryTxt' });
  t.true(err?.cause instanceof DnsError);

  const refusing = await rawServer(t, (q, send) => send(replyTo(q, { flags: 5 })));
  t.is(await nodeCode(toNodeStyleResolver(createDnsClient({ servers: [refusing.server] })), 'example.com', 'A'), 'EREFUSED');
});

test('toNodeStyleResolver answers PTR through the client and ENOTIMP through a resolver without resolvePtr', async (t) => {
  const raw = await rawServer(t, (q, send) =>
    send(replyTo(q, { answers: [{ type: 'PTR', name: '1.2.0.192.in-addr.arpa', ttl: 60, data: 'Mail.Example.com' }] })),
  );
  const client = createDnsClient({ servers: [raw.server] });
  t.deepEqual(await toNodeStyleResolver(client)('1.2.0.192.in-addr.arpa', 'PTR'), ['mail.example.com']);
  const { resolvePtr: _omitted, ...withoutPtr } = client;
  t.is(await nodeCode(toNodeStyleResolver(withoutPtr), '1.2.0.192.in-addr.arpa', 'PTR'), 'ENOTIMP');
});

test('mailauth SPF evaluates through the adapter', async (t) => {
  const zone = await zoneFor(t);
  zone.set('example.com', 'TXT', ['v=spf1 include:_spf.example.net mx -all']);
  zone.set('_spf.example.net', 'TXT', ['v=spf1 ip4:198.51.100.0/24 ~all']);
  zone.set('example.com', 'MX', [{ exchange: 'mx.example.com', priority: 10 }]);
  zone.set('mx.example.com', 'A', ['192.0.2.25']);
  // mailauth's DNSResolver type promises string[][] | string[]; the adapter returns the right shape per rrtype.
  const resolver = toNodeStyleResolver(createDnsClient({ servers: [zone.server], timeoutMs: SHORT_TIMEOUT_MS, tries: 1 })) as DNSResolver;
  const check = (ip: string) => spf({ ip, sender: 'a@example.com', helo: 'client.example', mta: 'mx.posthorn.test', resolver });
  t.is((await check('198.51.100.9')).status.result, 'pass');
  t.is((await check('192.0.2.25')).status.result, 'pass');
  t.is((await check('203.0.113.1')).status.result, 'fail');
  zone.blackhole('_spf.example.net');
  t.is((await check('198.51.100.9')).status.result, 'temperror', 'ETIMEOUT inside an include');
  zone.clear('_spf.example.net');
  zone.servfail('example.com');
  t.is((await check('198.51.100.9')).status.result, 'temperror', 'ESERVFAIL on the record itself');
});

// ------------------------------------------------------------------ handles

test('queries leave no handles behind: a process that used the client exits by itself', async (t) => {
  const zone = await zoneFor(t);
  zone.set('example.com', 'TXT', ['x'.repeat(2000)]); // forces the TCP path
  zone.set('example.com', 'A', ['192.0.2.1']);
  zone.blackhole('slow.example.com');
  const clientUrl = new URL('../../src/lib/dns/dns-client.js', import.meta.url).href;
  const dead = `127.0.0.1:${await deadPort()}`;
  const script = `
    const { createDnsClient } = await import(${JSON.stringify(clientUrl)});
    const dns = createDnsClient({ servers: [${JSON.stringify(zone.server)}], timeoutMs: ${SHORT_TIMEOUT_MS}, tries: 1 });
    const dead = createDnsClient({ servers: [${JSON.stringify(dead)}], tries: 1 });
    const outcomes = await Promise.allSettled([
      dns.resolveTxt('example.com'), dns.resolve4('example.com'), dns.resolveMx('missing.example.com'),
      dns.resolve4('slow.example.com'), dead.resolve4('example.com'),
    ]);
    console.log(JSON.stringify(outcomes.map((o) => o.status === 'fulfilled' ? 'ok' : o.reason.code)));
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'], timeout: CHILD_EXIT_DEADLINE_MS });
  let stdout = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on('exit', (c, s) => resolve([c, s])));
  t.is(signal, null, 'killed at the deadline: something kept the event loop alive');
  t.is(code, 0);
  t.deepEqual(JSON.parse(stdout), ['ok', 'ok', 'NOTFOUND', 'TIMEOUT', 'REFUSED']);
});

test('DNSSEC: the AD bit of the resolver is reported on answers and denials; a denial carries its SOA negative TTL', async (t) => {
  const zone = await startDnsZone();
  t.teardown(() => zone.close());
  const dns = createDnsClient({ servers: [zone.server], timeoutMs: 500, tries: 1 });
  zone.set('signed.example', 'A', ['192.0.2.9']);
  zone.set('_25._tcp.mx.signed.example', 'TLSA', [{ usage: 3, selector: 1, matchingType: 1, data: 'ab'.repeat(32) }]);
  t.false((await dns.resolve4('signed.example')).authenticated);
  zone.sign('signed.example');
  t.true((await dns.resolve4('signed.example')).authenticated);
  const tlsa = await dns.resolveTlsa!('_25._tcp.mx.signed.example');
  t.true(tlsa.authenticated);
  t.deepEqual(tlsa.records, [{ usage: 3, selector: 1, matchingType: 1, data: Buffer.from('ab'.repeat(32), 'hex') }]);
  zone.setNegativeTtl(42);
  const nx = await t.throwsAsync(dns.resolveTlsa!('_25._tcp.none.signed.example'), { instanceOf: DnsError });
  t.like(nx, { code: 'NOTFOUND', authenticated: true, negativeTtlSeconds: 42 });
  const nodata = await t.throwsAsync(dns.resolveTxt('signed.example'), { instanceOf: DnsError });
  t.like(nodata, { code: 'NODATA', authenticated: true, negativeTtlSeconds: 42 });
  zone.sign('signed.example', false);
  t.like(await t.throwsAsync(dns.resolveTxt('signed.example')), { authenticated: false });
});

test("DNSSEC: the AD bit is trusted only from a resolver on this host's loopback, unless dns.trustAd says always (glibc's trust-ad)", (t) => {
  // A resolver across a network (the system's, a provider's) answers through a path anyone on it
  // can forge: an AD bit from there would let forged TLSA records make DANE win over MTA-STS.
  for (const server of ['127.0.0.1', '127.0.0.53:53', '::1', '[::1]:5353']) t.true(adTrusted(server, 'loopback'), server);
  for (const server of ['192.0.2.53', '10.0.0.2:53', '8.8.8.8', '[2001:db8::53]:53']) t.false(adTrusted(server, 'loopback'), server);
  t.true(adTrusted('10.0.0.2:53', 'always'));
});
