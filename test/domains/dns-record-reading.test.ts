import test from 'ava';
import { createDnsClient } from '../../src/lib/dns/dns-client.js';
import { checkCname, checkDmarc, checkSpf } from '../../src/core/domains/domain-verifier.js';
import type { DomainRecord } from '../../src/store/repositories/domains-repository.js';
import { startDnsZone, type DnsZone } from '../helpers/dns-zone.js';
import { TEST_DNS_TIMEOUT_MS } from '../helpers/test-app.js';

// How the verifier reads records the way the mail world would: an answer that receivers read as
// not authorising this server must not be SUCCESS, and one that does reach it must not be FAILED.

const HOST = 'mx.posthorn.test'; // no A/AAAA: SPF is read by name
const V4 = 'v4.posthorn.test'; // 203.0.113.10
const DUAL = 'dual.posthorn.test'; // 203.0.113.10 and 2001:db8::10
let zone: DnsZone;
let resolver: ReturnType<typeof createDnsClient>;
test.before(async () => {
  zone = await startDnsZone();
  resolver = createDnsClient({ servers: [zone.server], timeoutMs: TEST_DNS_TIMEOUT_MS, tries: 2 });
  zone.set(V4, 'A', ['203.0.113.10']);
  zone.set(DUAL, 'A', ['203.0.113.10']);
  zone.set(DUAL, 'AAAA', ['2001:db8::10']);
});
test.after.always(async () => {
  await zone?.close();
});

const domain = (name: string, subdomain: string | null = null) => ({ name, subdomain, bounceLabel: 'bounces', dkimSelector: 'posthorn' }) as DomainRecord;

test('SPF: mechanisms after "all" are never evaluated (RFC 7208 5.1), so ours there authorises nothing', async (t) => {
  const cases: [string, string, boolean][] = [
    ['after-softfail.example', 'v=spf1 include:_spf.example.net ~all a:mx.posthorn.test', false],
    ['after-fail.example', 'v=spf1 -all a:mx.posthorn.test', false],
    ['after-plus-all.example', 'v=spf1 +all a:mx.posthorn.test', true], // +all authorises everyone, us too
    ['before-all.example', 'v=spf1 a:mx.posthorn.test ~all', true],
    ['mx-cidr.example', 'v=spf1 mx/24 -all', true],
    ['mx-after-all.example', 'v=spf1 ?all mx', false],
  ];
  for (const [name, spf, authorises] of cases) {
    zone.set(`bounces.${name}`, 'TXT', [spf]);
    const check = await checkSpf(resolver, domain(name), HOST);
    t.is(check.status, authorises ? 'SUCCESS' : 'FAILED', `${spf}: ${check.problem}`);
  }
  // The reason says what to change.
  t.regex((await checkSpf(resolver, domain('after-softfail.example'), HOST)).problem!, /add a:mx\.posthorn\.test before its "~all"/);
});
test('CNAME: a chain that ends at the server reaches it; one that ends elsewhere does not', async (t) => {
  zone.set('t.chain.example', 'CNAME', ['alias.chain.example.']);
  zone.set('alias.chain.example', 'CNAME', ['Edge.Chain.Example']);
  zone.set('edge.chain.example', 'CNAME', ['MX.POSTHORN.TEST.']);
  t.is((await checkCname(resolver, 't.chain.example', HOST)).status, 'SUCCESS');

  zone.set('u.chain.example', 'CNAME', ['other.chain.example']);
  zone.set('other.chain.example', 'CNAME', ['elsewhere.example.net']);
  const off = await checkCname(resolver, 'u.chain.example', HOST);
  t.is(off.status, 'FAILED');

  // A loop is read as not pointing at the server, not as a crash.
  zone.set('l1.chain.example', 'CNAME', ['l2.chain.example']);
  zone.set('l2.chain.example', 'CNAME', ['l1.chain.example']);
  t.is((await checkCname(resolver, 'l1.chain.example', HOST)).status, 'FAILED');
  // So is a chain that ends at the root.
  zone.set('r.chain.example', 'CNAME', ['root.chain.example']);
  zone.set('root.chain.example', 'CNAME', ['.']);
  t.is((await checkCname(resolver, 'r.chain.example', HOST)).status, 'FAILED');
});

// SPF judged as a receiver would for mail from this server: the record is evaluated (RFC 7208)
// for every address of the configured hostname. HOST above has no A/AAAA (the name-only fallback).
const spfAt = async (name: string, record: string, hostname: string) => {
  zone.set(`bounces.${name}`, 'TXT', [record]);
  return checkSpf(resolver, domain(name), hostname);
};

test('SPF: ip4/ip6 that cover the server pass, ones that do not fail naming the address', async (t) => {
  t.is((await spfAt('ip4-host.example', 'v=spf1 ip4:203.0.113.10 -all', V4)).status, 'SUCCESS');
  t.is((await spfAt('ip4-cidr.example', 'v=spf1 ip4:203.0.113.0/24 -all', V4)).status, 'SUCCESS');
  const off = await spfAt('ip4-off.example', 'v=spf1 ip4:198.51.100.7 -all', V4);
  t.is(off.status, 'FAILED');
  t.regex(off.problem!, /203\.0\.113\.10/);
  t.regex(off.problem!, /\bfail\b/);
  // Every address the server may send from must pass: an IPv4-only record leaves its IPv6 out.
  const v6Missing = await spfAt('ip4-only.example', 'v=spf1 ip4:203.0.113.10 -all', DUAL);
  t.is(v6Missing.status, 'FAILED');
  t.regex(v6Missing.problem!, /2001:db8::10/);
  t.notRegex(v6Missing.problem!, /203\.0\.113\.10 /);
  t.is((await spfAt('dual-ok.example', 'v=spf1 ip4:203.0.113.10 ip6:2001:db8::/32 -all', DUAL)).status, 'SUCCESS');
});

test('SPF: include: chains and redirect= to a domain that lists the server pass', async (t) => {
  zone.set('_spf.provider.example', 'TXT', ['v=spf1 include:_v4.provider.example ~all']);
  zone.set('_v4.provider.example', 'TXT', ['v=spf1 ip4:203.0.113.0/28 -all']);
  t.is((await spfAt('inc.example', 'v=spf1 include:_spf.provider.example -all', V4)).status, 'SUCCESS');
  t.is((await spfAt('redir.example', 'v=spf1 redirect=_spf.provider.example', V4)).status, 'SUCCESS');
  // An include that does not list the server falls through to the record's own all.
  zone.set('_spf.other.example', 'TXT', ['v=spf1 ip4:198.51.100.0/24 -all']);
  const other = await spfAt('inc-other.example', 'v=spf1 include:_spf.other.example ~all', V4);
  t.is(other.status, 'FAILED');
  t.regex(other.problem!, /softfail/);
  t.regex(other.problem!, /add a:v4\.posthorn\.test before its "~all"/);
});

test('SPF: the name-based cases read the same when evaluated', async (t) => {
  t.is((await spfAt('eval-before-all.example', 'v=spf1 a:v4.posthorn.test ~all', V4)).status, 'SUCCESS');
  t.is((await spfAt('eval-plus-all.example', 'v=spf1 +all', V4)).status, 'SUCCESS');
  const after = await spfAt('eval-after-all.example', 'v=spf1 ~all a:v4.posthorn.test', V4);
  t.is(after.status, 'FAILED');
  t.regex(after.problem!, /add a:v4\.posthorn\.test before its "~all": nothing after it is evaluated/);
  zone.set('bounces.eval-mx.example', 'MX', [{ exchange: 'v4.posthorn.test', priority: 10 }]);
  t.is((await spfAt('eval-mx.example', 'v=spf1 mx/24 -all', V4)).status, 'SUCCESS');
  // Without an A/AAAA for the hostname the record is read by name, and the reason says so.
  const byName = await spfAt('by-name.example', 'v=spf1 ip4:203.0.113.10 -all', HOST);
  t.is(byName.status, 'FAILED');
  t.regex(byName.problem!, /no A\/AAAA/);
});

test('SPF: include loops and more than 10 DNS lookups fail cleanly; a DNS failure is temporary', async (t) => {
  zone.set('loop-a.example', 'TXT', ['v=spf1 include:loop-b.example -all']);
  zone.set('loop-b.example', 'TXT', ['v=spf1 include:loop-a.example -all']);
  const loop = await spfAt('loop.example', 'v=spf1 include:loop-a.example -all', V4);
  t.is(loop.status, 'FAILED');
  t.regex(loop.problem!, /permerror/);
  zone.set('self.example', 'TXT', ['v=spf1 redirect=self.example']);
  t.is((await spfAt('self-redirect.example', 'v=spf1 redirect=self.example', V4)).status, 'FAILED');
  // Eleven includes deep, the last listing the server: receivers stop at ten (RFC 7208 4.6.4).
  for (let i = 1; i <= 11; i++) zone.set(`n${i}.deep.example`, 'TXT', [i === 11 ? 'v=spf1 ip4:203.0.113.10 -all' : `v=spf1 include:n${i + 1}.deep.example -all`]);
  const deep = await spfAt('deep.example', 'v=spf1 include:n1.deep.example -all', V4);
  t.is(deep.status, 'FAILED');
  t.regex(deep.problem!, /too many DNS/i);
  // Ten deep is still within the limit.
  t.is((await spfAt('ten.example', 'v=spf1 include:n2.deep.example -all', V4)).status, 'SUCCESS');

  zone.set('_spf.flaky.example', 'TXT', ['v=spf1 ip4:203.0.113.10 -all']);
  zone.servfail('_spf.flaky.example');
  t.is((await spfAt('flaky.example', 'v=spf1 include:_spf.flaky.example -all', V4)).status, 'TEMPORARY_FAILURE');
  zone.clear('_spf.flaky.example');
});

test('DMARC: a subdomain is covered by its organisational domain\'s record (RFC 7489 6.6.3); two records are no policy', async (t) => {
  zone.set('_dmarc.org-policy.example', 'TXT', ['v=DMARC1; p=quarantine; sp=none']);
  t.is((await checkDmarc(resolver, domain('news.org-policy.example', 'news'))).status, 'SUCCESS');
  t.is((await checkDmarc(resolver, domain('a.b.org-policy.example', 'a.b'))).status, 'SUCCESS');
  // Its own record wins, and without either the subdomain is still asked to publish one.
  t.is((await checkDmarc(resolver, domain('news.no-policy.example', 'news'))).status, 'PENDING');
  t.regex((await checkDmarc(resolver, domain('news.no-policy.example', 'news'))).problem!, /_dmarc\.news\.no-policy\.example/);
  // An organisational domain only looks at its own name (no parent of example.com to fall back on).
  t.is((await checkDmarc(resolver, domain('no-policy.example'))).status, 'PENDING');

  // Receivers apply no policy when there are two v=DMARC1 records: that is a fault to fix, not a success.
  zone.set('_dmarc.twice.example', 'TXT', ['v=DMARC1; p=none', 'v=DMARC1; p=reject']);
  const twice = await checkDmarc(resolver, domain('twice.example'));
  t.is(twice.status, 'FAILED');
  t.regex(twice.problem!, /more than one/);
  // A subdomain with two records of its own does not fall back on its organisational domain's.
  zone.set('_dmarc.news.org-policy.example', 'TXT', ['v=DMARC1; p=none', 'v=DMARC1; p=none']);
  t.is((await checkDmarc(resolver, domain('news.org-policy.example', 'news'))).status, 'FAILED');
});
