import { request as httpRequest } from 'node:http';
import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { parseStsPolicy } from '../../src/smtp/outbound/mta-sts-policy.js';
import { publishRecords } from '../helpers/domain-fixtures.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { twoTeams } from '../helpers/two-teams.js';
import { smtpSend } from './helpers/smtp-client.js';

// A name several teams added: who gets its mail and serves its MTA-STS policy when none of them
// is verified at the moment. A team whose records lapsed before another team verified the name
// has lost it for good (until it verifies again); teams whose records lapse together keep it.
// The clock is manual so "before" and "after" are never the same millisecond.

const HOUR = 3600_000;
const clock = new ManualClock(Date.UTC(2026, 10, 20, 9, 0, 0));
let t0: TestApp;
let port: number;
let keyB: string;

test.before(async () => {
  t0 = await startTestApp({ clock });
  port = t0.app.listeners.inbound!.port;
  keyB = (await twoTeams(t0)).b.key;
});
test.after.always(async () => {
  await t0?.close();
});

async function api(method: string, path: string, key: string | undefined, body?: unknown): Promise<any> {
  const res = await t0.request(method, path, { key, body });
  if (res.status !== 200) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}
const add = (name: string, key?: string) => api('POST', '/v1/domains', key, { name, region: 'local' });
const verify = async (d: any, key?: string): Promise<string> => {
  await api('PUT', `/v1/domains/${d.id}/verify`, key);
  return (await api('GET', `/v1/domains/${d.id}`, key)).status;
};
const dkimRecord = (d: any) => d.dnsRecords.find((r: any) => r.type === 'TXT' && r.name.includes('._domainkey.'));
const receivedBy = async (d: any, key?: string): Promise<number> => (await api('GET', `/v1/receivedEmails?domainId=${d.id}`, key)).total;

function getPolicy(host: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${t0.baseUrl}/.well-known/mta-sts.txt`, { headers: { host } }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * Team A verifies the name, receives for it and asks for MTA-STS enforce. The name passes to
 * team B: B's DKIM record is published (at its own selector's host) and A's removed, A's
 * re-check finds its records gone, then B verifies and turns receiving on. Later B's records
 * lapse too (its DKIM record is gone for a while).
 */
async function handOverThenLapse(name: string): Promise<{ a: any; b: any }> {
  const a = await add(name);
  publishRecords(t0, a);
  if ((await verify(a)) !== 'SUCCESS') throw new Error('A not verified');
  await api('PATCH', `/v1/domains/${a.id}`, undefined, { receiving: true, mtaStsMode: 'enforce' });

  const b = await add(name, keyB);
  publishRecords(t0, b);
  t0.zone.remove(dkimRecord(a).name, 'TXT');
  clock.advance(HOUR);
  if ((await verify(a)) === 'SUCCESS') throw new Error('A still verified');
  clock.advance(HOUR);
  if ((await verify(b, keyB)) !== 'SUCCESS') throw new Error('B not verified');
  await api('PATCH', `/v1/domains/${b.id}`, keyB, { receiving: true });

  clock.advance(HOUR);
  t0.zone.remove(dkimRecord(b).name, 'TXT');
  if ((await verify(b, keyB)) === 'SUCCESS') throw new Error('B still verified');
  return { a, b };
}

test.serial('a name that passed to another team: while the new owner’s records lapse, the old team still gets none of its mail', async (t) => {
  const { a, b } = await handOverThenLapse('handover.dev');
  const res = await smtpSend({ port, from: 'news@partner.com', to: ['reset@handover.dev'], raw: 'Subject: your password reset\r\n\r\nsecret\r\n' });
  t.true(res.ok, res.response);
  t.is(await receivedBy(b, keyB), 1, 'the new owner still receives through its lapse');
  t.is(await receivedBy(a), 0, 'the team that lost the name gets no copy');
});

test.serial('a name that passed to another team: while the new owner’s records lapse, its MTA-STS policy is not the old team’s', async (t) => {
  await handOverThenLapse('handover-sts.dev');
  const policy = await getPolicy('mta-sts.handover-sts.dev');
  t.is(policy.status, 200);
  t.like(parseStsPolicy(policy.body), { mode: 'testing' }, 'the new owner’s mode, not the enforce the old team asked for');
});

test.serial('a name that passed to another team before the old team’s re-check: a re-check of the new owner that a DNS failure kept verified still counts', async (t) => {
  // The new owner verifies while the old team still reads as verified; the old team's re-check
  // then finds its key gone; the new owner's next re-check meets a DNS failure (it stays
  // verified); only then do its records lapse.
  const a = await add('handover-early.dev');
  publishRecords(t0, a);
  t.is(await verify(a), 'SUCCESS');
  await api('PATCH', `/v1/domains/${a.id}`, undefined, { receiving: true });
  const b = await add('handover-early.dev', keyB);
  publishRecords(t0, b);
  t.is(await verify(b, keyB), 'SUCCESS');
  await api('PATCH', `/v1/domains/${b.id}`, keyB, { receiving: true });
  clock.advance(HOUR);
  t0.zone.remove(dkimRecord(a).name, 'TXT');
  t.not(await verify(a), 'SUCCESS');
  clock.advance(HOUR);
  const dkimHost = dkimRecord(b).name;
  t0.zone.servfail(dkimHost);
  t.is(await verify(b, keyB), 'SUCCESS', 'a DNS failure does not take a verified domain out of service');
  t0.zone.clear(dkimHost);
  clock.advance(HOUR);
  t0.zone.remove(dkimHost, 'TXT');
  t.not(await verify(b, keyB), 'SUCCESS');

  const res = await smtpSend({ port, from: 'news@partner.com', to: ['reset@handover-early.dev'], raw: 'Subject: your password reset\r\n\r\nsecret\r\n' });
  t.true(res.ok, res.response);
  t.is(await receivedBy(b, keyB), 1);
  t.is(await receivedBy(a), 0, 'the team that lost the name gets no copy');
});

test.serial('two teams that both hold a name (both keys published) keep receiving its mail when both lapse in one outage', async (t) => {
  const a = await add('shared.dev');
  const b = await add('shared.dev', keyB);
  publishRecords(t0, a);
  publishRecords(t0, b);
  t.is(await verify(a), 'SUCCESS');
  t.is(await verify(b, keyB), 'SUCCESS');
  await api('PATCH', `/v1/domains/${a.id}`, undefined, { receiving: true });
  await api('PATCH', `/v1/domains/${b.id}`, keyB, { receiving: true });

  clock.advance(HOUR);
  t0.zone.remove(dkimRecord(a).name, 'TXT');
  t0.zone.remove(dkimRecord(b).name, 'TXT');
  t.not(await verify(a), 'SUCCESS');
  clock.advance(60_000);
  t.not(await verify(b, keyB), 'SUCCESS');

  const res = await smtpSend({ port, from: 'news@partner.com', to: ['hello@shared.dev'], raw: 'Subject: hello\r\n\r\nhi\r\n' });
  t.true(res.ok, res.response);
  t.is(await receivedBy(a), 1);
  t.is(await receivedBy(b, keyB), 1);
});
