/**
 * MTA-STS (RFC 8461) end to end: the app sends through its engine to MX sinks presenting good,
 * wrong-name, expired and self-signed certificates (from a test CA the app trusts), with the
 * policies served over HTTPS by a test server. Under enforce a host the policy does not list, or
 * whose certificate does not validate, never gets a MAIL FROM, not even in plaintext; testing
 * delivers and records what enforce would have refused.
 */
import test from 'ava';
import { ManualClock } from '../../../src/lib/clock.js';
import { sendAndSettle, startTlsWorld, type Mx, type TlsWorld } from '../../helpers/tls-world.js';

const clock = new ManualClock(Date.UTC(2026, 10, 20, 8, 0, 0));
const DOMAINS = ['good.test', 'unlisted.test', 'wrongname.test', 'cnonly.test', 'expired.test', 'selfsigned.test', 'plain.test', 'testing.test', 'cached.test', 'quiet.test', 'enforced-own.test', 'reuse-a.test', 'reuse-b.test', 'cnreuse.test', 'implicit-alias.test'];
let w: TlsWorld;
let good: Mx;
let unlisted: Mx;
let wrongName: Mx;
let cnOnly: Mx;
let expired: Mx;
let selfSigned: Mx;
let plain: Mx;

test.before(async () => {
  w = await startTlsWorld({ clock, policyDomains: DOMAINS });
  good = await w.addMx('mx.good.tls.test', 'good');
  unlisted = await w.addMx('mx.unlisted.tls.test', 'good');
  wrongName = await w.addMx('mx.wrongname.tls.test', 'wrong-name');
  // Its name only in the subject's CN: RFC 8461 §4.2 wants a SAN DNS-ID; Node's own check would accept the CN.
  cnOnly = await w.addMx('mx.cnonly.tls.test', 'cn-only');
  expired = await w.addMx('mx.expired.tls.test', 'expired');
  selfSigned = await w.addMx('mx.selfsigned.tls.test', 'self-signed');
  plain = await w.addMx('mx.plain.tls.test', 'good', { starttls: false });
});
test.after.always(async () => {
  await w?.close();
});

const send = (to: string) => sendAndSettle(w, to);
const email = async (id: string) => (await w.t0.request('GET', `/v1/emails/${id}`)).body;
const lastEvent = async (id: string) => (await email(id)).emailEvents.at(-1);

test.serial('enforce, a listed MX with a valid certificate: delivered over TLS, the verdict on the event', async (t) => {
  w.setMx('good.test', [good.host]);
  w.publishSts('good.test', 'enforce', ['*.good.tls.test'], '1');
  const id = await send('alice@good.test');
  const [msg] = await good.sink.waitForMessages(1);
  t.true(msg!.secure);
  const e = await lastEvent(id);
  t.is(e.status, 'DELIVERED');
  t.deepEqual(e.data.tls, { policy: 'sts', mode: 'enforce', result: 'success', mxHost: good.host });
});

test.serial('enforce, an MX the policy does not list: never connected to, deferred, FAILED at the give-up age', async (t) => {
  w.setMx('unlisted.test', [unlisted.host]);
  w.publishSts('unlisted.test', 'enforce', ['mx.elsewhere.test'], '1');
  const id = await send('bob@unlisted.test');
  const e = await lastEvent(id);
  t.is(e.status, 'DELIVERY_DELAYED');
  t.regex(e.data.response, /matches none of the policy's mx patterns/);
  t.like(e.data.tls, { policy: 'sts', mode: 'enforce', result: 'validation-failure', mxHost: unlisted.host });
  // Retries until the give-up age, never to that host.
  for (let i = 0; i < 30 && (await email(id)).latestStatus !== 'FAILED'; i++) {
    clock.advance(6 * 3_600_000);
    await w.settle();
  }
  t.is((await email(id)).latestStatus, 'FAILED');
  t.is(unlisted.sink.connectionCount, 0);
  t.is(unlisted.sink.messages.length, 0);
});

test.serial('enforce, certificates that do not validate for the MX: no MAIL FROM, nothing in plaintext, each failure named', async (t) => {
  const cases: [Mx, string, string][] = [
    [wrongName, 'wrongname.test', 'certificate-host-mismatch'],
    [cnOnly, 'cnonly.test', 'certificate-host-mismatch'],
    [expired, 'expired.test', 'certificate-expired'],
    [selfSigned, 'selfsigned.test', 'certificate-not-trusted'],
    [plain, 'plain.test', 'starttls-not-supported'],
  ];
  for (const [mx, domain, result] of cases) {
    w.setMx(domain, [mx.host]);
    w.publishSts(domain, 'enforce', [mx.host], '1');
    const id = await send(`carol@${domain}`);
    const e = await lastEvent(id);
    t.is(e.status, 'DELIVERY_DELAYED', domain);
    t.like(e.data.tls, { policy: 'sts', mode: 'enforce', result, mxHost: mx.host }, domain);
    t.is(mx.mailFroms(), 0, `${domain}: no MAIL FROM`);
    t.is(mx.sink.messages.length, 0, `${domain}: nothing delivered`);
  }
});

test.serial('testing: delivered as usual, the failure is on the event and counted for the report', async (t) => {
  w.setMx('testing.test', [wrongName.host]);
  w.publishSts('testing.test', 'testing', [wrongName.host], '1');
  const id = await send('dave@testing.test');
  await wrongName.sink.waitForMessages(1);
  const e = await lastEvent(id);
  t.is(e.status, 'DELIVERED');
  t.like(e.data.tls, { policy: 'sts', mode: 'testing', result: 'certificate-host-mismatch' });
  await w.t0.app.tlsReports.flushCounts();
  const rows = await w.t0.app.store.db.selectFrom('tls_session_counts').selectAll().where('policy_domain', '=', 'testing.test').execute();
  t.is(rows.length, 1);
  t.like(rows[0], { policy_type: 'sts', result: 'certificate-host-mismatch', mx_host: wrongName.host, receiving_ip: wrongName.address, count: 1 });
});

test.serial('the cached policy outlives a failed fetch and a restart; a new good policy replaces it', async (t) => {
  w.setMx('cached.test', [good.host]);
  w.publishSts('cached.test', 'enforce', [good.host], '1');
  await send('erin@cached.test');
  t.is(w.policy.fetches.filter((h) => h === 'mta-sts.cached.test').length, 1);
  // The domain moves its MX to a host the cached policy does not list, announces a new policy
  // and its policy host fails: the cached enforce policy still protects the mail.
  w.setMx('cached.test', [unlisted.host]);
  w.zone.set('_mta-sts.cached.test', 'TXT', ['v=STSv1; id=2;']);
  w.policy.setPolicy('cached.test', { status: 503, body: 'down' });
  clock.advance(301_000); // the TXT record's TTL
  const during = await send('erin@cached.test');
  t.is((await lastEvent(during)).status, 'DELIVERY_DELAYED');
  t.is(w.policy.fetches.filter((h) => h === 'mta-sts.cached.test').length, 2);
  await w.restart();
  clock.advance(301_000);
  const afterRestart = await send('erin@cached.test');
  t.like((await lastEvent(afterRestart)).data.tls, { policy: 'sts', mode: 'enforce', result: 'validation-failure' });
  t.is(unlisted.sink.connectionCount, 0, 'the unlisted host was never contacted');
  // The new policy is served: it lists the new host, and the mail goes.
  w.publishSts('cached.test', 'enforce', [unlisted.host], '2');
  clock.advance(301_000);
  const fixed = await send('erin@cached.test');
  t.is((await lastEvent(fixed)).status, 'DELIVERED');
});

test.serial('a domain without a policy costs one TXT query per negative TTL, not one per message', async (t) => {
  w.setMx('quiet.test', [good.host]);
  const ids = [];
  for (let i = 0; i < 4; i++) ids.push(await send(`frank${i}@quiet.test`));
  t.is(w.zone.queriesFor('_mta-sts.quiet.test', 'TXT'), 1);
  t.is(w.zone.queriesFor(`_25._tcp.${good.host}`, 'TLSA'), 0, 'no DNSSEC: no TLSA lookup');
  t.deepEqual((await lastEvent(ids[0]!)).data.tls, { policy: 'no-policy-found', mode: 'none', result: 'success', mxHost: good.host });
  clock.advance(301_000);
  await send('frank@quiet.test');
  t.is(w.zone.queriesFor('_mta-sts.quiet.test', 'TXT'), 2);
});

test.serial("the sending domain's own ENFORCED applies on top of a testing policy", async (t) => {
  const patch = (tlsPolicy: string) => w.t0.request('PATCH', `/v1/domains/${w.domain.id}`, { body: { tlsPolicy } });
  t.is((await patch('ENFORCED')).status, 200);
  t.teardown(async () => void (await patch('OPPORTUNISTIC')));
  w.setMx('enforced-own.test', [selfSigned.host]);
  w.publishSts('enforced-own.test', 'testing', [selfSigned.host], '1');
  const before = selfSigned.mailFroms();
  const id = await send('gina@enforced-own.test');
  const e = await lastEvent(id);
  t.is(e.status, 'DELIVERY_DELAYED');
  t.like(e.data.tls, { policy: 'sts', mode: 'enforce', result: 'certificate-not-trusted' });
  t.is(selfSigned.mailFroms(), before);
});

test.serial('a session verified for one MX name is not reused for another name on the same address', async (t) => {
  // alias.good.tls.test is the same server as mx.good.tls.test, but its certificate does not
  // name the alias: a session opened (and verified) for the one proves nothing for the other.
  w.zone.set('alias.good.tls.test', 'A', [good.address]);
  w.setMx('reuse-a.test', [good.host]);
  w.setMx('reuse-b.test', ['alias.good.tls.test']);
  w.publishSts('reuse-a.test', 'enforce', ['*.good.tls.test'], '1');
  w.publishSts('reuse-b.test', 'enforce', ['*.good.tls.test'], '1');
  t.is((await lastEvent(await send('a@reuse-a.test'))).status, 'DELIVERED');
  const b = await lastEvent(await send('b@reuse-b.test'));
  t.is(b.status, 'DELIVERY_DELAYED', 'MTA-STS enforce: the certificate must be valid for the MX host (RFC 8461 4.2)');
  t.like(b.data.tls, { policy: 'sts', mode: 'enforce', result: 'certificate-host-mismatch', mxHost: 'alias.good.tls.test' });

  // The same with the sending domain's own ENFORCED and no published policy.
  const patch = (tlsPolicy: string) => w.t0.request('PATCH', `/v1/domains/${w.domain.id}`, { body: { tlsPolicy } });
  t.is((await patch('ENFORCED')).status, 200);
  t.teardown(async () => void (await patch('OPPORTUNISTIC')));
  w.setMx('reuse-c.test', [good.host]);
  w.setMx('reuse-d.test', ['alias.good.tls.test']);
  t.is((await lastEvent(await send('c@reuse-c.test'))).status, 'DELIVERED');
  const d = await lastEvent(await send('d@reuse-d.test'));
  t.is(d.status, 'DELIVERY_DELAYED');
  t.like(d.data.tls, { policy: 'no-policy-found', mode: 'enforce', result: 'certificate-host-mismatch', mxHost: 'alias.good.tls.test' });
});

test.serial('a session opened for another name is not reused for an MX its certificate names only in the CN', async (t) => {
  // The certificate has no SAN, its CN is mx.cnreuse.tls.test. A session opened for the alias
  // (opportunistic mail, any certificate) must not pass for the CN's name under enforce: Node's
  // name check would fall back to the CN, RFC 8461 §4.2 does not.
  const mx = await w.addMx('mx.cnreuse.tls.test', 'cn-only');
  w.zone.set('alias.cnreuse.tls.test', 'A', [mx.address]);
  w.setMx('cnreuse-alias.test', ['alias.cnreuse.tls.test']);
  t.is((await lastEvent(await send('a@cnreuse-alias.test'))).status, 'DELIVERED');
  w.setMx('cnreuse.test', [mx.host]);
  w.publishSts('cnreuse.test', 'enforce', [mx.host], '1');
  const b = await lastEvent(await send('b@cnreuse.test'));
  t.is(b.status, 'DELIVERY_DELAYED');
  t.like(b.data.tls, { policy: 'sts', mode: 'enforce', result: 'certificate-host-mismatch', mxHost: mx.host });
  t.is(mx.sink.messages.length, 1, 'only the opportunistic message');
});

test.serial('enforce, no MX on a domain that is an alias: the implicit MX is the host the CNAME leads to, which the mx patterns and the certificate match (RFC 5321 5.1)', async (t) => {
  w.zone.set('implicit-alias.test', 'CNAME', [good.host]);
  w.publishSts('implicit-alias.test', 'enforce', ['*.good.tls.test'], '1');
  const before = good.sink.messages.length;
  const e = await lastEvent(await send('h@implicit-alias.test'));
  t.is(e.status, 'DELIVERED', e.data.response);
  t.deepEqual(e.data.tls, { policy: 'sts', mode: 'enforce', result: 'success', mxHost: good.host });
  t.is(good.sink.messages.length, before + 1);
});
