import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

// store.statementTimeout (PostgreSQL): a filtered contact read served on behalf of a request
// that runs past it is cancelled by the server and answers the clear 422, never a 500, and
// leaves the connection and the data as they were; a normal request is unaffected.

const onPg = process.env.POSTHORN_TEST_STORE === 'postgres';
let t0: TestApp;
let bigBook: string;
let smallBook: string;

test.before(async () => {
  if (!onPg) return;
  t0 = await startTestApp({ overrides: { store: { statementTimeout: '100ms' } } });
  bigBook = (await t0.request('POST', '/v1/contactBooks', { body: { name: 'Big' } })).body.id;
  smallBook = (await t0.request('POST', '/v1/contactBooks', { body: { name: 'Small' } })).body.id;
  // 300 contacts of 100 properties of 2,000 characters: a 100-condition filter reads 60 MB of JSON.
  for (let i = 0; i < 300; i += 50) {
    const rows = Array.from({ length: 50 }, (_, j) => ({
      email: `m${i + j}@example.com`,
      properties: Object.fromEntries(Array.from({ length: 100 }, (_, k) => [`k${k}`, `${i + j}-${k}-`.padEnd(2000, 'abcdefghij')])),
    }));
    const res = await t0.request('POST', `/v1/contactBooks/${bigBook}/contacts/bulk`, { body: rows });
    if (res.status !== 200) throw new Error(JSON.stringify(res.body).slice(0, 300));
  }
  await t0.request('POST', `/v1/contactBooks/${smallBook}/contacts/bulk`, { body: [{ email: 'a@example.com', properties: { k1: 'yes' } }] });
});
test.after.always(async () => {
  await t0?.close();
});

const slowFilter = { match: 'any', conditions: Array.from({ length: 100 }, (_, k) => ({ field: `properties.k${k}`, op: 'contains', value: 'nomatch' })) };

test('a filtered read past store.statementTimeout answers 422 saying to narrow it; the next requests are served', async (t) => {
  if (!onPg) return t.pass('PostgreSQL only');
  const seg = await t0.request<{ id: string }>('POST', '/v1/segments', { body: { name: 'slow', contactBookId: bigBook, filters: slowFilter } });
  t.is(seg.status, 200);
  const res = await t0.request<{ error: { code: string; message: string } }>('GET', `/v1/segments/${seg.body.id}/contacts?limit=10`);
  t.is(res.status, 422, JSON.stringify(res.body).slice(0, 300));
  t.is(res.body.error.code, 'BAD_REQUEST');
  t.regex(res.body.error.message, /took too long.*narrow/);
  // The connection went back to the pool clean: normal reads and writes go on.
  const fast = await t0.request<{ id: string }>('POST', '/v1/segments', { body: { name: 'fast', contactBookId: smallBook, filters: { match: 'all', conditions: [{ field: 'properties.k1', op: 'eq', value: 'yes' }] } } });
  const small = await t0.request<{ total: number }>('GET', `/v1/segments/${fast.body.id}/contacts`);
  t.is(small.status, 200);
  t.is(small.body.total, 1);
  const created = await t0.request('POST', `/v1/contactBooks/${smallBook}/contacts`, { body: { email: 'b@example.com' } });
  t.is(created.status, 200);
  const { rows } = await (t0.app.store as { pool: { query(q: string): Promise<{ rows: { statement_timeout: string }[] }> } }).pool.query('show statement_timeout');
  t.is(rows[0]!.statement_timeout, '0', 'the timeout is set for the read only, never left on a pooled connection');
});
