import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

let t0: TestApp;
const clock = new ManualClock(Date.UTC(2026, 10, 22, 12, 0, 0, 0));
test.before(async () => {
  t0 = await startTestApp({ clock, overrides: { rateLimit: { perSecond: 3 } } });
});
test.after.always(async () => {
  await t0?.close();
});

test.serial('every authenticated response carries the rate-limit headers; the 4th request in a second is 429', async (t) => {
  clock.set(Date.UTC(2026, 10, 22, 12, 0, 1, 100));
  const statuses: number[] = [];
  for (let i = 0; i < 3; i++) {
    const res = await t0.request('GET', '/v1/apiKeys');
    statuses.push(res.status);
    t.is(res.headers.get('x-ratelimit-limit'), '3');
    t.is(res.headers.get('x-ratelimit-remaining'), String(2 - i));
    t.is(res.headers.get('x-ratelimit-reset'), String(Date.UTC(2026, 10, 22, 12, 0, 2) / 1000));
  }
  t.deepEqual(statuses, [200, 200, 200]);
  const limited = await t0.request('GET', '/v1/apiKeys');
  t.is(limited.status, 429);
  t.is(limited.body.error.code, 'RATE_LIMITED');
  t.is(limited.headers.get('retry-after'), '1');
  t.is(limited.headers.get('x-ratelimit-remaining'), '0');
  // Error responses after auth carry the headers too.
  const notFound = await t0.request('DELETE', '/v1/apiKeys/424242');
  t.is(notFound.status, 429);
});

test.serial('the window resets after a second', async (t) => {
  clock.set(Date.UTC(2026, 10, 22, 12, 0, 5, 0));
  const res = await t0.request('GET', '/v1/apiKeys');
  t.is(res.status, 200);
  t.is(res.headers.get('x-ratelimit-remaining'), '2');
});

test.serial('the limit is per team, and a team override wins', async (t) => {
  clock.set(Date.UTC(2026, 10, 22, 12, 0, 9, 0));
  const other = await t0.app.services.teams.create('Bigger', 5);
  const key = (await t0.app.services.apiKeys.create(other, { name: 'k' })).token;
  for (let i = 0; i < 3; i++) await t0.request('GET', '/v1/apiKeys');
  t.is((await t0.request('GET', '/v1/apiKeys')).status, 429);
  const res = await t0.request('GET', '/v1/apiKeys', { key });
  t.is(res.status, 200);
  t.is(res.headers.get('x-ratelimit-limit'), '5');
});

test.serial('a 404 or 405 with a valid key counts and carries the headers; with a bad key it is still the 404 or 405', async (t) => {
  clock.set(Date.UTC(2026, 10, 22, 12, 0, 20, 0));
  const noRoute = await t0.request('GET', '/v1/nosuch');
  t.is(noRoute.status, 404);
  t.is(noRoute.headers.get('x-ratelimit-remaining'), '2');
  const wrongMethod = await t0.request('DELETE', '/api/v1/emails');
  t.is(wrongMethod.status, 405);
  t.is(wrongMethod.headers.get('x-ratelimit-remaining'), '1');
  t.is((await t0.request('GET', '/v1/apiKeys')).headers.get('x-ratelimit-remaining'), '0');
  const limited = await t0.request('GET', '/v1/nosuch');
  t.is(limited.status, 429);
  const badKey = await t0.request('GET', '/v1/nosuch', { key: 'ph_nope_nope' });
  t.is(badKey.status, 404);
  t.is(badKey.headers.get('x-ratelimit-limit'), null);
});
