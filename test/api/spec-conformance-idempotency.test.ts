import test from 'ava';
import { createIdempotencyRepository } from '../../src/store/repositories/idempotency-repository.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';

// Probes of the spec's idempotency rules (Endpoints, Emails: Idempotency 1-3; Errors 4) on both
// routes that take the header, POST /v1/emails and POST /v1/emails/batch, with the error code
// asserted. scheduling-retries.test.ts proves the single send's rules and the 24-hour expiry.

let t0: TestApp;
let from: string;
test.before(async () => {
  t0 = await startTestApp();
  from = `hello@${(await addVerifiedDomain(t0, 'idempotent.dev')).name}`;
});
test.after.always(async () => {
  await t0?.close();
});

const LATER = '2099-01-01T00:00:00.000Z';
const send = (extra: Record<string, unknown> = {}) => ({ from, to: 'someone@example.net', subject: 'Once', text: 'Hello', scheduledAt: LATER, ...extra });
// Bodies are made when a test runs, once the sending domain exists.
const ROUTES = [
  ['/v1/emails', () => send()],
  ['/v1/emails/batch', () => [send(), send({ to: 'other@example.net' })]],
] as const;

const count = async () => (await t0.request('GET', '/v1/emails?limit=1')).body.count as number;

for (const [path, bodyOf] of ROUTES) {
  test.serial(`Idempotency 3 / Errors 4: ${path} with a key whose first request is still in flight is 409 NOT_UNIQUE, and nothing is stored; once it completes, the retry goes through`, async (t) => {
    const body = bodyOf();
    // What a request being served leaves in the store: its claim of the key, in flight.
    const key = `in-flight ${path}`;
    const repo = createIdempotencyRepository(t0.app.store.db);
    t.deepEqual(await repo.begin(t0.teamId, key, 'the first request', Date.now(), 86_400_000), { kind: 'started' });
    const before = await count();
    const res = await t0.request('POST', path, { body, headers: { 'idempotency-key': key } });
    t.is(res.status, 409, JSON.stringify(res.body));
    t.is(res.body.error.code, 'NOT_UNIQUE');
    t.regex(res.body.error.message, /in progress; retry later/);
    t.is(await count(), before, 'nothing stored');
    // The first request failed and let the key go: the retry is served.
    await repo.abandon(t0.teamId, key);
    const retry = await t0.request('POST', path, { body, headers: { 'idempotency-key': key } });
    t.is(retry.status, 200, JSON.stringify(retry.body));
  });

  test.serial(`Idempotency 1 and 2: ${path} replays the same body written otherwise, and a different body is 409 NOT_UNIQUE`, async (t) => {
    const body = bodyOf();
    const key = `replay ${path}`;
    const first = await t0.request('POST', path, { body, headers: { 'idempotency-key': key } });
    t.is(first.status, 200);
    const before = await count();
    // The same body with its keys in reverse order and other whitespace.
    const reversed = (v: unknown): unknown => (Array.isArray(v) ? v.map(reversed) : Object.fromEntries(Object.entries(v as object).reverse()));
    const replay = await t0.request('POST', path, { rawBody: JSON.stringify(reversed(body), null, 3), headers: { 'idempotency-key': key } });
    t.is(replay.status, 200);
    t.deepEqual(replay.body, first.body);
    t.is(await count(), before, 'nothing sent again');
    const other = Array.isArray(body) ? [...body].reverse() : { ...body, subject: 'Twice' };
    const conflict = await t0.request('POST', path, { body: other, headers: { 'idempotency-key': key } });
    t.is(conflict.status, 409);
    t.is(conflict.body.error.code, 'NOT_UNIQUE');
    t.is(await count(), before);
  });
}

test.serial('Idempotency 2: a key used on one send route and then on the other is a different body, 409 NOT_UNIQUE', async (t) => {
  const single = await t0.request('POST', '/v1/emails', { body: send(), headers: { 'idempotency-key': 'both routes' } });
  t.is(single.status, 200);
  const batch = await t0.request('POST', '/v1/emails/batch', { body: [send()], headers: { 'idempotency-key': 'both routes' } });
  t.is(batch.status, 409);
  t.is(batch.body.error.code, 'NOT_UNIQUE');
});
