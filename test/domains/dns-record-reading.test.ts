import test from 'ava';
import { createDnsClient } from '../../src/lib/dns/dns-client.js';
import { checkCname, checkSpf } from '../../src/core/domains/domain-verifier.js';
import type { DomainRecord } from '../../src/store/repositories/domains-repository.js';
import { startDnsZone, type DnsZone } from '../helpers/dns-zone.js';
import { TEST_DNS_TIMEOUT_MS } from '../helpers/test-app.js';

// How the verifier reads records the way the mail world would: an answer that receivers read as
// not authorising this server must not be SUCCESS, and one that does reach it must not be FAILED.

const HOST = 'mx.posthorn.test';
let zone: DnsZone;
let resolver: ReturnType<typeof createDnsClient>;
test.before(async () => {
  zone = await startDnsZone();
  resolver = createDnsClient({ servers: [zone.server], timeoutMs: TEST_DNS_TIMEOUT_MS, tries: 2 });
});
test.after.always(async () => {
  await zone?.close();
});

const domain = (name: string) => ({ name, bounceLabel: 'bounces', dkimSelector: 'posthorn' }) as DomainRecord;

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
