/**
 * DANE for SMTP (RFC 7672): matching a presented chain against TLSA records (§3), and what a
 * TLSA lookup means depending on the AD bit of the resolver (§2.2), through the test zone.
 */
import { X509Certificate } from 'node:crypto';
import test from 'ava';
import { ManualClock } from '../../../src/lib/clock.js';
import { createDnsClient, type TlsaRecord } from '../../../src/lib/dns/dns-client.js';
import { createTlsaLookup, isUsableTlsa, matchChain, tlsaPresentation } from '../../../src/smtp/outbound/dane-verifier.js';
import { startDnsZone, type DnsZone } from '../../helpers/dns-zone.js';
import { createTestCa, selfSignedLeaf, tlsaData, type TestCa } from '../../helpers/test-ca.js';

let ca: TestCa;
let good: { cert: string; leafPem: string };
let wrongName: { cert: string; leafPem: string };
let expired: { cert: string; leafPem: string };
let zone: DnsZone;

test.before(async () => {
  ca = await createTestCa();
  good = await ca.issue({ hostnames: ['mx.dane.test'] });
  wrongName = await ca.issue({ hostnames: ['other.dane.test'] });
  const now = Date.now();
  expired = await ca.issue({ hostnames: ['mx.dane.test'], notBefore: new Date(now - 10 * 86_400_000), notAfter: new Date(now - 86_400_000) });
  zone = await startDnsZone();
});
test.after.always(async () => {
  await zone?.close();
});

const chainOf = (pem: string) =>
  pem
    .split(/(?=-----BEGIN CERTIFICATE-----)/)
    .filter((p) => p.includes('BEGIN'))
    .map((p) => new X509Certificate(p));
const record = (usage: number, selector: 0 | 1, matchingType: 0 | 1 | 2, pem: string): TlsaRecord => ({ usage, selector, matchingType, data: Buffer.from(tlsaData(pem, selector, matchingType), 'hex') });
const NAMES = ['mx.dane.test', 'dane.test'];

test('DANE-EE matches the leaf by certificate or key, by any matching type, whatever its name or dates', async (t) => {
  const self = await selfSignedLeaf(['anything.test']);
  for (const selector of [0, 1] as const) {
    for (const mt of [0, 1, 2] as const) {
      t.deepEqual(matchChain([record(3, selector, mt, self.leafPem)], chainOf(self.cert), NAMES, Date.now()), { ok: true, usage: 3 }, `3 ${selector} ${mt}`);
    }
  }
  t.deepEqual(matchChain([record(3, 1, 1, expired.leafPem)], chainOf(expired.cert), NAMES, Date.now()), { ok: true, usage: 3 }, 'DANE-EE ignores the validity period');
});

test('DANE-EE of another key does not match: certificate-not-trusted', (t) => {
  const m = matchChain([record(3, 1, 1, wrongName.leafPem)], chainOf(good.cert), NAMES, Date.now());
  t.like(m, { ok: false, result: 'certificate-not-trusted', reasonCode: 'tlsa-mismatch' });
});

test('DANE-TA: the CA in the chain anchors a leaf valid for the MX name (or the next-hop domain)', (t) => {
  const ta = [record(2, 0, 1, ca.pem)];
  t.deepEqual(matchChain(ta, chainOf(good.cert), NAMES, Date.now()), { ok: true, usage: 2 });
  t.deepEqual(matchChain([record(2, 1, 2, ca.pem)], chainOf(good.cert), NAMES, Date.now()), { ok: true, usage: 2 }, 'by its public key');
  t.like(matchChain(ta, chainOf(wrongName.cert), NAMES, Date.now()), { ok: false, result: 'certificate-host-mismatch' });
  t.deepEqual(matchChain(ta, chainOf(wrongName.cert), ['other.dane.test'], Date.now()), { ok: true, usage: 2 });
  t.like(matchChain(ta, chainOf(expired.cert), NAMES, Date.now()), { ok: false, result: 'certificate-expired' });
});

test('DANE-TA: a leaf the anchor did not sign, or a chain without the anchor, does not match', async (t) => {
  const other = await createTestCa('Another CA');
  const foreign = await other.issue({ hostnames: ['mx.dane.test'] });
  t.like(matchChain([record(2, 0, 1, ca.pem)], chainOf(foreign.cert), NAMES, Date.now()), { ok: false, result: 'certificate-not-trusted' });
  // The anchor's certificate spliced in after a leaf it did not sign.
  const spliced = [...chainOf(foreign.leafPem), new X509Certificate(ca.pem)];
  t.like(matchChain([record(2, 0, 1, ca.pem)], spliced, NAMES, Date.now()), { ok: false, result: 'certificate-not-trusted' });
  t.like(matchChain([record(2, 0, 1, ca.pem)], [], NAMES, Date.now()), { ok: false, result: 'validation-failure' });
});

test('only DANE-TA(2) and DANE-EE(3) with known selectors and matching types are usable for SMTP', (t) => {
  const data = Buffer.alloc(32, 1);
  t.true(isUsableTlsa({ usage: 3, selector: 1, matchingType: 1, data }));
  t.true(isUsableTlsa({ usage: 2, selector: 0, matchingType: 2, data }));
  t.false(isUsableTlsa({ usage: 1, selector: 1, matchingType: 1, data }), 'PKIX-EE');
  t.false(isUsableTlsa({ usage: 0, selector: 1, matchingType: 1, data }), 'PKIX-TA');
  t.false(isUsableTlsa({ usage: 3, selector: 2, matchingType: 1, data }));
  t.false(isUsableTlsa({ usage: 3, selector: 1, matchingType: 3, data }));
  t.is(tlsaPresentation({ usage: 3, selector: 1, matchingType: 1, data: Buffer.from([0xab, 0x01]) }), '3 1 1 AB01');
});

test('TLSA lookups: validated records, validated denial, insecure answers, failures; all cached', async (t) => {
  const clock = new ManualClock();
  const lookup = createTlsaLookup(createDnsClient({ servers: [zone.server], timeoutMs: 300, tries: 1 }), clock);
  zone.sign('signed.test');
  zone.set('_25._tcp.mx.signed.test', 'TLSA', [
    { usage: 3, selector: 1, matchingType: 1, data: tlsaData(good.leafPem, 1, 1) },
    { usage: 1, selector: 1, matchingType: 1, data: 'ab' },
  ]);
  const state = await lookup.lookup('MX.signed.test');
  t.is(state.kind, 'tlsa');
  if (state.kind === 'tlsa') {
    t.is(state.records.length, 2);
    t.is(state.usable.length, 1);
    t.is(state.usable[0]!.data.toString('hex'), tlsaData(good.leafPem, 1, 1));
  }
  zone.set('nothing.signed.test', 'A', ['192.0.2.1']);
  t.deepEqual(await lookup.lookup('nothing.signed.test'), { kind: 'none' }, 'a validated NODATA/NXDOMAIN: no DANE');
  // An unsigned corner of a signed zone: the denial is insecure, and so no DANE (§2.2).
  zone.sign('_25._tcp.hole.signed.test', false);
  t.deepEqual(await lookup.lookup('hole.signed.test'), { kind: 'none' });
  // Records without AD are insecure: not used (§2.2).
  zone.set('_25._tcp.mx.unsigned.test', 'TLSA', [{ usage: 3, selector: 1, matchingType: 1, data: 'ab' }]);
  t.deepEqual(await lookup.lookup('mx.unsigned.test'), { kind: 'none' });
  zone.servfail('_25._tcp.broken.signed.test');
  t.is((await lookup.lookup('broken.signed.test')).kind, 'indeterminate');
  // Everything above is cached: asked once each.
  const before = zone.queriesFor('_25._tcp.mx.signed.test', 'TLSA');
  await lookup.lookup('mx.signed.test');
  await lookup.lookup('nothing.signed.test');
  t.is(zone.queriesFor('_25._tcp.mx.signed.test', 'TLSA'), before);
  t.is(zone.queriesFor('_25._tcp.nothing.signed.test', 'TLSA'), 1);
  clock.advance(301_000);
  await lookup.lookup('mx.signed.test');
  t.is(zone.queriesFor('_25._tcp.mx.signed.test', 'TLSA'), before + 1, 'after the record TTL, asked again');
});
