import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

let t0: TestApp;
test.before(async () => {
  t0 = await startTestApp({ overrides: { http: { bodyLimitBytes: 1024 } } });
});
test.after.always(async () => {
  await t0?.close();
});

test('unknown routes are 404 NOT_FOUND with the error body', async (t) => {
  for (const path of ['/v1/nothing', '/api/v1/nothing', '/elsewhere']) {
    const res = await t0.request('GET', path);
    t.is(res.status, 404, path);
    t.deepEqual(Object.keys(res.body.error).sort(), ['code', 'message']);
    t.is(res.body.error.code, 'NOT_FOUND');
  }
});

test('a known path with the wrong method is 405 METHOD_NOT_ALLOWED', async (t) => {
  const res = await t0.request('PATCH', '/v1/apiKeys');
  t.is(res.status, 405);
  t.is(res.body.error.code, 'METHOD_NOT_ALLOWED');
  t.regex(res.headers.get('allow') ?? '', /GET/);
});

test('malformed JSON is 400 BAD_REQUEST', async (t) => {
  const res = await t0.request('POST', '/v1/apiKeys', { rawBody: '{"name": ' });
  t.is(res.status, 400);
  t.is(res.body.error.code, 'BAD_REQUEST');
  t.regex(res.body.error.message, /JSON/);
});

test('a non-JSON content type is 400', async (t) => {
  const res = await t0.request('POST', '/v1/apiKeys', { rawBody: 'name=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  t.is(res.status, 400);
});

test('a body over the limit is 413 with code BAD_REQUEST', async (t) => {
  const res = await t0.request('POST', '/v1/apiKeys', { body: { name: 'x'.repeat(5000) } });
  t.is(res.status, 413);
  t.is(res.body.error.code, 'BAD_REQUEST');
});

test('/api/v1 is the same API as /v1', async (t) => {
  const a = await t0.request('GET', '/v1/apiKeys');
  const b = await t0.request('GET', '/api/v1/apiKeys');
  t.is(a.status, 200);
  t.is(b.status, 200);
  t.deepEqual(a.body, b.body);
});

test('a base URL written with a trailing slash reaches the API (the usesend-js SDK appends "/api/v1" to it)', async (t) => {
  const a = await t0.request('GET', '/api/v1/apiKeys');
  for (const path of ['//api/v1/apiKeys', '///v1/apiKeys']) {
    const b = await t0.request('GET', path);
    t.is(b.status, 200, path);
    t.deepEqual(b.body, a.body, path);
  }
  // Only the leading slashes of an API path are forgiven: elsewhere a path names what it names.
  t.is((await t0.request('GET', '//elsewhere')).status, 404);
  t.is((await t0.request('GET', '/api/v1//apiKeys')).status, 404);
});

test('JSON bodies are parsed on DELETE too', async (t) => {
  // The route ignores the body, but a malformed one must be rejected like on POST.
  const res = await t0.request('DELETE', '/v1/apiKeys/999999', { rawBody: '{bad' });
  t.is(res.status, 400);
});

test('GET /health needs no key and reports the store and listeners', async (t) => {
  const res = await t0.request('GET', '/health', { key: null });
  t.is(res.status, 200);
  t.is(res.body.status, 'ok');
  t.is(res.body.store, 'ok');
  t.is(typeof res.body.listeners.http.port, 'number');
});
