/**
 * MTA-STS policy discovery (RFC 8461 §3.3, §5.1) against a real HTTPS server with a test CA:
 * what is fetched when, what is kept through failures, how failures are classified for TLS
 * reporting, and what is cached.
 */
import test from 'ava';
import type { StoredStsPolicy } from '../../../src/core/tls-reports/sts-policy-cache.js';
import { ManualClock } from '../../../src/lib/clock.js';
import { createDnsClient } from '../../../src/lib/dns/dns-client.js';
import { createLogger } from '../../../src/lib/logger.js';
import { httpsCaList } from '../../../src/smtp/outbound/https-client.js';
import { createMtaStsResolver } from '../../../src/smtp/outbound/mta-sts-resolver.js';
import { startDnsZone, type DnsZone } from '../../helpers/dns-zone.js';
import { startPolicyServer, stsPolicyText, type PolicyServer } from '../../helpers/policy-server.js';
import { createTestCa, selfSignedLeaf, type TestCa } from '../../helpers/test-ca.js';
import { until } from '../../helpers/until.js';

const DOMAINS = ['a.test', 'b.test', 'c.test', 'd.test', 'e.test', 'f.test', 'g.test', 'h.test', 'i.test', 'j.test', 'k.test', 'l.test', 'm.test', 'n.test'];
let zone: DnsZone;
let ca: TestCa;
let server: PolicyServer;

test.before(async () => {
  zone = await startDnsZone();
  ca = await createTestCa();
  server = await startPolicyServer(await ca.issue({ hostnames: DOMAINS.map((d) => `mta-sts.${d}`) }));
  for (const d of DOMAINS) zone.set(`mta-sts.${d}`, 'A', ['127.0.0.1']);
});
test.after.always(async () => {
  await server?.close();
  await zone?.close();
});

function resolverFor(opts: { clock?: ManualClock; store?: Map<string, StoredStsPolicy>; port?: number; trusted?: boolean; allowPrivate?: boolean } = {}) {
  const clock = opts.clock ?? new ManualClock();
  const store = opts.store ?? new Map<string, StoredStsPolicy>();
  const sts = createMtaStsResolver({
    resolver: createDnsClient({ servers: [zone.server], timeoutMs: 500, tries: 1 }),
    clock,
    logger: createLogger('silent'),
    store: { get: async (d) => store.get(d), put: async (p) => void store.set(p.domain, p) },
    httpsPort: opts.port ?? server.port,
    ...(opts.trusted === false ? {} : { ca: httpsCaList(ca.pem) }),
    fetchTimeoutMs: 2000,
    // The policy server listens on loopback; the refusal itself has its own test.
    allowPrivate: opts.allowPrivate ?? true,
  });
  return { sts, clock, store };
}

const fetchesOf = (domain: string) => server.fetches.filter((h) => h === `mta-sts.${domain}`).length;

test.serial('a valid policy is fetched once, kept for max_age in memory and in the store', async (t) => {
  zone.set('_mta-sts.a.test', 'TXT', ['v=STSv1; id=1;'], 60);
  server.setPolicy('a.test', stsPolicyText('enforce', ['mx.a.test', '*.mail.a.test'], 3600));
  const { sts, clock, store } = resolverFor();
  const first = await sts.lookup('A.test.');
  t.is(first.problem, undefined);
  t.like(first.policy, { mode: 'enforce', mx: ['mx.a.test', '*.mail.a.test'], maxAgeSeconds: 3600, id: '1' });
  t.is(store.get('a.test')?.policyId, '1');
  await sts.lookup('a.test');
  clock.advance(61_000); // the TXT record expired: looked up again, same id, no fetch
  await sts.lookup('a.test');
  t.is(fetchesOf('a.test'), 1);
  t.is(zone.queriesFor('_mta-sts.a.test', 'TXT'), 2);
  // A new id means a new policy.
  zone.set('_mta-sts.a.test', 'TXT', ['v=STSv1; id=2;'], 60);
  server.setPolicy('a.test', stsPolicyText('testing', ['mx.a.test'], 3600));
  clock.advance(61_000);
  t.like((await sts.lookup('a.test')).policy, { mode: 'testing', id: '2' });
  t.is(fetchesOf('a.test'), 2);
});

test.serial('a domain without the TXT record costs one query per negative TTL, and no fetch', async (t) => {
  const { sts, clock } = resolverFor();
  for (let i = 0; i < 5; i++) t.deepEqual(await sts.lookup('nothing.test'), {});
  t.is(zone.queriesFor('_mta-sts.nothing.test', 'TXT'), 1);
  clock.advance(301_000);
  await sts.lookup('nothing.test');
  t.is(zone.queriesFor('_mta-sts.nothing.test', 'TXT'), 2);
});

test.serial("a denial's SOA negative TTL is respected (RFC 2308)", async (t) => {
  zone.setNegativeTtl(30);
  t.teardown(() => zone.setNegativeTtl(300));
  const { sts, clock } = resolverFor();
  await sts.lookup('short.test');
  clock.advance(29_000);
  await sts.lookup('short.test');
  t.is(zone.queriesFor('_mta-sts.short.test', 'TXT'), 1);
  clock.advance(2_000);
  await sts.lookup('short.test');
  t.is(zone.queriesFor('_mta-sts.short.test', 'TXT'), 2);
});

test.serial('a failed fetch keeps the last good policy, reports the failure, and is not retried at once', async (t) => {
  zone.set('_mta-sts.b.test', 'TXT', ['v=STSv1; id=1;'], 10);
  server.setPolicy('b.test', stsPolicyText('enforce', ['mx.b.test']));
  const store = new Map<string, StoredStsPolicy>();
  const { sts, clock } = resolverFor({ store });
  t.is((await sts.lookup('b.test')).policy?.mode, 'enforce');
  zone.set('_mta-sts.b.test', 'TXT', ['v=STSv1; id=2;'], 10);
  server.setPolicy('b.test', { status: 500, body: 'down' });
  clock.advance(11_000);
  const during = await sts.lookup('b.test');
  t.like(during.policy, { mode: 'enforce', id: '1' }, 'the cached policy is still in force');
  t.is(during.problem?.result, 'sts-policy-fetch-error');
  await sts.lookup('b.test');
  t.is(fetchesOf('b.test'), 2, 'no second fetch within the retry delay');
  // A new process (a restart) finds the policy in the store.
  const again = resolverFor({ store, clock });
  t.like((await again.sts.lookup('b.test')).policy, { mode: 'enforce', id: '1' });
  // Once it expires, a failing fetch leaves no policy, only the problem.
  clock.advance(86_400_000 + 1);
  const fresh = resolverFor({ store, clock });
  const expired = await fresh.sts.lookup('b.test');
  t.is(expired.policy, undefined);
  t.is(expired.problem?.result, 'sts-policy-fetch-error');
});

test.serial('a policy fetched a day ago is fetched again before it expires, so a failing fetch at its expiry does not drop it (RFC 8461 §3.3)', async (t) => {
  const DAY = 86_400_000;
  zone.set('_mta-sts.j.test', 'TXT', ['v=STSv1; id=1;'], 60);
  server.setPolicy('j.test', stsPolicyText('enforce', ['mx.j.test'], 3 * 86_400));
  const { sts, clock, store } = resolverFor();
  await sts.lookup('j.test');
  t.is(fetchesOf('j.test'), 1);
  clock.advance(DAY + 1000);
  // The cached policy answers at once; the refresh goes on behind it.
  t.like((await sts.lookup('j.test')).policy, { mode: 'enforce', id: '1' });
  await until(() => store.get('j.test')?.fetchedAtMs === clock.nowMs());
  t.is(fetchesOf('j.test'), 2);
  t.is(store.get('j.test')?.expiresAtMs, clock.nowMs() + 3 * DAY, 'max_age counts from the refresh');
  // Past the first fetch's expiry the policy host fails: the refreshed policy is still in force.
  server.setPolicy('j.test', { status: 500, body: 'down' });
  clock.advance(2 * DAY);
  const later = await sts.lookup('j.test');
  t.like(later.policy, { mode: 'enforce', id: '1' });
  t.is(later.problem, undefined);
});

test.serial('a policy of max_age one day (as gmail.com publishes) is refreshed before it expires too, so a failing fetch at its expiry does not drop it', async (t) => {
  const HOUR = 3_600_000;
  zone.set('_mta-sts.k.test', 'TXT', ['v=STSv1; id=1;'], 60);
  server.setPolicy('k.test', stsPolicyText('enforce', ['mx.k.test'], 86_400));
  const { sts, clock, store } = resolverFor();
  await sts.lookup('k.test');
  t.is(fetchesOf('k.test'), 1);
  clock.advance(13 * HOUR);
  t.like((await sts.lookup('k.test')).policy, { mode: 'enforce', id: '1' });
  // The refresh goes on behind the answer: looked for, a few seconds at most.
  for (let i = 0; i < 300 && store.get('k.test')?.fetchedAtMs !== clock.nowMs(); i++) await new Promise((r) => setTimeout(r, 10));
  t.is(fetchesOf('k.test'), 2, 'refreshed while in force');
  // Past the first fetch's expiry the policy host fails: the refreshed policy is still in force.
  server.setPolicy('k.test', { status: 500, body: 'down' });
  clock.advance(12 * HOUR);
  const later = await sts.lookup('k.test');
  t.like(later.policy, { mode: 'enforce', id: '1' });
});

test.serial('a policy of max_age 0 is fetched once for all the deliveries of the next minute, not once per message', async (t) => {
  zone.set('_mta-sts.m.test', 'TXT', ['v=STSv1; id=1;'], 3600);
  server.setPolicy('m.test', stsPolicyText('enforce', ['mx.m.test'], 0));
  const { sts, clock } = resolverFor();
  // A burst at once shares the one fetch, and so do the deliveries after it within the floor.
  const burst = await Promise.all(Array.from({ length: 20 }, () => sts.lookup('m.test')));
  for (const r of burst) t.like(r.policy, { mode: 'enforce', maxAgeSeconds: 0 });
  for (let i = 0; i < 20; i++) {
    clock.advance(2_000);
    t.like((await sts.lookup('m.test')).policy, { mode: 'enforce', id: '1' });
  }
  t.is(fetchesOf('m.test'), 1);
  // Past the floor the policy is fetched again, once.
  clock.advance(21_000);
  await Promise.all(Array.from({ length: 5 }, () => sts.lookup('m.test')));
  t.is(fetchesOf('m.test'), 2);
});

test.serial('a policy of a small max_age is not refreshed more than once a minute either', async (t) => {
  zone.set('_mta-sts.n.test', 'TXT', ['v=STSv1; id=1;'], 3600);
  server.setPolicy('n.test', stsPolicyText('enforce', ['mx.n.test'], 4));
  const { sts, clock, store } = resolverFor();
  await sts.lookup('n.test');
  for (let i = 0; i < 29; i++) {
    clock.advance(2_000); // past half its max_age and past max_age: still the one fetch
    t.like((await sts.lookup('n.test')).policy, { mode: 'enforce', id: '1' });
  }
  t.is(fetchesOf('n.test'), 1);
  clock.advance(2_000);
  await sts.lookup('n.test');
  await until(() => store.get('n.test')?.fetchedAtMs === clock.nowMs());
  t.is(fetchesOf('n.test'), 2);
});

test.serial('redirects are not followed, the media type must be text/plain, the syntax must be right', async (t) => {
  const { sts } = resolverFor();
  zone.set('_mta-sts.c.test', 'TXT', ['v=STSv1; id=1;']);
  server.setPolicy('c.test', { status: 301, location: 'https://mta-sts.d.test/.well-known/mta-sts.txt', body: '' });
  t.deepEqual(await sts.lookup('c.test'), { problem: { result: 'sts-policy-fetch-error', detail: `https://mta-sts.c.test:${server.port}/.well-known/mta-sts.txt answered HTTP 301` } });
  t.is(fetchesOf('d.test'), 0);

  zone.set('_mta-sts.d.test', 'TXT', ['v=STSv1; id=1;']);
  server.setPolicy('d.test', { contentType: 'text/html', body: stsPolicyText('enforce', ['mx.d.test']) });
  t.is((await sts.lookup('d.test')).problem?.result, 'sts-policy-invalid');

  zone.set('_mta-sts.e.test', 'TXT', ['v=STSv1; id=1;']);
  server.setPolicy('e.test', 'version: STSv1\nmode: enforce\nmax_age: 60\n');
  const invalid = await sts.lookup('e.test');
  t.is(invalid.problem?.result, 'sts-policy-invalid');
  t.regex(invalid.problem?.detail ?? '', /mx: at least one/);

  zone.set('_mta-sts.f.test', 'TXT', ['v=STSv1; id=1;']);
  server.setPolicy('f.test', { body: `version: STSv1\nmode: enforce\nmx: a.f.test\nmax_age: 60\n${'x: y\n'.repeat(20_000)}` });
  t.regex((await sts.lookup('f.test')).problem?.detail ?? '', /larger than/);
});

test.serial('a policy host whose certificate we cannot validate is sts-webpki-invalid', async (t) => {
  zone.set('_mta-sts.g.test', 'TXT', ['v=STSv1; id=1;']);
  server.setPolicy('g.test', stsPolicyText('enforce', ['mx.g.test']));
  // Without the test CA the server's certificate is not trusted.
  const { sts } = resolverFor({ trusted: false });
  t.is((await sts.lookup('g.test')).problem?.result, 'sts-webpki-invalid');
  // A server with a self-signed certificate for the name: the same.
  const rogue = await startPolicyServer(await selfSignedLeaf(['mta-sts.h.test']));
  t.teardown(() => rogue.close());
  zone.set('_mta-sts.h.test', 'TXT', ['v=STSv1; id=1;']);
  rogue.setPolicy('h.test', stsPolicyText('enforce', ['mx.h.test']));
  const viaRogue = resolverFor({ port: rogue.port });
  t.is((await viaRogue.sts.lookup('h.test')).problem?.result, 'sts-webpki-invalid');
  t.is(rogue.fetches.length, 0, 'nothing was asked over an unvalidated connection');
});

test.serial('a policy host on a private address is not fetched (SSRF): a failed fetch, and no connection', async (t) => {
  // Whoever controls the recipient domain controls mta-sts.<domain>: pointed at loopback (or the
  // LAN, or 169.254.169.254) it must not make us open connections there.
  zone.set('_mta-sts.i.test', 'TXT', ['v=STSv1; id=1;']);
  server.setPolicy('i.test', stsPolicyText('enforce', ['mx.i.test']));
  const before = server.connectionCount();
  const { sts } = resolverFor({ allowPrivate: false });
  const res = await sts.lookup('i.test');
  t.is(res.policy, undefined);
  t.is(res.problem?.result, 'sts-policy-fetch-error');
  t.regex(res.problem?.detail ?? '', /mta-sts\.i\.test resolves to 127\.0\.0\.1.*loopback/);
  t.is(server.connectionCount(), before, 'the policy server saw no connection');
  t.is(fetchesOf('i.test'), 0);
  // With the switch on (as for a policy host on the local network) the same policy is fetched.
  const allowed = resolverFor({ allowPrivate: true });
  t.like((await allowed.sts.lookup('i.test')).policy, { mode: 'enforce', mx: ['mx.i.test'] });
});

test.serial('a policy whose extension field holds NUL is used, and stored with U+FFFD in its place, as both stores keep text', async (t) => {
  // RFC 8461 3.2 lets a policy carry fields it does not define; PostgreSQL cannot store a NUL.
  zone.set('_mta-sts.l.test', 'TXT', ['v=STSv1; id=1;']);
  server.setPolicy('l.test', `${stsPolicyText('enforce', ['mx.l.test'])}x-note: a\0b\r\n`);
  const { sts, store, clock } = resolverFor();
  t.like((await sts.lookup('l.test')).policy, { mode: 'enforce', mx: ['mx.l.test'] });
  const body = store.get('l.test')?.body ?? '';
  t.false(body.includes('\0'), JSON.stringify(body));
  t.regex(body, /x-note: a\uFFFDb/);
  // A restart reads the stored policy back.
  t.like((await resolverFor({ store, clock }).sts.lookup('l.test')).policy, { mode: 'enforce', mx: ['mx.l.test'] });
});
