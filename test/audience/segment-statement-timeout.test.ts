import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { ConsoleClient, consoleUser } from '../console/helpers/console-client.js';

// store.statementTimeout (PostgreSQL): a filtered contact read served on behalf of a request
// that runs past it is cancelled by the server and answers the clear 422, never a 500, and
// leaves the connection and the data as they were; a normal request is unaffected. The other
// request-driven lists, searches and analytics (API and console) are bounded the same way: a
// statement kept waiting past the timeout (here by a lock another connection holds on the table
// it reads, so no large table is needed) answers the same 422. Serial: a lock held by one test
// would stop the reads of another.

const onPg = process.env.POSTHORN_TEST_STORE === 'postgres';
let t0: TestApp;
let bigBook: string;
let smallBook: string;
let webhookId: string;
let c: ConsoleClient;

test.before(async () => {
  if (!onPg) return;
  t0 = await startTestApp({ overrides: { store: { statementTimeout: '100ms' }, webhooks: { allowPrivate: true } } });
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
  const hook = await t0.request<{ id: string }>('POST', '/v1/webhooks', { body: { url: 'http://127.0.0.1:9/hook', eventTypes: ['email.sent'] } });
  if (hook.status !== 200) throw new Error(JSON.stringify(hook.body).slice(0, 300));
  webhookId = hook.body.id;
  await consoleUser(t0.app, 'op@timeout.dev', t0.teamId);
  c = new ConsoleClient(t0.baseUrl);
  await c.signIn('op@timeout.dev');
});
test.after.always(async () => {
  await t0?.close();
});

const slowFilter = { match: 'any', conditions: Array.from({ length: 100 }, (_, k) => ({ field: `properties.k${k}`, op: 'contains', value: 'nomatch' })) };

test.serial('a filtered read past store.statementTimeout answers 422 saying to narrow it; the next requests are served', async (t) => {
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

interface LockClient {
  query(q: string): Promise<unknown>;
  release(): void;
}

/** Runs `fn` while another connection holds `tables` locked: every read of them waits (and is cancelled at the timeout). */
async function whileLocked<T>(tables: string[], fn: () => Promise<T>): Promise<T> {
  const client = await (t0.app.store as { pool: { connect(): Promise<LockClient> } }).pool.connect();
  try {
    await client.query('begin');
    await client.query(`lock table ${tables.join(', ')} in access exclusive mode`);
    return await fn();
  } finally {
    await client.query('rollback');
    client.release();
  }
}

// Each read with the table it scans; none of them writes to it first (a write is never bounded).
// A book's contacts (plain list, search) are not here: the request's book lookup, which counts
// them, comes first and is shared with the engine's campaign runs, so it is not bounded.
const apiReads = (): [string, string[]][] => [
  ['/v1/emails', ['emails']],
  ['/v1/emails?tag=red&startDate=2020-01-01T00:00:00Z', ['emails']],
  ['/v1/contactBooks', ['contacts']],
  ['/v1/analytics/email-time-series?days=30', ['email_daily_stats']],
  ['/v1/analytics/reputation-metrics', ['email_daily_stats']],
  ['/v1/suppressions?search=example', ['suppressions']],
  ['/v1/campaigns?search=sale', ['campaigns']],
  ['/v1/webhooks', ['webhooks']],
  [`/v1/webhooks/${webhookId}/attempts`, ['webhook_attempts']],
  ['/v1/receivedEmails', ['received_emails']],
  ['/v1/tlsReports', ['received_tls_reports']],
  ['/v1/templates?search=x', ['templates']],
  ['/v1/segments', ['segments']],
];

test.serial('the lists, searches and analytics of the API past store.statementTimeout answer 422 saying to narrow it; unheld, they answer 200', async (t) => {
  if (!onPg) return t.pass('PostgreSQL only');
  for (const [path, tables] of apiReads()) {
    const res = await whileLocked(tables, () => t0.request<{ error: { code: string; message: string } }>('GET', path));
    t.is(res.status, 422, `${path}: ${JSON.stringify(res.body).slice(0, 300)}`);
    t.is(res.body.error.code, 'BAD_REQUEST', path);
    t.regex(res.body.error.message, /took too long.*narrow/, path);
    t.is((await t0.request('GET', path)).status, 200, path);
  }
  const { rows } = await (t0.app.store as { pool: { query(q: string): Promise<{ rows: { statement_timeout: string }[] }> } }).pool.query('show statement_timeout');
  t.is(rows[0]!.statement_timeout, '0');
});

test.serial('the console pages running the same reads show the 422 page saying to narrow it, never a 500', async (t) => {
  if (!onPg) return t.pass('PostgreSQL only');
  const pages: [string, string[]][] = [
    ['/console', ['email_daily_stats']],
    ['/console/emails', ['emails']],
    ['/console/contacts', ['contacts']],
    ['/console/suppressions?q=someone', ['suppressions']],
    ['/console/campaigns', ['campaigns']],
    ['/console/webhooks', ['webhooks']],
    [`/console/webhooks/${webhookId}`, ['webhook_attempts']],
    ['/console/templates', ['templates']],
    ['/console/segments', ['segments']],
    ['/console/received', ['received_emails']],
  ];
  for (const [path, tables] of pages) {
    const res = await whileLocked(tables, () => c.get(path));
    t.is(res.status, 422, `${path}: ${res.text.slice(0, 300)}`);
    t.regex(res.text, /took too long.*narrow/, path);
    t.is((await c.get(path)).status, 200, path);
  }
});
