import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

// Property values at the edges of what the stores read: numbers beyond a double's range in a
// numeric comparison, and JSON text with an unpaired surrogate, which PostgreSQL's jsonb (the
// segment filters read properties through it) refuses. A segment's members are the same on
// both stores, and never a 500.

let t0: TestApp;
let bookId: string;

test.before(async () => {
  t0 = await startTestApp();
  bookId = (await t0.request('POST', '/v1/contactBooks', { body: { name: 'Extremes' } })).body.id;
  const contacts = [
    { email: 'huge@example.org', firstName: 'Huge', properties: { n: '1' + '0'.repeat(400) } },
    { email: 'negative@example.org', firstName: 'Negative', properties: { n: '-1' + '0'.repeat(400) } },
    { email: 'tiny@example.org', firstName: 'Tiny', properties: { n: '0.' + '0'.repeat(400) + '1' } },
    { email: 'plain@example.org', firstName: 'Plain', properties: { n: '7.5', plan: 'pro' } },
    // The longest a value may be: every digit counts.
    { email: 'long@example.org', firstName: 'Long', properties: { n: '9'.repeat(2000) } },
  ];
  for (const c of contacts) {
    const res = await t0.request('POST', `/v1/contactBooks/${bookId}/contacts`, { body: c });
    if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  }
});
test.after.always(async () => {
  await t0?.close();
});

async function members(conditions: unknown[]): Promise<string[]> {
  const seg = await t0.request('POST', '/v1/segments', { body: { name: 's', contactBookId: bookId, filters: { match: 'all', conditions } } });
  if (seg.status !== 200) throw new Error(JSON.stringify(seg.body));
  const res = await t0.request('GET', `/v1/segments/${seg.body.id}/contacts?limit=100`);
  if (res.status !== 200) throw new Error(`${res.status} ${JSON.stringify(res.body)}`);
  return res.body.contacts.map((c: { firstName: string }) => c.firstName).sort();
}

test('numbers beyond a double compare as infinity, and below its smallest as zero', async (t) => {
  t.deepEqual(await members([{ field: 'properties.n', op: 'gt', value: 5 }]), ['Huge', 'Long', 'Plain']);
  t.deepEqual(await members([{ field: 'properties.n', op: 'gte', value: 1.7976931348623157e308 }]), ['Huge', 'Long']);
  t.deepEqual(await members([{ field: 'properties.n', op: 'lt', value: -1e300 }]), ['Negative']);
  t.deepEqual(await members([{ field: 'properties.n', op: 'gt', value: 0 }]), ['Huge', 'Long', 'Plain']);
  t.deepEqual(await members([{ field: 'properties.n', op: 'lte', value: 0 }]), ['Negative', 'Tiny']);
  t.deepEqual(await members([{ field: 'properties.n', op: 'lt', value: 8 }, { field: 'properties.n', op: 'gt', value: 7 }]), ['Plain']);
});

test('an unpaired surrogate in a JSON body is refused with a 400 naming the field, and the book stays usable', async (t) => {
  const cases: [string, string, string, RegExp][] = [
    ['POST', `/v1/contactBooks/${bookId}/contacts`, '{"email":"lone@example.org","properties":{"s":"a\\ud800b"}}', /^properties\.s: .*unpaired surrogate/],
    ['POST', `/v1/contactBooks/${bookId}/contacts`, '{"email":"lone2@example.org","firstName":"\\udc00"}', /^firstName: .*unpaired surrogate/],
    ['POST', `/v1/contactBooks/${bookId}/contacts/bulk`, '[{"email":"lone3@example.org","properties":{"x":"\\uDBFF"}}]', /^\[0\]\.properties\.x: .*unpaired surrogate/],
    ['POST', '/v1/suppressions', '{"email":"lone4@example.org","source":"\\ud83d"}', /^source: .*unpaired surrogate/],
  ];
  for (const [method, path, rawBody, message] of cases) {
    const res = await t0.request(method, path, { rawBody });
    t.is(res.status, 400, `${path} ${rawBody}: ${JSON.stringify(res.body)}`);
    t.is(res.body.error.code, 'BAD_REQUEST');
    t.regex(res.body.error.message, message);
  }
  // A pair, escaped or not, is a character like any other.
  const paired = await t0.request('POST', `/v1/contactBooks/${bookId}/contacts`, { rawBody: '{"email":"pair@example.org","firstName":"Pair","properties":{"s":"\\ud83d\\ude00 \ud83d\ude00","plan":"pro"}}' });
  t.is(paired.status, 200, JSON.stringify(paired.body));
  const got = await t0.request('GET', `/v1/contactBooks/${bookId}/contacts/${paired.body.contactId}`);
  t.is(got.body.properties.s, '\u{1F600} \u{1F600}');
  t.deepEqual(await members([{ field: 'properties.plan', op: 'eq', value: 'pro' }]), ['Pair', 'Plain']);
});

test('a filter numeral beyond a double (which JSON cannot store as a number) is refused with a 400, not stored to fail every read', async (t) => {
  for (const value of ['9'.repeat(400), '-' + '1'.repeat(310)]) {
    const seg = await t0.request('POST', '/v1/segments', { body: { name: 's', contactBookId: bookId, filters: { match: 'all', conditions: [{ field: 'properties.n', op: 'gt', value }] } } });
    t.is(seg.status, 400, JSON.stringify(seg.body));
    t.regex(seg.body.error.message, /^filters\.conditions\[0\]\.value: /);
  }
  // Within range it is a number, however many digits it is written with.
  t.deepEqual(await members([{ field: 'properties.n', op: 'gt', value: '0'.repeat(400) + '7' }]), ['Huge', 'Long', 'Plain']);
});

test('a segment stored before that 400 with such a value (null in its JSON) reads as matching nobody on that condition, not as a 500', async (t) => {
  const seg = await t0.request('POST', '/v1/segments', { body: { name: 'old', contactBookId: bookId, filters: { match: 'any', conditions: [{ field: 'properties.n', op: 'gt', value: 5 }, { field: 'firstName', op: 'eq', value: 'Plain' }] } } });
  t.is(seg.status, 200);
  // As an older server stored "gt 999...9" (400 digits): JSON.stringify wrote the number as null.
  const filters = { match: 'any', conditions: [{ field: 'properties.n', op: 'gt', value: null }, { field: 'firstName', op: 'eq', value: 'Plain' }] };
  await t0.app.store.db.updateTable('segments').set({ filters_json: JSON.stringify(filters) }).where('id', '=', seg.body.id).execute();
  const res = await t0.request('GET', `/v1/segments/${seg.body.id}/contacts?limit=100`);
  t.is(res.status, 200, JSON.stringify(res.body));
  t.deepEqual(res.body.contacts.map((c: { firstName: string }) => c.firstName), ['Plain']);
});
