import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

// Probes of the spec's Domains endpoints table: PUT /v1/domains/{id}/verify and DELETE
// /v1/domains/{id} answer "403 if the key lacks access; 404 if not found".

let t0: TestApp;
test.before(async () => {
  t0 = await startTestApp();
});
test.after.always(async () => {
  await t0?.close();
});

test('Domains, verify and delete: 403 FORBIDDEN when the key lacks access to the domain (a SENDING key, a key bound to another domain), 404 NOT_FOUND when there is none', async (t) => {
  const mine = (await t0.request('POST', '/v1/domains', { body: { name: 'access-mine.dev', region: 'r' } })).body;
  const other = (await t0.request('POST', '/v1/domains', { body: { name: 'access-other.dev', region: 'r' } })).body;
  const bound = (await t0.request('POST', '/v1/apiKeys', { body: { name: 'bound', domainId: mine.id } })).body.token;
  const sending = (await t0.request('POST', '/v1/apiKeys', { body: { name: 'sending', permission: 'SENDING' } })).body.token;
  for (const [method, path] of [['PUT', `/v1/domains/${other.id}/verify`], ['DELETE', `/v1/domains/${other.id}`]] as const) {
    for (const [who, key] of [['a key bound to another domain', bound], ['a SENDING key', sending]] as const) {
      const res = await t0.request(method, path, { key });
      t.is(res.status, 403, `${method} ${path} with ${who}: ${JSON.stringify(res.body)}`);
      t.is(res.body.error.code, 'FORBIDDEN');
    }
    const missing = await t0.request(method, path.replace(String(other.id), '2147483647'));
    t.is(missing.status, 404, `${method} of a missing domain`);
    t.is(missing.body.error.code, 'NOT_FOUND');
  }
  // The other domain is untouched, and the bound key verifies its own.
  t.is((await t0.request('GET', `/v1/domains/${other.id}`)).status, 200);
  t.is((await t0.request('PUT', `/v1/domains/${mine.id}/verify`, { key: bound })).status, 200);
});
