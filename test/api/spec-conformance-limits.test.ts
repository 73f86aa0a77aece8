import { request as httpRequest } from 'node:http';
import test from 'ava';
import { startTestApp, type TestApp, type TestResponse } from '../helpers/test-app.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';

// Probes of the spec's Limits and Pagination sections through HTTP, each limit from both sides
// (the largest value accepted, the next one refused with 400 BAD_REQUEST), where the suites of
// the features check only the refusal. Sends are scheduled far ahead: nothing is delivered.

const BODY_LIMIT = 256 * 1024;
let t0: TestApp;
let from: string;
test.before(async () => {
  t0 = await startTestApp({ overrides: { http: { bodyLimitBytes: BODY_LIMIT } } });
  const domain = await addVerifiedDomain(t0, 'limits.dev');
  from = `Limits <hello@${domain.name}>`;
});
test.after.always(async () => {
  await t0?.close();
});

const LATER = '2099-01-01T00:00:00.000Z';
const send = (extra: Record<string, unknown> = {}) => ({ from, to: 'someone@example.net', subject: 'Limits', text: 'Hello', scheduledAt: LATER, ...extra });

function isBadRequest(t: { is: (a: unknown, b: unknown, m?: string) => void; regex: (s: string, r: RegExp, m?: string) => void }, res: TestResponse, field: RegExp, what: string) {
  t.is(res.status, 400, `${what}: ${JSON.stringify(res.body)}`);
  t.is(res.body?.error?.code, 'BAD_REQUEST', what);
  t.regex(String(res.body?.error?.message), field, what);
}

test('Limits, Tags: 10 per message of 1 to 64 characters each are accepted and kept; the list filter takes a 64-character tag', async (t) => {
  const tags = Array.from({ length: 10 }, (_, i) => `${i}`.padEnd(64, 'x'));
  tags[9] = 'y'; // 1 character
  const res = await t0.request('POST', '/v1/emails', { body: send({ tags }) });
  t.is(res.status, 200, JSON.stringify(res.body));
  const got = await t0.request('GET', `/v1/emails/${res.body.emailId}`);
  t.deepEqual([...got.body.tags].sort(), [...tags].sort());
  const listed = await t0.request('GET', `/v1/emails?tag=${tags[0]}&tag=y`);
  t.is(listed.status, 200);
  t.deepEqual(listed.body.data.map((e: any) => e.id), [res.body.emailId]);
  isBadRequest(t, await t0.request('GET', `/v1/emails?tag=${'x'.repeat(65)}`), /^tag: /, '65-character tag filter');
});

test('Limits, Attachments: 10 per message are accepted, 11 refused', async (t) => {
  const attachments = Array.from({ length: 10 }, (_, i) => ({ filename: `f${i}.txt`, content: Buffer.from(`file ${i}`).toString('base64') }));
  const res = await t0.request('POST', '/v1/emails', { body: send({ attachments }) });
  t.is(res.status, 200, JSON.stringify(res.body));
  isBadRequest(t, await t0.request('POST', '/v1/emails', { body: send({ attachments: [...attachments, attachments[0]] }) }), /^attachments: /, '11 attachments');
});

test('Limits, Idempotency key: 1 and 256 characters are accepted, 257 is refused; on the batch route too', async (t) => {
  for (const [path, body, letter] of [['/v1/emails', send(), 'a'], ['/v1/emails/batch', [send()], 'b']] as const) {
    for (const key of [letter, letter.repeat(256)]) {
      const res = await t0.request('POST', path, { body, headers: { 'idempotency-key': key } });
      t.is(res.status, 200, `${path} key of ${key.length}: ${JSON.stringify(res.body)}`);
    }
  }
  for (const [path, body] of [['/v1/emails', send()], ['/v1/emails/batch', [send()]]] as const) {
    isBadRequest(t, await t0.request('POST', path, { body, headers: { 'idempotency-key': 'k'.repeat(257) } }), /^Idempotency-Key: /, `${path} 257`);
  }
});

test.serial('Limits, Batch size: 100 messages are accepted, in order, and count as one request', async (t) => {
  const items = Array.from({ length: 100 }, (_, i) => send({ subject: `batch item ${i}` }));
  const before = await t0.request('GET', '/v1/apiKeys');
  const res = await t0.request('POST', '/v1/emails/batch', { body: items });
  t.is(res.status, 200, JSON.stringify(res.body).slice(0, 300));
  t.is(res.body.data.length, 100);
  t.is(new Set(res.body.data.map((d: any) => d.emailId)).size, 100);
  t.is((await t0.request('GET', `/v1/emails/${res.body.data[99].emailId}`)).body.subject, 'batch item 99');
  // The window is a second: the remaining count fell by one for the batch (and one for the list call before it).
  const remainingBefore = Number(before.headers.get('x-ratelimit-remaining'));
  const remainingAfter = Number(res.headers.get('x-ratelimit-remaining'));
  if (before.headers.get('x-ratelimit-reset') === res.headers.get('x-ratelimit-reset')) t.is(remainingAfter, remainingBefore - 1);
  isBadRequest(t, await t0.request('POST', '/v1/emails/batch', { body: [...items, send()] }), /at most 100/, '101 items');
});

test.serial('Pagination, emails: GET /v1/emails defaults to 50 per page and takes up to 100', async (t) => {
  // The serial batch test above stored 100 emails; top up to make sure there are more than 100.
  await t0.request('POST', '/v1/emails/batch', { body: Array.from({ length: 10 }, () => send()) });
  const first = await t0.request('GET', '/v1/emails');
  t.is(first.status, 200);
  t.true(first.body.count > 100);
  t.is(first.body.data.length, 50, 'default limit 50');
  const second = await t0.request('GET', '/v1/emails?page=2');
  t.is(second.body.data.length, 50);
  t.deepEqual(new Set([...first.body.data, ...second.body.data].map((e: any) => e.id)).size, 100, 'pages do not overlap');
  t.is((await t0.request('GET', '/v1/emails?limit=100')).body.data.length, 100);
  isBadRequest(t, await t0.request('GET', '/v1/emails?limit=101'), /^limit: /, 'limit 101');
  isBadRequest(t, await t0.request('GET', '/v1/emails?limit=0'), /^limit: /, 'limit 0');
});

test.serial('Pagination, page-numbered lists: default 25, at most 100, the envelope counts and hasMore', async (t) => {
  // Enough items in each list: templates (5 starters + 100), suppressions, a book's contacts and
  // a segment of them, campaigns.
  for (let i = 0; i < 100; i++) await t0.request('POST', '/v1/templates', { body: { name: `Paged ${i}`, subject: 's' } });
  await t0.request('POST', '/v1/suppressions/bulk', { body: { emails: Array.from({ length: 105 }, (_, i) => `paged${i}@example.net`) } });
  const book = (await t0.request('POST', '/v1/contactBooks', { body: { name: 'Paged' } })).body.id;
  const bulk = await t0.request('POST', `/v1/contactBooks/${book}/contacts/bulk`, { body: Array.from({ length: 105 }, (_, i) => ({ email: `c${i}@example.net` })) });
  t.is(bulk.status, 200, JSON.stringify(bulk.body));
  const segment = (await t0.request('POST', '/v1/segments', { body: { name: 'All', contactBookId: book, filters: { match: 'all', conditions: [{ field: 'email', op: 'contains', value: '@' }] } } })).body;
  t.truthy(segment.id, JSON.stringify(segment));
  for (let i = 0; i < 26; i++) {
    const c = await t0.request('POST', '/v1/campaigns', { body: { name: `Paged ${i}`, from, subject: 's', contactBookId: book, html: '<p>x</p>' } });
    t.is(c.status, 200, JSON.stringify(c.body));
  }
  const lists: [string, string, number][] = [
    ['/v1/templates', 'templates', 105],
    ['/v1/suppressions', 'suppressions', 105],
    [`/v1/segments/${segment.id}/contacts`, 'contacts', 105],
    ['/v1/campaigns', 'campaigns', 26],
  ];
  for (const [path, key, atLeast] of lists) {
    const page = await t0.request('GET', path);
    t.is(page.status, 200, path);
    t.is(page.body[key].length, 25, `${path}: default limit 25`);
    t.like(page.body, { page: 1, limit: 25, hasMore: true }, path);
    t.true(page.body.total >= atLeast, path);
    t.is(page.body.totalPage, Math.ceil(page.body.total / 25), path);
    if (atLeast > 100) t.is((await t0.request('GET', `${path}?limit=100`)).body[key].length, 100, `${path}: limit 100`);
    isBadRequest(t, await t0.request('GET', `${path}?limit=101`), /^limit: /, `${path}: limit 101`);
    const last = await t0.request('GET', `${path}?page=${page.body.totalPage}`);
    t.false(last.body.hasMore, `${path}: the last page has no more`);
  }
  // The contacts of a book are a bare array with the same page size.
  const contacts = await t0.request('GET', `/v1/contactBooks/${book}/contacts`);
  t.true(Array.isArray(contacts.body));
  t.is(contacts.body.length, 25, 'contacts: default limit 25');
  t.is((await t0.request('GET', `/v1/contactBooks/${book}/contacts?limit=100`)).body.length, 100);
  isBadRequest(t, await t0.request('GET', `/v1/contactBooks/${book}/contacts?limit=101`), /^limit: /, 'contacts: limit 101');
});

test('Limits, Domain id: an integer 1 to 2147483647 on every domain path', async (t) => {
  const paths: [string, string, unknown?][] = [
    ['GET', '/v1/domains/:id'],
    ['PATCH', '/v1/domains/:id', { openTracking: true }],
    ['DELETE', '/v1/domains/:id'],
    ['PUT', '/v1/domains/:id/verify'],
  ];
  for (const [method, template, body] of paths) {
    for (const id of ['0', '-1', '2147483648', '99999999999', '1.5', '1e3', 'abc', '+1', '%201']) {
      const res = await t0.request(method, template.replace(':id', id), body === undefined ? {} : { body });
      isBadRequest(t, res, /^id: must be an integer between 1 and 2147483647/, `${method} ${template} ${id}`);
    }
    const max = await t0.request(method, template.replace(':id', '2147483647'), body === undefined ? {} : { body });
    t.is(max.status, 404, `${method} ${template} 2147483647`);
    t.is(max.body.error.code, 'NOT_FOUND');
  }
  // API key ids are integers too (spec, API keys: "path id integer").
  for (const id of ['0', '2147483648', 'abc']) isBadRequest(t, await t0.request('DELETE', `/v1/apiKeys/${id}`), /^apiKeyId: /, `DELETE /v1/apiKeys/${id}`);
  t.is((await t0.request('DELETE', '/v1/apiKeys/2147483647')).status, 404);
});

/** A request whose body is sent chunked, without a Content-Length. */
function chunked(path: string, bytes: number): Promise<{ status: number; headers: Record<string, unknown>; body: any }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${t0.baseUrl}${path}`, { method: 'POST', headers: { authorization: `Bearer ${t0.key}`, 'content-type': 'application/json', 'transfer-encoding': 'chunked' } }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: JSON.parse(text) }));
    });
    req.on('error', reject);
    const chunk = 'x'.repeat(16 * 1024);
    req.write('{"name":"');
    for (let sent = 0; sent < bytes; sent += chunk.length) req.write(chunk);
    req.end('"}');
  });
}

test('Limits, Rate-limit headers: on every answer to a valid key, errors included (400, 403, 404, 405, 409, 413)', async (t) => {
  const sendingKey = (await t0.request('POST', '/v1/apiKeys', { body: { name: 'sender', permission: 'SENDING' } })).body.token;
  await t0.request('POST', '/v1/emails', { body: send(), headers: { 'idempotency-key': 'headers-409' } });
  const answers: [string, number, TestResponse][] = [
    ['bad body', 400, await t0.request('POST', '/v1/emails', { body: send({ to: 'nobody' }) })],
    ['malformed JSON', 400, await t0.request('POST', '/v1/emails', { rawBody: '{"to":' })],
    ['bad query', 400, await t0.request('GET', '/v1/emails?limit=abc')],
    ['NUL in the query', 400, await t0.request('GET', '/v1/emails?tag=a%00b')],
    ['SENDING key on a FULL route', 403, await t0.request('GET', '/v1/domains', { key: sendingKey })],
    ['missing resource', 404, await t0.request('GET', '/v1/emails/em_missing')],
    ['no such route', 404, await t0.request('GET', '/v1/nothing-here')],
    ['NUL in the path', 404, await t0.request('GET', '/v1/emails/em_%00x')],
    ['wrong method', 405, await t0.request('PUT', '/v1/emails')],
    ['idempotency conflict', 409, await t0.request('POST', '/v1/emails', { body: send({ subject: 'other' }), headers: { 'idempotency-key': 'headers-409' } })],
    ['body over the limit', 413, await t0.request('POST', '/v1/apiKeys', { body: { name: 'x'.repeat(BODY_LIMIT + 1) } })],
  ];
  const without: string[] = [];
  for (const [what, status, res] of answers) {
    t.is(res.status, status, `${what}: ${JSON.stringify(res.body)}`);
    t.is(typeof res.body.error?.code, 'string', what);
    if (!['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset'].every((h) => /^\d+$/.test(res.headers.get(h) ?? ''))) without.push(what);
  }
  t.deepEqual(without, [], 'answers without the rate-limit headers');
  const streamed = await chunked('/v1/apiKeys', BODY_LIMIT + 1);
  t.is(streamed.status, 413);
  t.is(streamed.body.error.code, 'BAD_REQUEST');
  t.regex(String(streamed.headers['x-ratelimit-remaining']), /^\d+$/, 'a chunked body over the limit');
});
