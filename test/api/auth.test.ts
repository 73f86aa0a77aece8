import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { twoTeams } from '../helpers/two-teams.js';

let t0: TestApp;
test.before(async () => {
  t0 = await startTestApp();
});
test.after.always(async () => {
  await t0?.close();
});

test('a missing key is 401 UNAUTHORIZED with the spec error body', async (t) => {
  const res = await t0.request('GET', '/v1/apiKeys', { key: null });
  t.is(res.status, 401);
  t.is(res.body.error.code, 'UNAUTHORIZED');
  t.is(typeof res.body.error.message, 'string');
});

test('an unknown or malformed key is 401', async (t) => {
  for (const key of ['nonsense', 'ph_abcdefabcdef_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', `${t0.key}x`]) {
    const res = await t0.request('GET', '/v1/apiKeys', { key });
    t.is(res.status, 401, key);
    t.is(res.body.error.code, 'UNAUTHORIZED');
  }
  const empty = await t0.request('GET', '/v1/apiKeys', { key: null, headers: { authorization: 'Bearer' } });
  t.is(empty.status, 401);
});

test('a created key works, is shown once, and is listed without its secret', async (t) => {
  const created = await t0.request('POST', '/v1/apiKeys', { body: { name: 'ci', permission: 'FULL' } });
  t.is(created.status, 200);
  t.regex(created.body.token, /^ph_[0-9a-z]{12}_[A-Za-z0-9_-]{32}$/);
  const list = await t0.request('GET', '/v1/apiKeys', { key: created.body.token });
  t.is(list.status, 200);
  const row = list.body.find((k: any) => k.id === created.body.id);
  t.truthy(row);
  t.is(row.token, undefined);
  // The secret is base64url and may itself contain '_': cut the prefix rather than split.
  t.false(JSON.stringify(list.body).includes(created.body.token.replace(/^ph_[0-9a-z]{12}_/, '')));
  t.regex(row.partialKey, /^ph_.+\.\.\..{3}$/);
});

test('revocation is immediate', async (t) => {
  const created = await t0.request('POST', '/v1/apiKeys', { body: { name: 'short-lived' } });
  t.is((await t0.request('GET', '/v1/apiKeys', { key: created.body.token })).status, 200);
  const del = await t0.request('DELETE', `/v1/apiKeys/${created.body.id}`);
  t.deepEqual(del.body, { id: created.body.id, success: true, message: 'API key deleted' });
  const after = await t0.request('GET', '/v1/apiKeys', { key: created.body.token });
  t.is(after.status, 401);
  t.is((await t0.request('DELETE', `/v1/apiKeys/${created.body.id}`)).status, 404);
});

test('a SENDING key is 403 on management endpoints', async (t) => {
  const created = await t0.request('POST', '/v1/apiKeys', { body: { name: 'sender', permission: 'SENDING' } });
  const res = await t0.request('GET', '/v1/apiKeys', { key: created.body.token });
  t.is(res.status, 403);
  t.is(res.body.error.code, 'FORBIDDEN');
  const create = await t0.request('POST', '/v1/apiKeys', { key: created.body.token, body: { name: 'escalate' } });
  t.is(create.status, 403);
});

test('api key creation validates its body', async (t) => {
  const bad = await t0.request('POST', '/v1/apiKeys', { body: { name: '' } });
  t.is(bad.status, 400);
  t.is(bad.body.error.code, 'BAD_REQUEST');
  t.regex(bad.body.error.message, /name/);
  const perm = await t0.request('POST', '/v1/apiKeys', { body: { name: 'x', permission: 'ROOT' } });
  t.is(perm.status, 400);
  t.regex(perm.body.error.message, /permission/);
  const unknown = await t0.request('POST', '/v1/apiKeys', { body: { name: 'x', admin: true } });
  t.is(unknown.status, 400);
  const badId = await t0.request('DELETE', '/v1/apiKeys/abc');
  t.is(badId.status, 400);
});

test('a key of another team cannot revoke this team\'s keys', async (t) => {
  const other = (await twoTeams(t0)).b.key;
  const mine = await t0.request('POST', '/v1/apiKeys', { body: { name: 'mine' } });
  const res = await t0.request('DELETE', `/v1/apiKeys/${mine.body.id}`, { key: other });
  t.is(res.status, 404);
  const list = await t0.request('GET', '/v1/apiKeys', { key: other });
  t.false(list.body.some((k: any) => k.id === mine.body.id));
});
