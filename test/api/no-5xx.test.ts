import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

// Every API route, every method, with path parameters and bodies of the wrong shape and type:
// the answer is always a 4xx (or 2xx) with the spec's error body, never a 5xx. (The full
// property-based fuzz suite belongs to the proof issue; this is the quick sweep.)
let t0: TestApp;
test.before(async () => {
  t0 = await startTestApp();
});
test.after.always(async () => {
  await t0?.close();
});

const QUERIES = ['', '?page=0', '?page=abc&limit=-5', '?limit=1000000', '?page=1&page=2', '?status=NOPE&reason=X&days=9&domainId=abc&tag=&startDate=never&cursor=%FF%FE', '?search=%25%5F%5C&emails=a,b&ids=,'];
const PATH_VALUES = ['1', '0', '-1', 'x', '%00', '9'.repeat(30), 'em_' + 'a'.repeat(200), '%E2%98%83', '..%2F..', 'null'];
const BODIES: unknown[] = [undefined, null, {}, [], 'text', 42, true, { a: 1 }, [{}], { name: {} }, { email: ['x'] }, { to: 5, from: {}, subject: [] }, { filters: 'x' }, { url: 'javascript:alert(1)' }, { eventTypes: 'x' }, { versionNumber: -1 }, { scheduledAt: {} }, { contactIds: 'x' }, { emails: [1, 2] }, { '\u0000': '\ud800' }];

test('no route answers 5xx to malformed input', async (t) => {
  const routes = t0.app.routes;
  t.true(routes.length > 40);
  let requests = 0;
  for (const route of routes) {
    const paths = new Set<string>();
    for (const v of PATH_VALUES) paths.add('/v1' + route.path.replace(/:[A-Za-z]+/g, v));
    for (const base of paths) {
      for (const path of route.method === 'GET' ? QUERIES.map((q) => base + q) : [base])
      for (const body of route.method === 'GET' ? [undefined] : BODIES) {
        const res = await t0.request(route.method, path, body === undefined ? {} : { rawBody: JSON.stringify(body) });
        requests++;
        t.true(res.status < 500, `${route.method} ${path} ${JSON.stringify(body)} -> ${res.status} ${JSON.stringify(res.body)}`);
        if (res.status >= 400) t.true(typeof res.body?.error?.code === 'string' && typeof res.body?.error?.message === 'string', `${route.method} ${path}: ${JSON.stringify(res.body)}`);
      }
    }
  }
  t.log(`${requests} requests`);
});

const ADMIN_QUERIES = ['', '?limit=0', '?limit=abc&cursor=%FF%FE', '?cursor=q_zzz', '?cursor=' + 'A'.repeat(199), '?destination=%E2%98%83.example&teamId=99999999999999999999', '?destination=..&state=nope', '?campaignId=%20&teamId=-1', '?teamId=1&teamId=2', '?destination=' + 'a'.repeat(300)];
const ADMIN_BODIES: unknown[] = [
  ...BODIES,
  { destination: '..', minutes: 1, reason: 'x' },
  { teamId: 1e300, minutes: 1, reason: 'x' },
  { campaignId: 'c'.repeat(10_000), minutes: 1e300, reason: 'x' },
  { emailIds: ['x'.repeat(5000)], reason: '\u0000' },
  { emailIds: Array.from({ length: 2000 }, (_, i) => `em_${i}`), reason: 'r' },
  { destination: '\u2603.example', reason: 'x'.repeat(10_000) },
  { name: 'n'.repeat(10_000), rateLimit: -1, pool: 'nope' },
  { pool: {} },
];

test('no operator route answers 5xx to malformed input', async (t) => {
  const op = (await t0.app.services.operatorKeys.create('sweep')).token;
  let requests = 0;
  for (const route of t0.app.adminRoutes.filter((r) => r.access === 'operator')) {
    const paths = new Set<string>();
    for (const v of PATH_VALUES) paths.add('/admin/v1' + route.path.replace(/:[A-Za-z]+/g, v));
    for (const base of paths) {
      for (const path of route.method === 'GET' ? ADMIN_QUERIES.map((q) => base + q) : [base])
      for (const body of route.method === 'GET' ? [undefined] : ADMIN_BODIES) {
        const res = await t0.request(route.method, path, { key: op, ...(body === undefined ? {} : { rawBody: JSON.stringify(body) }) });
        requests++;
        t.true(res.status < 500, `${route.method} ${path} ${JSON.stringify(body)?.slice(0, 200)} -> ${res.status} ${JSON.stringify(res.body)}`);
        if (res.status >= 400) t.true(typeof res.body?.error?.code === 'string' && typeof res.body?.error?.message === 'string', `${route.method} ${path}: ${JSON.stringify(res.body)}`);
      }
    }
  }
  t.log(`${requests} requests`);
});
