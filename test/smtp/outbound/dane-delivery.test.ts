/**
 * DANE (RFC 7672) end to end. The test zone plays a validating resolver: zone.sign() makes its
 * answers carry the AD bit. An MX host whose MX and address records are validated and that
 * publishes validated TLSA records gets mandatory TLS and a chain that must match a record;
 * a mismatch, or a lookup that cannot be trusted, defers without a MAIL FROM.
 */
import test from 'ava';
import { ManualClock } from '../../../src/lib/clock.js';
import { tlsaData } from '../../helpers/test-ca.js';
import { startTlsWorld, tlsSend, type Mx, type TlsWorld } from '../../helpers/tls-world.js';

const clock = new ManualClock(Date.UTC(2026, 10, 20, 8, 0, 0));
let w: TlsWorld;
let selfSigned: Mx;
let good: Mx;
let wrongName: Mx;
let other: Mx;
let hole: Mx;
let insecure: Mx;
let unusable: Mx;
let aliased: Mx;

test.before(async () => {
  w = await startTlsWorld({ clock, policyDomains: ['dane-sts.test', 'unusable-sts.test'] });
  selfSigned = await w.addMx('mx-self.dane.test', 'self-signed');
  good = await w.addMx('mx-good.dane.test', 'good');
  wrongName = await w.addMx('mx-wrong.dane.test', 'wrong-name');
  other = await w.addMx('mx-other.dane.test', 'self-signed');
  hole = await w.addMx('mx-hole.dane.test', 'good');
  insecure = await w.addMx('mx-insecure.dane.test', 'self-signed');
  unusable = await w.addMx('mx-unusable.dane.test', 'self-signed');
  aliased = await w.addMx('mx-aliased.dane.test', 'self-signed');
  // The MX hosts' zone and the recipient domains below are signed.
  w.zone.sign('dane.test');
  w.zone.sign('rcpt.test');
});
test.after.always(async () => {
  await w?.close();
});

async function send(to: string): Promise<string> {
  const res = await w.t0.request('POST', '/v1/emails', { body: tlsSend(to) });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  await w.settle();
  return res.body.emailId;
}
const lastEvent = async (id: string) => (await w.t0.request('GET', `/v1/emails/${id}`)).body.emailEvents.at(-1);
const tlsa = (usage: number, selector: 0 | 1, matchingType: 0 | 1 | 2, pem: string) => ({ usage, selector, matchingType, data: tlsaData(pem, selector, matchingType) });

test.serial('DANE-EE match: delivered over TLS to a self-signed MX no CA vouches for', async (t) => {
  w.setMx('ee.rcpt.test', [selfSigned.host]);
  w.zone.set(`_25._tcp.${selfSigned.host}`, 'TLSA', [tlsa(3, 1, 1, selfSigned.leafPem)]);
  const id = await send('a@ee.rcpt.test');
  const [msg] = await selfSigned.sink.waitForMessages(1);
  t.true(msg!.secure);
  const e = await lastEvent(id);
  t.is(e.status, 'DELIVERED');
  t.deepEqual(e.data.tls, { policy: 'tlsa', mode: 'enforce', result: 'success', mxHost: selfSigned.host });
});

test.serial('DANE-EE mismatch: no MAIL FROM, deferred as certificate-not-trusted', async (t) => {
  w.setMx('ee-miss.rcpt.test', [other.host]);
  w.zone.set(`_25._tcp.${other.host}`, 'TLSA', [tlsa(3, 1, 1, selfSigned.leafPem)]);
  const id = await send('b@ee-miss.rcpt.test');
  const e = await lastEvent(id);
  t.is(e.status, 'DELIVERY_DELAYED');
  t.like(e.data.tls, { policy: 'tlsa', mode: 'enforce', result: 'certificate-not-trusted', mxHost: other.host });
  t.is(other.mailFroms(), 0);
  t.is(other.sink.messages.length, 0);
});

test.serial('DANE-TA: the CA anchors a leaf valid for the MX name; a leaf for another name is refused', async (t) => {
  w.zone.set(`_25._tcp.${good.host}`, 'TLSA', [tlsa(2, 0, 1, w.ca.pem)]);
  w.zone.set(`_25._tcp.${wrongName.host}`, 'TLSA', [tlsa(2, 1, 1, w.ca.pem)]);
  w.setMx('ta.rcpt.test', [good.host]);
  const ok = await send('c@ta.rcpt.test');
  await good.sink.waitForMessages(1);
  t.like((await lastEvent(ok)).data.tls, { policy: 'tlsa', result: 'success' });
  w.setMx('ta-miss.rcpt.test', [wrongName.host]);
  const refused = await send('d@ta-miss.rcpt.test');
  t.like((await lastEvent(refused)).data.tls, { policy: 'tlsa', result: 'certificate-host-mismatch', mxHost: wrongName.host });
  t.is(wrongName.mailFroms(), 0);
});

test.serial('an MX host that is a CNAME: the TLSA records of the expanded name apply, and the original name is tried when it has none (RFC 7672 2.2.2)', async (t) => {
  // alias.dane.test CNAME mx-aliased.dane.test, both signed; the records are where the host lives.
  w.zone.set('alias.dane.test', 'CNAME', [aliased.host]);
  w.zone.set(`_25._tcp.${aliased.host}`, 'TLSA', [tlsa(3, 1, 1, selfSigned.leafPem)]);
  w.setMx('alias-miss.rcpt.test', ['alias.dane.test']);
  const refused = await lastEvent(await send('a1@alias-miss.rcpt.test'));
  t.is(refused.status, 'DELIVERY_DELAYED', 'a mismatch at the expanded name is no downgrade to opportunistic TLS');
  t.like(refused.data.tls, { policy: 'tlsa', result: 'certificate-not-trusted', mxHost: 'alias.dane.test' });
  t.is(aliased.mailFroms(), 0);
  // A matching record at the expanded name: delivered under DANE.
  w.zone.set(`_25._tcp.${aliased.host}`, 'TLSA', [tlsa(3, 1, 1, aliased.leafPem)]);
  clock.advance(301_000); // past the cached TLSA answer
  w.setMx('alias-ok.rcpt.test', ['alias.dane.test']);
  const ok = await lastEvent(await send('a2@alias-ok.rcpt.test'));
  t.is(ok.status, 'DELIVERED');
  t.like(ok.data.tls, { policy: 'tlsa', result: 'success', mxHost: 'alias.dane.test' });
  // None at the expanded name: the original name's records apply.
  w.zone.remove(`_25._tcp.${aliased.host}`);
  w.zone.set('_25._tcp.alias.dane.test', 'TLSA', [tlsa(3, 1, 1, selfSigned.leafPem)]);
  clock.advance(301_000);
  w.setMx('alias-orig.rcpt.test', ['alias.dane.test']);
  await w.settle(); // the first, deferred one's retry is due: not counted below
  const before = aliased.mailFroms();
  const orig = await lastEvent(await send('a3@alias-orig.rcpt.test'));
  t.is(orig.status, 'DELIVERY_DELAYED');
  t.like(orig.data.tls, { policy: 'tlsa', result: 'certificate-not-trusted' });
  t.is(aliased.mailFroms(), before);
});

test.serial('a TLSA lookup that fails (SERVFAIL): dnssec-invalid, the host is not contacted', async (t) => {
  w.zone.servfail(`_25._tcp.${hole.host}`);
  t.teardown(() => w.zone.clear(`_25._tcp.${hole.host}`));
  w.setMx('hole.rcpt.test', [hole.host]);
  const before = hole.sink.connectionCount;
  const id = await send('e@hole.rcpt.test');
  const e = await lastEvent(id);
  t.is(e.status, 'DELIVERY_DELAYED');
  t.like(e.data.tls, { policy: 'tlsa', result: 'dnssec-invalid', mxHost: hole.host });
  t.is(hole.sink.connectionCount, before);
});

test.serial('insecure TLSA records (a CNAME into an unsigned zone) or an insecure denial: DANE does not apply (RFC 7672 2.2)', async (t) => {
  // TLSA records that would not match, reached through a CNAME into a zone that is not signed:
  // the answer is "insecure", so the host gets pre-DANE opportunistic TLS, not a deferral.
  w.zone.set(`_25._tcp.${insecure.host}`, 'CNAME', ['_25._tcp.mx.unsigned-provider.test']);
  w.zone.set('_25._tcp.mx.unsigned-provider.test', 'TLSA', [tlsa(3, 1, 1, selfSigned.leafPem)]);
  w.setMx('insecure.rcpt.test', [insecure.host]);
  const id = await send('e1@insecure.rcpt.test');
  const e = await lastEvent(id);
  t.is(e.status, 'DELIVERED');
  t.like(e.data.tls, { policy: 'no-policy-found', result: 'success', mxHost: insecure.host });
  await insecure.sink.waitForMessages(1);
  // A denial from an unsigned corner of the signed zone is just as insecure.
  w.zone.remove(`_25._tcp.${insecure.host}`);
  w.zone.sign(`_25._tcp.${insecure.host}`, false);
  clock.advance(301_000); // past the cached TLSA answer
  const id2 = await send('e2@insecure.rcpt.test');
  t.is((await lastEvent(id2)).status, 'DELIVERED');
  await insecure.sink.waitForMessages(2);
});

test.serial('an MX RRset that is not validated: DANE does not apply (RFC 7672 2.2.1)', async (t) => {
  // TLSA records that would not match, but the recipient domain is unsigned.
  w.setMx('unsigned.example', [other.host]);
  const id = await send('f@unsigned.example');
  const e = await lastEvent(id);
  t.is(e.status, 'DELIVERED');
  t.like(e.data.tls, { policy: 'no-policy-found', result: 'success' });
});

test.serial('DANE wins over MTA-STS for a host with TLSA records', async (t) => {
  // The MTA-STS policy (enforce) does not list the MX, and its certificate is self-signed; the
  // matching DANE-EE record decides.
  w.zone.sign('dane-sts.test');
  w.setMx('dane-sts.test', [selfSigned.host]);
  w.publishSts('dane-sts.test', 'enforce', ['mx.elsewhere.test'], '1');
  const id = await send('g@dane-sts.test');
  const e = await lastEvent(id);
  t.is(e.status, 'DELIVERED');
  t.like(e.data.tls, { policy: 'tlsa', result: 'success' });
});

test.serial('TLSA records none of which is usable authenticate nothing: an MTA-STS enforce policy still applies to the host', async (t) => {
  // Only PKIX-EE(1), which RFC 7672 3.1.3 rules out for SMTP: DANE cannot fail or pass, so the
  // domain's enforce policy (which does not list this MX, whose certificate is self-signed) decides.
  w.zone.sign('unusable-sts.test');
  w.setMx('unusable-sts.test', [unusable.host]);
  w.zone.set(`_25._tcp.${unusable.host}`, 'TLSA', [tlsa(1, 1, 1, unusable.leafPem)]);
  w.publishSts('unusable-sts.test', 'enforce', ['mx.elsewhere.test'], '1');
  const id = await send('u@unusable-sts.test');
  const e = await lastEvent(id);
  t.is(e.status, 'DELIVERY_DELAYED');
  t.like(e.data.tls, { policy: 'sts', mode: 'enforce', result: 'validation-failure', mxHost: unusable.host });
  t.is(unusable.mailFroms(), 0);
  // Without an MTA-STS policy the same records mean TLS without authentication (tlsa-invalid).
  w.setMx('unusable.rcpt.test', [unusable.host]);
  const plain = await lastEvent(await send('v@unusable.rcpt.test'));
  t.is(plain.status, 'DELIVERED');
  t.like(plain.data.tls, { policy: 'tlsa', mode: 'enforce', result: 'tlsa-invalid' });
});

test.serial("the sending domain's ENFORCED still applies on top of DANE", async (t) => {
  const patch = (tlsPolicy: string) => w.t0.request('PATCH', `/v1/domains/${w.domain.id}`, { body: { tlsPolicy } });
  t.is((await patch('ENFORCED')).status, 200);
  t.teardown(async () => void (await patch('OPPORTUNISTIC')));
  const before = selfSigned.mailFroms();
  const id = await send('h@ee.rcpt.test');
  const e = await lastEvent(id);
  t.is(e.status, 'DELIVERY_DELAYED', 'DANE-EE matches, but the certificate is not valid for the MX name');
  t.like(e.data.tls, { policy: 'tlsa', result: 'certificate-not-trusted' });
  t.is(selfSigned.mailFroms(), before);
});
