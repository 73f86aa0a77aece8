import test from 'ava';
import { sql } from 'kysely';
import { createIcuTestDatabase, dropTestDatabase, testStoreKind } from '../helpers/pg-databases.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { matches, type Cond, type Group, type OracleContact, type PropertyValue } from './helpers/filter-oracle.js';

// gt/gte/lt/lte against text pick the same contacts on both stores: text orders by code point
// (UTF-8 bytes, SQLite's BINARY), whatever the database's default collation, and a property
// holding a JSON number or boolean sorts before any text, as json_extract's typed value does on
// SQLite. On PostgreSQL the app runs on a database whose default collation is ICU's en-US ("a" <
// "B" there, "B" < "a" by bytes), which the test server's C locale would hide.

let app: TestApp;
let icuUrl: string | undefined;
let bookId: string;
let contacts: OracleContact[];

const TEXTS = ['apple', 'Banana', 'cherry', 'Zoo', 'éclair', 'Éclair', '42', '-', ''];
const TYPED: PropertyValue[] = [42, -5, 1.5, true, false, null];

async function must(method: string, path: string, body?: unknown): Promise<any> {
  const res = await app.request(method, path, { body });
  if (res.status !== 200) throw new Error(`${method} ${path} -> ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

test.before(async () => {
  icuUrl = testStoreKind() === 'postgres' ? await createIcuTestDatabase() : undefined;
  app = await startTestApp(icuUrl ? { overrides: { store: { url: icuUrl } } } : {});
  bookId = (await must('POST', '/v1/contactBooks', { name: 'fruit' })).id;
  // The same text as a first name and as a property; one contact without either.
  const rows = [...TEXTS.map((v, i) => ({ email: `t${i}@example.net`, firstName: v, properties: { p: v } })), { email: 'none@example.net' }];
  await must('POST', `/v1/contactBooks/${bookId}/contacts/bulk`, rows);
  // JSON numbers, booleans and null: the API keeps every property as text, a store may hold them.
  for (const [i, v] of TYPED.entries()) {
    await must('POST', `/v1/contactBooks/${bookId}/contacts`, { email: `j${i}@example.net`, properties: { p: 'placeholder' } });
    await app.app.store.db.updateTable('contacts').set({ properties_json: JSON.stringify({ p: v }) }).where('email', '=', `j${i}@example.net`).execute();
  }
  contacts = await must('GET', `/v1/contactBooks/${bookId}/contacts?limit=100`);
});
test.after.always(async () => {
  await app?.close();
  if (icuUrl) await dropTestDatabase(icuUrl);
});

/** The segment's members, and what SQLite's rules select with its filter as stored (normalised: "4" is a number). */
async function select(condition: Cond): Promise<{ got: string[]; want: string[] }> {
  const seg = await must('POST', '/v1/segments', { name: 'order', contactBookId: bookId, filters: { match: 'all', conditions: [condition] } });
  const res = await must('GET', `/v1/segments/${seg.id}/contacts?limit=100`);
  await must('DELETE', `/v1/segments/${seg.id}`);
  const want = contacts.filter((c) => matches(c, seg.filters as Group)).map((c) => c.email);
  return { got: (res.contacts as OracleContact[]).map((c) => c.email).sort(), want: want.sort() };
}
const members = async (condition: Cond) => (await select(condition)).got;
const emailsOf = (texts: string[], typed: PropertyValue[] = []) =>
  [...texts.map((v) => `t${TEXTS.indexOf(v)}@example.net`), ...typed.map((v) => `j${TYPED.indexOf(v)}@example.net`)].sort();

test('on PostgreSQL the database orders text by its locale, not by bytes (else this test proves nothing)', async (t) => {
  if (!icuUrl) return t.pass('SQLite orders by bytes');
  const r = await sql<{ v: boolean }>`select ('a' < 'B') as v`.execute(app.app.store.db);
  t.true(r.rows[0]!.v);
});

test('properties order against text by code point, numbers and booleans before any text, null and missing never', async (t) => {
  t.deepEqual(await members({ field: 'properties.p', op: 'gt', value: 'b' }), emailsOf(['cherry', 'éclair', 'Éclair']));
  t.deepEqual(await members({ field: 'properties.p', op: 'lt', value: 'apple' }), emailsOf(['Banana', 'Zoo', '42', '-', ''], [42, -5, 1.5, true, false]));
  t.deepEqual(await members({ field: 'properties.p', op: 'gte', value: 'Zoo' }), emailsOf(['apple', 'cherry', 'Zoo', 'éclair', 'Éclair']));
  t.deepEqual(await members({ field: 'properties.p', op: 'lte', value: '' }), emailsOf([''], [42, -5, 1.5, true, false]));
  t.deepEqual(await members({ field: 'properties.p', op: 'gt', value: 'true' }), emailsOf(['éclair', 'Éclair']));
});

test('a property holding a JSON boolean reads as 1 or 0, as json_extract gives it on SQLite', async (t) => {
  t.deepEqual(await members({ field: 'properties.p', op: 'gt', value: 0 }), emailsOf(['42'], [42, 1.5, true]));
  t.deepEqual(await members({ field: 'properties.p', op: 'lte', value: 0 }), emailsOf([], [-5, false]));
  t.deepEqual(await members({ field: 'properties.p', op: 'startsWith', value: '1' }), emailsOf([], [1.5, true]));
  t.deepEqual(await members({ field: 'properties.p', op: 'contains', value: 'e' }), emailsOf(['apple', 'cherry']));
  t.deepEqual(await members({ field: 'properties.p', op: 'exists' }), emailsOf(TEXTS.filter((v) => v !== ''), [42, -5, 1.5, true, false]));
});

test('every order op against every text agrees with SQLite\'s rules, for properties and for columns', async (t) => {
  for (const field of ['properties.p', 'firstName']) {
    for (const op of ['gt', 'gte', 'lt', 'lte']) {
      for (const value of ['b', 'B', 'apple', 'Banana', 'Zoo', 'z', 'é', 'É', 'true', 'false', '-', '', '4', '1', '0.5']) {
        const c = { field, op, value };
        const { got, want } = await select(c);
        t.deepEqual(got, want, JSON.stringify(c));
      }
    }
  }
});
