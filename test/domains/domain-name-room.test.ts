import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { twoTeams } from '../helpers/two-teams.js';

// A name is at most 253 characters, and so is every host whose record a domain asks for
// (<selector>._domainkey.<name>, _smtp._tls.<name>, ...): a longer one cannot be published,
// so a name that leaves them no room is refused when it is added, not left to fail its checks.

let t0: TestApp;
test.before(async () => {
  t0 = await startTestApp();
});
test.after.always(async () => {
  await t0?.close();
});

const nameOf = (length: number) => {
  const labels = [];
  let left = length - '.app'.length;
  while (left > 0) {
    const n = Math.min(63, left);
    labels.push('a'.repeat(n));
    left -= n + 1;
  }
  const name = `${labels.join('.')}.app`;
  return name.length === length ? name : `b${name}`;
};

test('a name whose DKIM host would pass 253 characters is 400; the longest that leaves room is added', async (t) => {
  const longest = 253 - 'posthorn._domainkey.'.length;
  const tooLong = nameOf(longest + 1);
  t.is(tooLong.length, longest + 1);
  const refused = await t0.request('POST', '/v1/domains', { body: { name: tooLong, region: 'r' } });
  t.is(refused.status, 400);
  t.is(refused.body.error.code, 'BAD_REQUEST');
  t.regex(refused.body.error.message, new RegExp(`^name: must be at most ${longest} characters`));
  const fits = nameOf(longest);
  t.is(fits.length, longest);
  const added = await t0.request('POST', '/v1/domains', { body: { name: fits, region: 'r' } });
  t.is(added.status, 200, JSON.stringify(added.body));
  t.true(added.body.dnsRecords.every((r: { name: string }) => r.name.length <= 253));
});

test('a tracking domain longer than 253 characters is 400', async (t) => {
  const d = (await t0.request('POST', '/v1/domains', { body: { name: 'room.app', region: 'r' } })).body;
  const host = `${'t.'.repeat(123)}room.app`;
  t.true(host.length > 253);
  const res = await t0.request('PATCH', `/v1/domains/${d.id}`, { body: { trackingDomain: host } });
  t.is(res.status, 400);
  t.regex(res.body.error.message, /^trackingDomain: /);
});

test('the room is counted with the selector the domain gets: a second team’s longer selector leaves less', async (t) => {
  const keyB = (await twoTeams(t0)).b.key;
  const longest = 253 - 'posthorn._domainkey.'.length;
  const name = `c${nameOf(longest).slice(1)}`;
  t.is((await t0.request('POST', '/v1/domains', { body: { name, region: 'r' } })).status, 200);
  const refused = await t0.request('POST', '/v1/domains', { body: { name, region: 'r' }, key: keyB });
  t.is(refused.status, 400);
  t.regex(refused.body.error.message, /^name: must be at most \d+ characters, so that every host to publish records at \(posthorn-[a-z0-9]+\._domainkey\.<name> the longest\)/);
  const shorter = nameOf(longest - 20);
  t.is((await t0.request('POST', '/v1/domains', { body: { name: shorter, region: 'r' } })).status, 200);
  const second = await t0.request('POST', '/v1/domains', { body: { name: shorter, region: 'r' }, key: keyB });
  t.is(second.status, 200, JSON.stringify(second.body));
  t.true(second.body.dnsRecords.every((r: { name: string }) => r.name.length <= 253));
});
