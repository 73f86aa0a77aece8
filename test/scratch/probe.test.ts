import test from 'ava';
import { startTestApp } from '../helpers/test-app.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';

test('probe', async (t) => {
  const t0 = await startTestApp();
  const teamB = await t0.app.services.teams.create('Team B');
  const keyB = (await t0.app.services.apiKeys.create(teamB, { name: 'b', permission: 'FULL' })).token;
  await addVerifiedDomain(t0, 'acme.dev');
  const b1 = await addVerifiedDomain(t0, 'bolt.dev', keyB);
  const b2 = await addVerifiedDomain(t0, 'bolt-two.dev', keyB);
  const bound = (await t0.app.services.apiKeys.create(teamB, { name: 'bound', permission: 'FULL', domainId: b1.id })).token;
  const bookA = (await t0.request('POST', '/v1/contactBooks', { body: { name: 'a' } })).body.id;
  const bookB = (await t0.request('POST', '/v1/contactBooks', { body: { name: 'b' }, key: keyB })).body.id;
  for (const [k, book] of [[t0.key, bookA], [keyB, bookB]] as const) {
    for (const email of ['ann@example.net', 'bob@bücher.example']) {
      const r = await t0.request('POST', `/v1/contactBooks/${book}/contacts`, { body: { email }, key: k });
      t.log(email, r.status, JSON.stringify(r.body));
    }
  }
  const urls: [string, string][] = [
    [keyB, `/v1/contactBooks/${bookB}/contacts?emails=`],
    [keyB, `/v1/contactBooks/${bookB}/contacts?ids=`],
    [keyB, `/v1/contactBooks/${bookB}/contacts?emails=,`],
    [keyB, `/v1/contactBooks/${bookB}/contacts?emails=ANN@EXAMPLE.NET`],
    [keyB, `/v1/contactBooks/${bookB}/contacts?emails=${encodeURIComponent('bob@bücher.example')}`],
    [keyB, `/v1/contactBooks/${bookB}/contacts?emails=${encodeURIComponent('bob@BÜCHER.example')}`],
    [keyB, `/v1/contactBooks/${bookA}/contacts`],
    [keyB, `/v1/segments?contactBookId=${bookA}`],
    [keyB, `/v1/segments?contactBookId=`],
    [keyB, `/v1/emails?tag=`],
    [keyB, `/v1/emails?domainId=`],
    [keyB, `/v1/emails?domainId=0`],
    [keyB, `/v1/emails?domainId=1`],
    [keyB, `/v1/emails?startDate=2026-01-01&startDate=2027-01-01`],
    [keyB, `/v1/suppressions?search=&reason=`],
    [keyB, `/v1/campaigns?status=draft`],
    [keyB, `/v1/analytics/email-time-series?days=7&days=30`],
    [keyB, `/v1/analytics/email-time-series?domainId=1`],
    [keyB, `/v1/analytics/reputation-metrics?domainId=1`],
    [keyB, `/v1/tlsReports?domainId=1`],
    [keyB, `/v1/receivedEmails?domainId=1`],
    [bound, `/v1/tlsReports?domainId=${b2.id}`],
    [bound, `/v1/receivedEmails?domainId=${b2.id}`],
    [bound, `/v1/analytics/reputation-metrics?domainId=${b2.id}`],
    [bound, `/v1/apiKeys`],
    [bound, `/v1/domains`],
    [bound, `/v1/webhooks`],
    [bound, `/v1/sandbox/messages`],
    [keyB, `/v1/webhooks/wh_x/attempts?cursor=`],
  ];
  for (const [k, u] of urls) {
    const r = await t0.request('GET', u, { key: k });
    t.log(r.status, u, JSON.stringify(r.body).slice(0, 300));
  }
  await t0.close();
  t.pass();
});
