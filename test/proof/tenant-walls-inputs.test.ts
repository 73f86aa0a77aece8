import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { twoTeams } from '../helpers/two-teams.js';
import { encodeIdCursor } from '../../src/core/id-cursor.js';
import { startWebhookReceiver, type WebhookReceiver } from '../webhooks/webhook-receiver.js';

// More of the tenant walls tried with the caller's own inputs (tenant-walls.test.ts has the
// searches by name, segment wildcards and the console's filters): suppression searches,
// segment fields and operators that name what a caller may not, page numbers out of range,
// and instants past the four-digit years, over two teams holding the same addresses. Every
// answer is an exact result set or the spec's 400.

let t0: TestApp;
let keyB: string;
let receiver: WebhookReceiver;
const ids: Record<string, any> = {};

const ADDRESSES = ['ann@example.net', 'x_y%z@example.net', 'zoe.case@example.net'];
/** An address at an internationalised domain, kept with its domain in ASCII (xn--) form. */
const IDN = 'bob@bücher.example';
/** A quoted local part holding a backslash: a suppression entry, not a contact. */
const BACKSLASHED = '"back\\\\slash"@example.net';

async function fill(key: string) {
  const book = (await t0.request('POST', '/v1/contactBooks', { body: { name: 'book' }, key })).body.id as string;
  const contacts: Record<string, string> = {};
  for (const email of [...ADDRESSES, IDN]) {
    const res = await t0.request('POST', `/v1/contactBooks/${book}/contacts`, { body: { email }, key });
    if (res.status !== 200) throw new Error(JSON.stringify(res.body));
    contacts[email] = res.body.contactId;
  }
  const sup = await t0.request('POST', '/v1/suppressions/bulk', { body: { emails: [...ADDRESSES, BACKSLASHED] }, key });
  if (sup.status !== 200) throw new Error(JSON.stringify(sup.body));
  return { book, contacts };
}

test.before(async () => {
  t0 = await startTestApp({ overrides: { webhooks: { allowPrivate: true } } });
  receiver = await startWebhookReceiver();
  keyB = (await twoTeams(t0, { a: { domains: ['acme.dev'] }, b: { domains: ['bolt.dev'] } })).b.key;
  ids.a = await fill(t0.key);
  ids.b = await fill(keyB);
  for (const key of [t0.key, keyB]) {
    const sent = await t0.request('POST', '/v1/emails', { body: { from: `x@${key === keyB ? 'bolt.dev' : 'acme.dev'}`, to: 'r@example.net', subject: 's', text: 'x' }, key });
    if (sent.status !== 200) throw new Error(JSON.stringify(sent.body));
  }
});
test.after.always(async () => {
  await t0?.close();
  await receiver?.close();
});

test('suppression searches match the text literally, in any case, and only the caller\'s entries', async (t) => {
  const search = async (q: string) => {
    const res = await t0.request('GET', `/v1/suppressions?limit=100&search=${encodeURIComponent(q)}`, { key: keyB });
    t.is(res.status, 200, JSON.stringify(res.body));
    return (res.body.suppressions as { email: string }[]).map((s) => s.email).sort();
  };
  const all = (await search('')).length;
  t.is(all, ADDRESSES.length + 1);
  t.deepEqual(await search('%'), ['x_y%z@example.net']);
  t.deepEqual(await search('_'), ['x_y%z@example.net']);
  t.deepEqual(await search('Y%Z'), ['x_y%z@example.net']);
  t.deepEqual(await search('ZOE.CASE'), ['zoe.case@example.net']);
  t.deepEqual(await search('\\'), [BACKSLASHED]);
  t.deepEqual(await search("' or 1=1 --"), []);
});

test('segment fields and operators that name columns, other tables or object internals are a 400, never a 500 or a wider audience', async (t) => {
  const bad: unknown[] = [
    { field: 'team_id', op: 'eq', value: '1' },
    { field: 'contacts.team_id', op: 'eq', value: '1' },
    { field: 'contact_book_id', op: 'exists' },
    { field: 'teams.name', op: 'exists' },
    { field: '__proto__', op: 'exists' },
    { field: 'constructor', op: 'exists' },
    { field: 'toString', op: 'exists' },
    { field: 'Email', op: 'eq', value: 'ann@example.net' },
    { field: 'properties', op: 'exists' },
    { field: 'properties.', op: 'exists' },
    { field: 'properties.a.b', op: 'exists' },
    { field: 'properties.a"] or 1=1 --', op: 'exists' },
    { field: 'email', op: 'like', value: '%' },
    { field: 'email', op: '__proto__', value: '%' },
    { field: 'email', op: 'eq', value: { $ne: '' } },
    { field: 'email', op: 'in', value: [{}] },
    { field: 'email', op: 'contains', value: ['%'] },
    { match: 'none', conditions: [{ field: 'email', op: 'exists' }] },
    { match: 'any', conditions: { 0: { field: 'email', op: 'exists' } } },
    { match: 'any', conditions: [{ field: 'email', op: 'exists' }], or: [{ field: 'email', op: 'exists' }] },
  ];
  for (const filters of bad) {
    const wrapped = 'match' in (filters as object) ? filters : { match: 'any', conditions: [filters] };
    const res = await t0.request('POST', '/v1/segments', { body: { name: 's', contactBookId: ids.b.book, filters: wrapped }, key: keyB });
    t.is(res.status, 400, `${JSON.stringify(wrapped)}: ${JSON.stringify(res.body)}`);
  }
});

test('page numbers and sizes out of range are a 400 on every page-numbered list; a page past the end is empty', async (t) => {
  const lists = ['/v1/emails', '/v1/campaigns', '/v1/templates', '/v1/suppressions', '/v1/segments', '/v1/receivedEmails', '/v1/webhooks', `/v1/contactBooks/${ids.b.book}/contacts`];
  for (const path of lists) {
    for (const q of ['page=0', 'page=-1', 'page=1e3', 'page=99999999999999999999', 'page=1.5', 'page=%20', 'limit=0', 'limit=-5', 'limit=100000']) {
      const res = await t0.request('GET', `${path}?${q}`, { key: keyB });
      t.is(res.status, 400, `${path}?${q}: ${res.status} ${JSON.stringify(res.body).slice(0, 200)}`);
    }
    const far = await t0.request('GET', `${path}?page=1000000000&limit=100`, { key: keyB });
    // The last page there is (an offset near 10^11): empty, on every store.
    t.is(far.status, 200, `${path} far page: ${JSON.stringify(far.body).slice(0, 200)}`);
    t.is(JSON.stringify(far.body).includes('"id"'), false, `${path} far page has rows`);
  }
});

test('an instant past 9999-12-31 (a date-time whose offset carries it into the year 10000) is a 400, not a filter that compares as text before every date', async (t) => {
  const far = encodeURIComponent('9999-12-31T23:00:00-14:00');
  const since = await t0.request('GET', `/v1/emails?startDate=${far}`, { key: keyB });
  t.is(since.status, 400, JSON.stringify(since.body));
  const until = await t0.request('GET', `/v1/emails?endDate=${far}`, { key: keyB });
  t.is(until.status, 400, JSON.stringify(until.body));
  // The last instant of 9999 itself is a valid bound: nothing is after it, everything before.
  const last = encodeURIComponent('9999-12-31T23:59:59.999Z');
  t.is((await t0.request('GET', `/v1/emails?startDate=${last}`, { key: keyB })).body.count, 0);
  t.is((await t0.request('GET', `/v1/emails?endDate=${last}`, { key: keyB })).body.count, 1);
  for (const op of ['gt', 'lt']) {
    const seg = await t0.request('POST', '/v1/segments', {
      body: { name: 's', contactBookId: ids.b.book, filters: { match: 'all', conditions: [{ field: 'createdAt', op, value: '9999-12-31T23:00:00-14:00' }] } },
      key: keyB,
    });
    t.is(seg.status, 400, `createdAt ${op}: ${JSON.stringify(seg.body)}`);
  }
});

test('an address given as a filter is matched as contacts are stored: an internationalised domain in either form and any case finds the caller\'s contact only', async (t) => {
  const bob = ids.b.contacts[IDN] as string;
  for (const given of [IDN, 'Bob@BÜCHER.example', 'bob@xn--bcher-kva.example']) {
    const listed = await t0.request('GET', `/v1/contactBooks/${ids.b.book}/contacts?emails=${encodeURIComponent(given)}`, { key: keyB });
    t.is(listed.status, 200, JSON.stringify(listed.body));
    t.deepEqual((listed.body as { id: string }[]).map((c) => c.id), [bob], `emails=${given}`);
    for (const condition of [
      { field: 'email', op: 'eq', value: given },
      { field: 'email', op: 'in', value: [given, 'nobody@example.net'] },
    ]) {
      const seg = await t0.request('POST', '/v1/segments', { body: { name: 's', contactBookId: ids.b.book, filters: { match: 'all', conditions: [condition] } }, key: keyB });
      t.is(seg.status, 200, JSON.stringify(seg.body));
      const members = await t0.request('GET', `/v1/segments/${seg.body.id}/contacts?limit=100`, { key: keyB });
      t.deepEqual((members.body.contacts as { id: string }[]).map((c) => c.id), [bob], JSON.stringify(condition));
      // neq leaves out exactly that contact.
      const neq = await t0.request('POST', '/v1/segments', { body: { name: 's', contactBookId: ids.b.book, filters: { match: 'all', conditions: [{ ...condition, op: 'neq', value: given }] } }, key: keyB });
      const others = await t0.request('GET', `/v1/segments/${neq.body.id}/contacts?limit=100`, { key: keyB });
      t.deepEqual((others.body.contacts as { id: string }[]).map((c) => c.id).sort(), Object.values(ids.b.contacts as Record<string, string>).filter((id) => id !== bob).sort(), `neq ${given}`);
    }
  }
});

test('a webhook attempts cursor is a position in the caller\'s own list: another team\'s cursor, a crafted one or another list\'s reads no other team\'s attempt', async (t) => {
  const hookOf = async (key: string, n: number) => {
    const made = await t0.request('POST', '/v1/webhooks', { body: { url: receiver.url, eventTypes: [] }, key });
    t.is(made.status, 200, JSON.stringify(made.body));
    const events: string[] = [];
    for (let i = 0; i < n; i++) events.push((await t0.request('POST', `/v1/webhooks/${made.body.id}/test`, { key })).body.eventId);
    return { id: made.body.id as string, events };
  };
  const before = receiver.calls.length;
  const a = await hookOf(t0.key, 3);
  const b = await hookOf(keyB, 2);
  await receiver.waitFor(before + 5);
  await t0.app.webhookDispatcher.whenIdle();
  const attempts = async (key: string, hook: string, cursor?: string) => {
    const res = await t0.request('GET', `/v1/webhooks/${hook}/attempts?limit=1${cursor === undefined ? '' : `&cursor=${encodeURIComponent(cursor)}`}`, { key });
    return res;
  };
  // Team A's own cursor, after its newest attempt: on B's endpoint it is a position, nothing more.
  const aCursor = (await attempts(t0.key, a.id)).body.nextCursor as string;
  t.truthy(aCursor);
  for (const cursor of [aCursor, encodeIdCursor('a', 999_999_999_999_999), encodeIdCursor('a', 1)]) {
    const res = await attempts(keyB, b.id, cursor);
    t.is(res.status, 200, JSON.stringify(res.body));
    t.true((res.body.attempts as { eventId: string }[]).every((x) => b.events.includes(x.eventId)), `cursor ${cursor}: ${JSON.stringify(res.body)}`);
  }
  // B's cursor on A's endpoint: the endpoint is not there for B.
  t.is((await attempts(keyB, a.id, aCursor)).status, 404);
  // Another list's cursor (the operator's audit log, the queue) or a bare id: 400 naming it.
  for (const cursor of [encodeIdCursor('u', 1), encodeIdCursor('q', 1), '1', '-1', encodeIdCursor('a', -1), encodeIdCursor('a', 1e16)]) {
    const res = await attempts(keyB, b.id, cursor);
    t.is(res.status, 400, `${cursor}: ${JSON.stringify(res.body)}`);
    t.regex(res.body.error.message, /^cursor:/);
  }
});
