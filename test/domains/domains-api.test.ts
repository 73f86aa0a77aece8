import { createPublicKey } from 'node:crypto';
import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import type { BusEvent } from '../../src/core/events.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { addVerifiedDomain, publishRecords } from '../helpers/domain-fixtures.js';
import { twoTeams } from '../helpers/two-teams.js';

let t0: TestApp;
const clock = new ManualClock(Date.UTC(2026, 10, 22, 9, 0, 0));
const events: BusEvent[] = [];
test.before(async () => {
  t0 = await startTestApp({ clock, makeDkimKeys: true });
  t0.app.services.events.on('*', (e) => {
    events.push(e);
  });
});
test.after.always(async () => {
  await t0?.close();
});

test('create returns the domain with a DKIM key and the records to publish', async (t) => {
  const res = await t0.request('POST', '/v1/domains', { body: { name: 'Example.COM', region: 'eu-west-1' } });
  t.is(res.status, 200);
  const d = res.body;
  t.is(typeof d.id, 'number');
  t.is(d.name, 'example.com');
  t.is(d.teamId, t0.teamId);
  t.is(d.status, 'PENDING');
  t.is(d.region, 'eu-west-1');
  t.false(d.clickTracking);
  t.false(d.openTracking);
  t.is(d.tlsPolicy, 'OPPORTUNISTIC');
  t.is(d.trackingDomain, null);
  t.false(d.dmarcAdded);
  t.false(d.isVerifying);
  t.is(d.subdomain, null);
  for (const k of ['createdAt', 'updatedAt', 'publicKey', 'dkimStatus', 'spfDetails', 'errorMessage', 'verificationError', 'lastCheckedTime', 'trackingDomainStatus']) {
    t.true(k in d, k);
  }
  // RSA-2048 SubjectPublicKeyInfo in base64 is about 392 characters.
  t.true(d.publicKey.length > 380);
  const byName = (type: string, name: string) => d.dnsRecords.find((r: any) => r.type === type && r.name === name);
  const dkim = byName('TXT', 'posthorn._domainkey.example.com');
  t.is(dkim.value, `v=DKIM1; k=rsa; p=${d.publicKey}`);
  t.is(byName('MX', 'bounces.example.com').value, 'mx.posthorn.test');
  t.is(byName('MX', 'bounces.example.com').priority, '10');
  t.regex(byName('TXT', 'bounces.example.com').value, /^v=spf1 a:mx\.posthorn\.test ~all$/);
  const dmarc = byName('TXT', '_dmarc.example.com');
  t.true(dmarc.recommended);
  for (const r of d.dnsRecords) {
    t.deepEqual(Object.keys(r).sort(), ['name', 'priority', 'recommended', 'status', 'ttl', 'type', 'value']);
    t.is(r.status, 'NOT_STARTED');
  }
  t.true(events.some((e) => e.type === 'domain.created' && e.domainId === d.id));
});

test('each domain is given a DKIM key of its own: RSA, 2048 bits', async (t) => {
  const keys = [];
  for (const name of ['own-key-a.com', 'own-key-b.com']) {
    const res = await t0.request('POST', '/v1/domains', { body: { name, region: 'r' } });
    t.is(res.status, 200, JSON.stringify(res.body));
    const key = createPublicKey({ key: Buffer.from(res.body.publicKey, 'base64'), format: 'der', type: 'spki' });
    t.is(key.asymmetricKeyType, 'rsa');
    t.is(key.asymmetricKeyDetails?.modulusLength, 2048);
    keys.push(res.body.publicKey);
  }
  t.not(keys[0], keys[1]);
});

test('names are validated; duplicates are 409', async (t) => {
  for (const name of ['localhost', 'com', 'not a domain', '-bad.com', '127.0.0.1', 'a..b.com', 'x'.repeat(64) + '.com']) {
    const res = await t0.request('POST', '/v1/domains', { body: { name, region: 'r' } });
    t.is(res.status, 400, name);
    t.is(res.body.error.code, 'BAD_REQUEST');
  }
  const sub = await t0.request('POST', '/v1/domains', { body: { name: 'news.dup-test.co.uk', region: 'r' } });
  t.is(sub.status, 200);
  t.is(sub.body.subdomain, 'news');
  const dup = await t0.request('POST', '/v1/domains', { body: { name: 'NEWS.dup-test.co.uk.', region: 'r' } });
  t.is(dup.status, 409);
  t.is(dup.body.error.code, 'NOT_UNIQUE');
  t.is((await t0.request('POST', '/v1/domains', { body: { name: 'x.com' } })).status, 400);
  t.is((await t0.request('POST', '/v1/domains', { body: { name: 'x.com', region: 'r', extra: 1 } })).status, 400);
});

test('verification end to end: missing, wrong value, split TXT, success, then a record removed', async (t) => {
  const created = (await t0.request('POST', '/v1/domains', { body: { name: 'verify-me.org', region: 'r' } })).body;
  // Nothing published: PENDING with a reason for each record.
  let res = await t0.request('PUT', `/v1/domains/${created.id}/verify`);
  t.is(res.status, 200);
  t.is(typeof res.body.message, 'string');
  let d = (await t0.request('GET', `/v1/domains/${created.id}`)).body;
  t.is(d.status, 'PENDING');
  t.is(d.dkimStatus, 'PENDING');
  t.regex(d.verificationError, /DKIM/);
  t.is(d.lastCheckedTime, clock.now().toISOString());

  // Publish everything, but DKIM with another key: wrong value keeps the domain PENDING.
  publishRecords(t0, created);
  t0.zone.set('posthorn._domainkey.verify-me.org', 'TXT', ['v=DKIM1; k=rsa; p=AAAAwrongkey']);
  await t0.request('PUT', `/v1/domains/${created.id}/verify`);
  d = (await t0.request('GET', `/v1/domains/${created.id}`)).body;
  t.is(d.status, 'PENDING');
  t.is(d.dkimStatus, 'FAILED');
  t.is(d.spfDetails, 'SUCCESS');

  // The right key split into 255-byte chunks with odd spacing, an SPF with more mechanisms,
  // an MX host in upper case with a trailing dot: all match.
  const value = `v=DKIM1;  k=rsa;\tp=${created.publicKey}`;
  const chunks = value.match(/.{1,255}/g)!;
  t.true(chunks.length > 1);
  t0.zone.set('posthorn._domainkey.verify-me.org', 'TXT', [chunks]);
  t0.zone.set('bounces.verify-me.org', 'TXT', ['v=spf1 ip4:192.0.2.1 include:_spf.example.net A:MX.POSTHORN.TEST. -all']);
  t0.zone.set('bounces.verify-me.org', 'MX', [{ exchange: 'MX.Posthorn.Test.', priority: 5 }]);
  res = await t0.request('PUT', `/v1/domains/${created.id}/verify`);
  d = (await t0.request('GET', `/v1/domains/${created.id}`)).body;
  t.is(d.status, 'SUCCESS', JSON.stringify(d));
  t.is(d.dkimStatus, 'SUCCESS');
  t.is(d.spfDetails, 'SUCCESS');
  t.true(d.dmarcAdded);
  t.is(d.verificationError, null);
  t.true(d.dnsRecords.every((r: any) => r.status === 'SUCCESS'));
  t.regex(res.body.message, /verified/i);
  t.true(events.some((e) => e.type === 'domain.verified' && e.domainId === created.id));

  // The records disappear: the scheduled re-check of verified domains takes SUCCESS away.
  t0.zone.remove('posthorn._domainkey.verify-me.org');
  await t0.app.services.domains.recheck(true);
  d = (await t0.request('GET', `/v1/domains/${created.id}`)).body;
  t.is(d.status, 'PENDING');
  t.is(d.dkimStatus, 'PENDING');
});

// Concurrent creates of one name: one domain, the others the spec's 409 (on PostgreSQL all read
// "not there" and the partial unique index decides).
test('concurrent creates of one name make one domain; the others are 409', async (t) => {
  const results = await Promise.all(Array.from({ length: 6 }, () => t0.request('POST', '/v1/domains', { body: { name: 'same-time.org', region: 'r' } })));
  t.deepEqual(results.map((r) => r.status).sort(), [200, 409, 409, 409, 409, 409], JSON.stringify(results.map((r) => r.body.error)));
  t.true(results.every((r) => r.status === 200 || r.body.error.code === 'NOT_UNIQUE'));
  t.is((await t0.request('GET', '/v1/domains')).body.filter((d: any) => d.name === 'same-time.org').length, 1);
});

// Verifies at once (a double click, or a click while the scheduled re-check runs): the domain
// turns verified once, so domain.verified is announced (and sent to webhooks) once. Each check
// compared with the status it had read before its lookups, so every one of them announced it.
test('concurrent verifies announce domain.verified once', async (t) => {
  const created = (await t0.request('POST', '/v1/domains', { body: { name: 'verify-once.org', region: 'r' } })).body;
  publishRecords(t0, created);
  const results = await Promise.all(Array.from({ length: 6 }, () => t0.request('PUT', `/v1/domains/${created.id}/verify`)));
  t.deepEqual(results.map((r) => r.status), [200, 200, 200, 200, 200, 200], JSON.stringify(results.map((r) => r.body.error)));
  t.true(results.every((r) => /verified/i.test(r.body.message)), JSON.stringify(results.map((r) => r.body.message)));
  t.is((await t0.request('GET', `/v1/domains/${created.id}`)).body.status, 'SUCCESS');
  t.is(events.filter((e) => e.type === 'domain.verified' && e.domainId === created.id).length, 1);
  t.is(events.filter((e) => e.type === 'domain.updated' && e.domainId === created.id).length, 0);
});

test('DNS SERVFAIL or timeout is TEMPORARY_FAILURE', async (t) => {
  const created = (await t0.request('POST', '/v1/domains', { body: { name: 'flaky.net', region: 'r' } })).body;
  publishRecords(t0, created);
  t0.zone.servfail('posthorn._domainkey.flaky.net');
  await t0.request('PUT', `/v1/domains/${created.id}/verify`);
  let d = (await t0.request('GET', `/v1/domains/${created.id}`)).body;
  t.is(d.status, 'TEMPORARY_FAILURE');
  t.is(d.dkimStatus, 'TEMPORARY_FAILURE');
  t0.zone.clear('posthorn._domainkey.flaky.net');
  t0.zone.blackhole('bounces.flaky.net');
  await t0.request('PUT', `/v1/domains/${created.id}/verify`);
  d = (await t0.request('GET', `/v1/domains/${created.id}`)).body;
  t.is(d.status, 'TEMPORARY_FAILURE');
  t0.zone.clear('bounces.flaky.net');
  await t0.request('PUT', `/v1/domains/${created.id}/verify`);
  d = (await t0.request('GET', `/v1/domains/${created.id}`)).body;
  t.is(d.status, 'SUCCESS');
  // Once verified, a flaky resolver does not take the domain out of service.
  t0.zone.servfail('posthorn._domainkey.flaky.net');
  await t0.request('PUT', `/v1/domains/${created.id}/verify`);
  d = (await t0.request('GET', `/v1/domains/${created.id}`)).body;
  t.is(d.status, 'SUCCESS');
  t.is(d.dkimStatus, 'TEMPORARY_FAILURE');
  t0.zone.clear('posthorn._domainkey.flaky.net');
});

test.serial('a domain unverified for 72 hours turns FAILED', async (t) => {
  const created = (await t0.request('POST', '/v1/domains', { body: { name: 'slow-dns.io', region: 'r' } })).body;
  clock.advance(71 * 3600 * 1000);
  await t0.app.services.domains.recheck(false);
  t.is((await t0.request('GET', `/v1/domains/${created.id}`)).body.status, 'PENDING');
  clock.advance(2 * 3600 * 1000);
  await t0.app.services.domains.recheck(false);
  const d = (await t0.request('GET', `/v1/domains/${created.id}`)).body;
  t.is(d.status, 'FAILED');
  t.truthy(d.errorMessage);
  // Publishing the records still verifies it later.
  publishRecords(t0, created);
  await t0.request('PUT', `/v1/domains/${created.id}/verify`);
  t.is((await t0.request('GET', `/v1/domains/${created.id}`)).body.status, 'SUCCESS');
});

test('PATCH: tracking, tracking domain, TLS policy, receiving; unknown fields are 400', async (t) => {
  const created = (await t0.request('POST', '/v1/domains', { body: { name: 'patch-me.dev', region: 'r' } })).body;
  let res = await t0.request('PATCH', `/v1/domains/${created.id}`, { body: { clickTracking: true, openTracking: true, tlsPolicy: 'ENFORCED' } });
  t.is(res.status, 200);
  t.true(res.body.clickTracking);
  t.true(res.body.openTracking);
  t.is(res.body.tlsPolicy, 'ENFORCED');
  t.true(events.some((e) => e.type === 'domain.updated' && e.domainId === created.id));

  res = await t0.request('PATCH', `/v1/domains/${created.id}`, { body: { trackingDomain: 'links' } });
  t.is(res.body.trackingDomain, 'links.patch-me.dev');
  t.is(res.body.trackingDomainStatus, 'PENDING');
  const cname = res.body.dnsRecords.find((r: any) => r.type === 'CNAME');
  t.deepEqual([cname.name, cname.value], ['links.patch-me.dev', 'mx.posthorn.test']);
  res = await t0.request('PATCH', `/v1/domains/${created.id}`, { body: { trackingDomain: 'Click.Patch-Me.dev' } });
  t.is(res.body.trackingDomain, 'click.patch-me.dev');
  t.is((await t0.request('PATCH', `/v1/domains/${created.id}`, { body: { trackingDomain: 'click.other.dev' } })).status, 400);
  res = await t0.request('PATCH', `/v1/domains/${created.id}`, { body: { trackingDomain: null } });
  t.is(res.body.trackingDomain, null);
  t.false(res.body.dnsRecords.some((r: any) => r.type === 'CNAME'));

  const refused = await t0.request('PATCH', `/v1/domains/${created.id}`, { body: { receiving: true } });
  t.is(refused.status, 400);
  t.regex(refused.body.error.message, /verified/);
  publishRecords(t0, created);
  await t0.request('PUT', `/v1/domains/${created.id}/verify`);
  res = await t0.request('PATCH', `/v1/domains/${created.id}`, { body: { receiving: true } });
  t.is(res.status, 200);
  t.true(res.body.receiving);
  const mx = res.body.dnsRecords.find((r: any) => r.type === 'MX' && r.name === 'patch-me.dev');
  t.is(mx.value, 'mx.posthorn.test');
  res = await t0.request('PATCH', `/v1/domains/${created.id}`, { body: { receiving: false } });
  t.false(res.body.dnsRecords.some((r: any) => r.type === 'MX' && r.name === 'patch-me.dev'));

  for (const body of [{ bogus: true }, { clickTracking: 'yes' }, { tlsPolicy: 'NEVER' }]) {
    const bad = await t0.request('PATCH', `/v1/domains/${created.id}`, { body });
    t.is(bad.status, 400, JSON.stringify(body));
    t.is(bad.body.error.code, 'BAD_REQUEST');
  }
});

test('tracking domain status follows its CNAME on verify', async (t) => {
  const d = await addVerifiedDomain(t0, 'cname-check.app');
  await t0.request('PATCH', `/v1/domains/${d.id}`, { body: { trackingDomain: 't' } });
  t0.zone.set('t.cname-check.app', 'CNAME', ['mx.posthorn.test']);
  await t0.request('PUT', `/v1/domains/${d.id}/verify`);
  const got = (await t0.request('GET', `/v1/domains/${d.id}`)).body;
  t.is(got.trackingDomainStatus, 'SUCCESS');
  t.is(got.status, 'SUCCESS');
});

test('a re-check whose list was read before a PATCH does not blank the new tracking domain\'s status', async (t) => {
  // The cron reads the domains to re-check, then checks them one by one: by the time it reaches
  // this one, a tracking domain was added and verified (a CI run met this at a cron tick).
  const d = await addVerifiedDomain(t0, 'recheck-race.app');
  const listed = (await t0.app.services.domains.findForCli(null, String(d.id)))!;
  await t0.request('PATCH', `/v1/domains/${d.id}`, { body: { trackingDomain: 't' } });
  t0.zone.set('t.recheck-race.app', 'CNAME', ['mx.posthorn.test']);
  await t0.request('PUT', `/v1/domains/${d.id}/verify`);
  await t0.app.services.domains.runCheck(listed);
  const got = (await t0.request('GET', `/v1/domains/${d.id}`)).body;
  t.is(got.trackingDomain, 't.recheck-race.app');
  t.is(got.trackingDomainStatus, 'SUCCESS');
});

test('path ids are integers 1..2147483647; missing domains are 404; delete twice is 404', async (t) => {
  for (const id of ['0', '-1', 'abc', '2147483648', '1.5']) {
    const res = await t0.request('GET', `/v1/domains/${id}`);
    t.is(res.status, 400, id);
  }
  t.is((await t0.request('GET', '/v1/domains/2147483647')).status, 404);
  t.is((await t0.request('PUT', '/v1/domains/2147483647/verify')).status, 404);
  const created = (await t0.request('POST', '/v1/domains', { body: { name: 'short-lived.com', region: 'r' } })).body;
  const del = await t0.request('DELETE', `/v1/domains/${created.id}`);
  t.deepEqual(del.body, { id: created.id, success: true, message: 'Domain deleted successfully' });
  t.true(events.some((e) => e.type === 'domain.deleted' && e.domainId === created.id));
  t.is((await t0.request('DELETE', `/v1/domains/${created.id}`)).status, 404);
  t.is((await t0.request('GET', `/v1/domains/${created.id}`)).status, 404);
  const list = (await t0.request('GET', '/v1/domains')).body;
  t.true(Array.isArray(list));
  t.false(list.some((d: any) => d.id === created.id));
  // The name can be added again after deletion.
  t.is((await t0.request('POST', '/v1/domains', { body: { name: 'short-lived.com', region: 'r' } })).status, 200);
});

test('a key bound to a domain sees only it: other domains are 404 to read and 403 to change (verify included)', async (t) => {
  const mine = (await t0.request('POST', '/v1/domains', { body: { name: 'bound-a.com', region: 'r' } })).body;
  const other = (await t0.request('POST', '/v1/domains', { body: { name: 'bound-b.com', region: 'r' } })).body;
  const key = (await t0.request('POST', '/v1/apiKeys', { body: { name: 'bound', domainId: mine.id } })).body.token;
  const list = (await t0.request('GET', '/v1/domains', { key })).body;
  t.deepEqual(list.map((d: any) => d.id), [mine.id]);
  t.is((await t0.request('GET', `/v1/domains/${mine.id}`, { key })).status, 200);
  t.is((await t0.request('GET', `/v1/domains/${other.id}`, { key })).status, 404);
  t.is((await t0.request('PUT', `/v1/domains/${other.id}/verify`, { key })).status, 403);
  t.is((await t0.request('PATCH', `/v1/domains/${other.id}`, { key, body: { openTracking: true } })).status, 403);
  t.is((await t0.request('DELETE', `/v1/domains/${other.id}`, { key })).status, 403);
  t.is((await t0.request('POST', '/v1/domains', { key, body: { name: 'bound-c.com', region: 'r' } })).status, 403);
  t.is((await t0.request('POST', '/v1/apiKeys', { body: { name: 'bad', domainId: 999999 } })).status, 400);
});

// A key bound to a domain can do nothing once the domain is gone: it goes with the domain, in the
// deletion's transaction. Keys bound to nothing, or to another domain or team, stay.
test('deleting a domain deletes the API keys bound to it; other keys, and other teams\' keys, keep working', async (t) => {
  const doomed = (await t0.request('POST', '/v1/domains', { body: { name: 'doomed-keys.com', region: 'r' } })).body;
  const kept = (await t0.request('POST', '/v1/domains', { body: { name: 'kept-keys.com', region: 'r' } })).body;
  const bound = (await t0.request('POST', '/v1/apiKeys', { body: { name: 'doomed', domainId: doomed.id } })).body;
  const boundSending = (await t0.request('POST', '/v1/apiKeys', { body: { name: 'doomed-sending', permission: 'SENDING', domainId: doomed.id } })).body;
  const keptBound = (await t0.request('POST', '/v1/apiKeys', { body: { name: 'kept', domainId: kept.id } })).body;
  const unbound = (await t0.request('POST', '/v1/apiKeys', { body: { name: 'unbound' } })).body;
  const b = (await twoTeams(t0, { b: { name: 'Bystanders' } })).b;
  const theirs = (await t0.request('POST', '/v1/domains', { key: b.key, body: { name: 'doomed-keys.com', region: 'r' } })).body;
  const theirKey = (await t0.request('POST', '/v1/apiKeys', { key: b.key, body: { name: 'theirs', domainId: theirs.id } })).body;
  t.is((await t0.request('GET', `/v1/domains/${doomed.id}`, { key: bound.token })).status, 200);

  t.is((await t0.request('DELETE', `/v1/domains/${doomed.id}`)).status, 200);
  for (const key of [bound.token, boundSending.token]) {
    const res = await t0.request('GET', '/v1/domains', { key });
    t.is(res.status, 401);
    t.is(res.body.error.code, 'UNAUTHORIZED');
  }
  const ids = (await t0.request('GET', '/v1/apiKeys')).body.map((k: any) => k.id);
  t.false(ids.includes(bound.id));
  t.false(ids.includes(boundSending.id));
  t.true(ids.includes(keptBound.id) && ids.includes(unbound.id));
  t.deepEqual((await t0.request('GET', '/v1/domains', { key: keptBound.token })).body.map((d: any) => d.id), [kept.id]);
  t.is((await t0.request('GET', '/v1/domains', { key: unbound.token })).status, 200);
  t.deepEqual((await t0.request('GET', '/v1/domains', { key: theirKey.token })).body.map((d: any) => d.id), [theirs.id]);
  t.true((await t0.request('GET', '/v1/apiKeys', { key: b.key })).body.some((k: any) => k.id === theirKey.id));
});

// A key left bound to a domain deleted before keys went with it authenticates no more.
test('a key bound to a domain deleted before the upgrade is refused', async (t) => {
  const gone = (await t0.request('POST', '/v1/domains', { body: { name: 'gone-before.com', region: 'r' } })).body;
  const key = (await t0.request('POST', '/v1/apiKeys', { body: { name: 'left', domainId: gone.id } })).body.token;
  await t0.app.store.db.updateTable('domains').set({ deleted_at: '2026-11-01T00:00:00.000Z' }).where('id', '=', gone.id).execute();
  t.is((await t0.request('GET', '/v1/domains', { key })).status, 401);
});

test('another team cannot see or touch the domain', async (t) => {
  const d = (await t0.request('POST', '/v1/domains', { body: { name: 'private-team.com', region: 'r' } })).body;
  const key = (await twoTeams(t0, { b: { name: 'Intruders' } })).b.key;
  t.is((await t0.request('GET', `/v1/domains/${d.id}`, { key })).status, 404);
  t.is((await t0.request('PATCH', `/v1/domains/${d.id}`, { key, body: { openTracking: true } })).status, 404);
  t.is((await t0.request('DELETE', `/v1/domains/${d.id}`, { key })).status, 404);
  t.deepEqual((await t0.request('GET', '/v1/domains', { key })).body, []);
  // The same name may exist in another team.
  t.is((await t0.request('POST', '/v1/domains', { key, body: { name: 'private-team.com', region: 'r' } })).status, 200);
});

test('DMARC through the API: a subdomain reads as covered by its organisational domain\'s record; two records show FAILED', async (t) => {
  const res = await t0.request('POST', '/v1/domains', { body: { name: 'news.dmarc-org.net', region: 'local' } });
  t.is(res.status, 200, JSON.stringify(res.body));
  const created = res.body;
  publishRecords(t0, { dnsRecords: created.dnsRecords.filter((r: any) => !r.name.startsWith('_dmarc.')) });
  t0.zone.set('_dmarc.dmarc-org.net', 'TXT', ['v=DMARC1; p=reject; sp=quarantine']);
  await t0.request('PUT', `/v1/domains/${created.id}/verify`);
  let d = (await t0.request('GET', `/v1/domains/${created.id}`)).body;
  t.is(d.status, 'SUCCESS');
  t.true(d.dmarcAdded);
  t.is(d.dnsRecords.find((r: any) => r.name === '_dmarc.news.dmarc-org.net').status, 'SUCCESS');

  t0.zone.set('_dmarc.news.dmarc-org.net', 'TXT', ['v=DMARC1; p=none', 'v=DMARC1; p=none;']);
  await t0.request('PUT', `/v1/domains/${created.id}/verify`);
  d = (await t0.request('GET', `/v1/domains/${created.id}`)).body;
  t.is(d.status, 'SUCCESS'); // DMARC is recommended, not required
  t.false(d.dmarcAdded);
  t.is(d.dnsRecords.find((r: any) => r.name === '_dmarc.news.dmarc-org.net').status, 'FAILED');
});
