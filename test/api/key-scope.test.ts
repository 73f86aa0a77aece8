import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';

// A key's reach over HTTP, under both prefixes (docs/api.md, API keys and permissions): a key bound
// to a domain sends from that domain however its From is written, and from no other; a malformed
// Authorization header is the spec's 401, on the team API, the operator API and /metrics alike.

let t0: TestApp;
let bound: { token: string };

test.before(async () => {
  t0 = await startTestApp();
  await addVerifiedDomain(t0, 'sender.dev');
  const idn = await addVerifiedDomain(t0, 'bücher-keys.dev');
  bound = await t0.app.services.apiKeys.create(t0.teamId, { name: 'bound', permission: 'SENDING', domainId: idn.id });
});
test.after.always(async () => {
  await t0?.close();
});

test('a domain-bound key sends from its domain in any written form, under /v1 and /api/v1; another domain, a subdomain or a look-alike is 403 or 400, never sent', async (t) => {
  for (const prefix of ['/v1', '/api/v1']) {
    for (const from of ['Shop <shop@bücher-keys.dev>', 'SHOP@BÜCHER-KEYS.DEV', 'shop@xn--bcher-keys-9db.dev', '"Shop" <Shop@XN--BCHER-KEYS-9DB.DEV>']) {
      const res = await t0.request('POST', `${prefix}/emails`, { key: bound.token, body: { from, to: 'a@example.net', subject: 's', text: 't' } });
      t.is(res.status, 200, `${prefix} ${from}: ${JSON.stringify(res.body)}`);
    }
    for (const from of [
      'hello@sender.dev',
      'HELLO@SENDER.DEV',
      '"shop@bücher-keys.dev" <hello@sender.dev>',
      'shop@sub.bücher-keys.dev',
      'shop@bücher-keys.dev.evil.test',
      'shop@bücher-keys.dev, hello@sender.dev',
      'hello@sender.dev, shop@bücher-keys.dev',
    ]) {
      const res = await t0.request('POST', `${prefix}/emails`, { key: bound.token, body: { from, to: 'a@example.net', subject: 's', text: 't' } });
      t.true(res.status === 403 || res.status === 400, `${prefix} ${from}: ${res.status} ${JSON.stringify(res.body)}`);
      t.truthy(res.body?.error?.code, from);
    }
  }
  const listed = await t0.request('GET', '/api/v1/emails?limit=100', { key: bound.token });
  t.is(listed.status, 200);
  t.is(listed.body.data.length, 8, 'only the eight sends from its own domain');
});

test('malformed Authorization headers are the spec\'s 401 body on the team API, the operator API and /metrics; never a 500', async (t) => {
  const headers = [
    'Bearer',
    'Bearer ',
    'bearer x',
    'Basic dXNlcjpwYXNz',
    'Bearer a b',
    `Bearer ${'x'.repeat(8000)}`,
    `Bearer ph_${'a'.repeat(12)}_${'A'.repeat(8000)}`,
    'Bearer ph_ABCDEFABCDEF_AAAAAAAAAAAAAAAAAAAAAAAA',
    `Bearer ${t0.key.slice(0, -1)}`,
    `Token ${t0.key}`,
    `Bearer\t${t0.key}x`,
  ];
  for (const authorization of headers) {
    for (const path of ['/v1/domains', '/api/v1/emails', '/admin/v1/queue', '/v1/no-such-route', '/metrics']) {
      const res = await t0.request('GET', path, { key: null, headers: { authorization } });
      // /metrics takes only a Bearer as a key; another scheme is no key, and loopback needs none.
      const expected = path === '/v1/no-such-route' ? 404 : path === '/metrics' && !/^bearer/i.test(authorization) ? 200 : 401;
      if (expected === 200) {
        t.is(res.status, 200, `${path} ${authorization.slice(0, 40)}`);
        continue;
      }
      t.is(res.status, expected, `${path} ${authorization.slice(0, 40)}: ${JSON.stringify(res.body)}`);
      t.is(typeof res.body?.error?.message, 'string');
      t.false(JSON.stringify(res.body).includes(t0.key.slice(16, 40)), 'no key material in the body');
    }
  }
});
