import test from 'ava';
import { UseSend } from 'usesend-js';
import type { BusEvent } from '../../src/core/events.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { twoTeams } from '../helpers/two-teams.js';

let t0: TestApp;
const events: BusEvent[] = [];
test.before(async () => {
  t0 = await startTestApp();
  t0.app.services.events.on('*', (e) => {
    events.push(e);
  });
});
test.after.always(async () => {
  await t0?.close();
});

async function newBook(name = 'Book'): Promise<string> {
  const res = await t0.request('POST', '/v1/contactBooks', { body: { name } });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  return res.body.id;
}
const path = (bookId: string, rest = '') => `/v1/contactBooks/${bookId}/contacts${rest}`;
const eventsFor = (id: string) => events.filter((e) => e.data.id === id).map((e) => e.type);

test('create normalises the email, returns contactId; get returns every field; an existing email is updated', async (t) => {
  const book = await newBook();
  const res = await t0.request('POST', path(book), {
    body: { email: '  Ada.Lovelace@Example.COM ', firstName: 'Ada', lastName: 'Lovelace', properties: { plan: 'pro', seats: 3, beta: true } },
  });
  t.is(res.status, 200, JSON.stringify(res.body));
  t.deepEqual(Object.keys(res.body), ['contactId']);
  const id = res.body.contactId;
  t.regex(id, /^ct_[A-Za-z0-9]{21}$/);
  const got = await t0.request('GET', path(book, `/${id}`));
  t.is(got.status, 200);
  t.like(got.body, {
    id,
    email: 'ada.lovelace@example.com',
    firstName: 'Ada',
    lastName: 'Lovelace',
    subscribed: true,
    unsubscribeReason: null,
    properties: { plan: 'pro', seats: '3', beta: 'true' },
    contactBookId: book,
  });
  t.truthy(Date.parse(got.body.createdAt));
  t.deepEqual(eventsFor(id), ['contact.created']);
  const created = events.find((e) => e.type === 'contact.created' && e.data.id === id)!;
  t.is(created.teamId, t0.teamId);
  t.is(created.domainId, null);
  t.deepEqual(Object.keys(created.data).sort(), ['contactBookId', 'createdAt', 'email', 'firstName', 'id', 'lastName', 'properties', 'subscribed', 'updatedAt']);

  // The same address again (other case) updates the one contact instead of adding another.
  const again = await t0.request('POST', path(book), { body: { email: 'ADA.LOVELACE@example.com', firstName: 'Augusta' } });
  t.is(again.body.contactId, id);
  const list = (await t0.request('GET', path(book))).body;
  t.is(list.length, 1);
  t.is(list[0].firstName, 'Augusta');
  t.is(list[0].lastName, 'Lovelace');
  t.deepEqual(eventsFor(id), ['contact.created', 'contact.updated']);
  // Nothing changed: no write and no event.
  await t0.request('POST', path(book), { body: { email: 'ada.lovelace@example.com', firstName: 'Augusta' } });
  t.deepEqual(eventsFor(id), ['contact.created', 'contact.updated']);
});

test('create validation: 400 naming the field; unknown book 404', async (t) => {
  const book = await newBook();
  const cases: [unknown, RegExp][] = [
    [{}, /^email: /],
    [{ email: 'not-an-email' }, /^email: .*not a valid email/],
    [{ email: 'a@b' }, /^email: /],
    [{ email: 5 }, /^email: /],
    [{ email: 'x@example.com', firstName: 7 }, /^firstName: /],
    [{ email: 'x@example.com', subscribed: 'yes' }, /^subscribed: /],
    [{ email: 'x@example.com', properties: { 'bad key': 'v' } }, /^properties\.bad key: /],
    [{ email: 'x@example.com', properties: { k: { nested: 1 } } }, /^properties\.k: /],
    [{ email: 'x@example.com', properties: 'x' }, /^properties: /],
    [{ email: 'x@example.com', firstname: 'typo' }, /firstname/],
  ];
  for (const [body, message] of cases) {
    const res = await t0.request('POST', path(book), { body });
    t.is(res.status, 400, JSON.stringify(body));
    t.is(res.body.error.code, 'BAD_REQUEST');
    t.regex(res.body.error.message, message, JSON.stringify(body));
  }
  t.is((await t0.request('POST', path(book), { body: [] })).status, 400);
  const missing = await t0.request('POST', path('cb_nope'), { body: { email: 'x@example.com' } });
  t.is(missing.status, 404);
  t.is(missing.body.error.code, 'NOT_FOUND');
  t.is((await t0.request('GET', path(book))).body.length, 0);
});

test('list: newest first, page and limit, emails and ids filters', async (t) => {
  const book = await newBook();
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) ids.push((await t0.request('POST', path(book), { body: { email: `p${i}@example.com` } })).body.contactId);
  const all = (await t0.request('GET', path(book))).body;
  t.deepEqual(all.map((c: any) => c.id), [...ids].reverse());
  const page2 = (await t0.request('GET', path(book, '?page=2&limit=2'))).body;
  t.deepEqual(page2.map((c: any) => c.id), [ids[2], ids[1]]);
  const byEmail = (await t0.request('GET', path(book, '?emails=P1@example.com,p3@example.com'))).body;
  t.deepEqual(byEmail.map((c: any) => c.email).sort(), ['p1@example.com', 'p3@example.com']);
  const byIds = (await t0.request('GET', path(book, `?ids=${ids[0]},${ids[4]}`))).body;
  t.deepEqual(byIds.map((c: any) => c.id).sort(), [ids[0], ids[4]].sort());
  const both = (await t0.request('GET', path(book, `?ids=${ids[0]}&emails=p0@example.com,p1@example.com`))).body;
  t.deepEqual(both.map((c: any) => c.id), [ids[0]]);
  for (const q of ['?limit=0', '?limit=101', '?page=x', '?page=1&page=2']) {
    const res = await t0.request('GET', path(book, q));
    t.is(res.status, 400, q);
    t.regex(res.body.error.message, /^(page|limit): /);
  }
  t.is((await t0.request('GET', path('cb_nope'))).status, 404);
});

test('PATCH changes the given fields; subscribed false then true; 404s', async (t) => {
  const book = await newBook();
  const id = (await t0.request('POST', path(book), { body: { email: 'patch@example.com', firstName: 'P', properties: { a: '1' } } })).body.contactId;
  const res = await t0.request('PATCH', path(book, `/${id}`), { body: { lastName: 'Q', properties: { b: '2' }, subscribed: false } });
  t.is(res.status, 200);
  t.deepEqual(res.body, { contactId: id });
  let c = (await t0.request('GET', path(book, `/${id}`))).body;
  t.like(c, { firstName: 'P', lastName: 'Q', subscribed: false, unsubscribeReason: 'UNSUBSCRIBED', properties: { b: '2' } });
  // Importing the address again with subscribed:true does not undo the unsubscribe...
  await t0.request('POST', path(book), { body: { email: 'patch@example.com', subscribed: true } });
  t.false((await t0.request('GET', path(book, `/${id}`))).body.subscribed);
  // ...an explicit PATCH on the contact does.
  await t0.request('PATCH', path(book, `/${id}`), { body: { subscribed: true, firstName: null } });
  c = (await t0.request('GET', path(book, `/${id}`))).body;
  t.like(c, { subscribed: true, unsubscribeReason: null, firstName: null });
  t.deepEqual(eventsFor(id), ['contact.created', 'contact.updated', 'contact.updated']);

  const bad = await t0.request('PATCH', path(book, `/${id}`), { body: { email: 'new@example.com' } });
  t.is(bad.status, 400);
  t.regex(bad.body.error.message, /email/);
  t.is((await t0.request('PATCH', path(book, '/ct_missing'), { body: { firstName: 'x' } })).status, 404);
  t.is((await t0.request('GET', path(book, '/ct_missing'))).status, 404);
  const other = await newBook('other');
  t.is((await t0.request('GET', path(other, `/${id}`))).status, 404, 'a contact is only found in its own book');
});

test('PUT upserts by id then by email and is safe to repeat', async (t) => {
  const book = await newBook();
  const body = { email: 'Upsert@Example.com', firstName: 'U', properties: { tier: 'gold' } };
  const first = await t0.request('PUT', path(book, '/ct_clientchosen'), { body });
  t.is(first.status, 200);
  const id = first.body.contactId;
  t.regex(id, /^ct_/);
  const second = await t0.request('PUT', path(book, '/ct_clientchosen'), { body });
  t.is(second.body.contactId, id);
  const third = await t0.request('PUT', path(book, `/${id}`), { body });
  t.is(third.body.contactId, id);
  t.is((await t0.request('GET', path(book))).body.length, 1);
  t.deepEqual(eventsFor(id), ['contact.created'], 'repeats change nothing');

  // PUT on the id with a new address renames the contact; onto another contact's address is 409.
  const renamed = await t0.request('PUT', path(book, `/${id}`), { body: { email: 'renamed@example.com' } });
  t.is(renamed.body.contactId, id);
  t.is((await t0.request('GET', path(book, `/${id}`))).body.email, 'renamed@example.com');
  await t0.request('POST', path(book), { body: { email: 'taken@example.com' } });
  const clash = await t0.request('PUT', path(book, `/${id}`), { body: { email: 'taken@example.com' } });
  t.is(clash.status, 409);
  t.is(clash.body.error.code, 'NOT_UNIQUE');
  const noEmail = await t0.request('PUT', path(book, `/${id}`), { body: { firstName: 'x' } });
  t.is(noEmail.status, 400);
  t.regex(noEmail.body.error.message, /^email: /);
});

test('DELETE removes the contact and is 404 the second time', async (t) => {
  const book = await newBook();
  const id = (await t0.request('POST', path(book), { body: { email: 'gone@example.com' } })).body.contactId;
  const res = await t0.request('DELETE', path(book, `/${id}`));
  t.is(res.status, 200);
  t.deepEqual(res.body, { success: true });
  t.deepEqual(eventsFor(id), ['contact.created', 'contact.deleted']);
  const again = await t0.request('DELETE', path(book, `/${id}`));
  t.is(again.status, 404);
  t.is(again.body.error.code, 'NOT_FOUND');
  t.is((await t0.request('GET', path(book, `/${id}`))).status, 404);
});

test('bulk add: valid rows written, invalid rows reported, duplicates merged, existing updated', async (t) => {
  const book = await newBook();
  const existing = (await t0.request('POST', path(book), { body: { email: 'old@example.com', firstName: 'Old' } })).body.contactId;
  const res = await t0.request('POST', path(book, '/bulk'), {
    body: [
      { email: 'New1@example.com', firstName: 'One' },
      { email: 'broken' },
      { email: 'old@example.com', firstName: 'Updated' },
      { firstName: 'no email' },
      { email: 'new1@example.com', lastName: 'Merged' },
      'not an object',
      { email: 'new2@example.com', properties: { x: 'y' }, subscribed: false },
    ],
  });
  t.is(res.status, 200, JSON.stringify(res.body));
  t.is(res.body.count, 4);
  t.is(res.body.created, 2);
  t.is(res.body.updated, 1);
  t.is(typeof res.body.message, 'string');
  t.deepEqual(res.body.errors.map((e: any) => e.index), [1, 3, 5]);
  t.regex(res.body.errors[0].message, /^\[1\]\.email: /);
  t.is(res.body.errors[0].email, 'broken');
  t.regex(res.body.errors[1].message, /^\[3\]\.email: /);
  const list = (await t0.request('GET', path(book))).body;
  t.is(list.length, 3);
  const byEmail = Object.fromEntries(list.map((c: any) => [c.email, c]));
  t.like(byEmail['new1@example.com'], { firstName: 'One', lastName: 'Merged', subscribed: true });
  t.like(byEmail['new2@example.com'], { subscribed: false, properties: { x: 'y' } });
  t.is(byEmail['old@example.com'].firstName, 'Updated');
  t.deepEqual(eventsFor(existing), ['contact.created', 'contact.updated']);
  t.deepEqual(eventsFor(byEmail['new1@example.com'].id), ['contact.created']);
});

// Serial: the timing below measures this request alone, not the file's other tests sharing the app.
test.serial('bulk add limits: an array of 1 to 1000; 1000 contacts in well under a second', async (t) => {
  const book = await newBook();
  for (const body of [[], {}, { email: 'x@example.com' }]) {
    const res = await t0.request('POST', path(book, '/bulk'), { body });
    t.is(res.status, 400, JSON.stringify(body));
    t.regex(res.body.error.message, /^body: /);
  }
  const tooMany = Array.from({ length: 1001 }, (_, i) => ({ email: `m${i}@example.com` }));
  const over = await t0.request('POST', path(book, '/bulk'), { body: tooMany });
  t.is(over.status, 400);
  t.regex(over.body.error.message, /at most 1000/);
  t.is((await t0.request('GET', path(book))).body.length, 0, 'nothing written');

  // A small batch first, so the logged time is of the work, not of compiling the code path.
  await t0.request('POST', path(book, '/bulk'), { body: Array.from({ length: 50 }, (_, i) => ({ email: `warm${i}@example.com` })) });
  const before = events.length;
  const rows = tooMany.slice(0, 1000).map((r, i) => ({ ...r, firstName: `F${i}`, properties: { n: String(i) } }));
  const started = performance.now();
  const res = await t0.request('POST', path(book, '/bulk'), { body: rows });
  const ms = performance.now() - started;
  t.is(res.status, 200);
  t.is(res.body.created, 1000);
  // Speed is measured by npm run bench (bulk add of 1000 contacts), not asserted here.
  t.log(`${Math.round(ms)} ms for 1000 contacts`);
  t.is((await t0.request('GET', `/v1/contactBooks/${book}`)).body._count.contacts, 1050);
  t.is(events.slice(before).filter((e) => e.type === 'contact.created' && e.data.contactBookId === book).length, 1000);
  // Re-importing the same rows is an update of nothing: no writes, no events.
  const again = await t0.request('POST', path(book, '/bulk'), { body: rows });
  t.is(again.body.count, 1000);
  t.is(again.body.created + again.body.updated, 0);
});

// Overlapping imports at once (a client retrying a bulk add that timed out, or POSTing an address
// twice): every request is answered like the spec's upsert, never with an error. On PostgreSQL
// both read "not in the book" and the second insert hit the (book, email) key.
test('concurrent adds of the same new addresses all succeed: one contact each, the others update it', async (t) => {
  const book = await newBook('Racy');
  const rows = Array.from({ length: 50 }, (_, i) => ({ email: `racer${i}@example.com`, firstName: 'Racer' }));
  const bulk = await Promise.all(Array.from({ length: 4 }, () => t0.request('POST', path(book, '/bulk'), { body: rows })));
  t.deepEqual(bulk.map((r) => r.status), [200, 200, 200, 200], JSON.stringify(bulk.map((r) => r.body.error ?? r.body.message)));
  t.deepEqual(bulk.map((r) => r.body.count), [50, 50, 50, 50]);
  const singles = await Promise.all(Array.from({ length: 4 }, () => t0.request('POST', path(book), { body: { email: 'single-racer@example.com' } })));
  t.deepEqual(singles.map((r) => r.status), [200, 200, 200, 200], JSON.stringify(singles.map((r) => r.body.error)));
  t.is(new Set(singles.map((r) => r.body.contactId)).size, 1, 'one contact');
  t.is((await t0.request('GET', `/v1/contactBooks/${book}`)).body._count.contacts, 51);
});

// The same rows in different orders (two uploads of one list, sorted differently): on PostgreSQL
// each request inserted, then updated, in its own order, so two of them waited on each other's
// rows (a deadlock) and all but one answered 500.
test('concurrent bulk adds of the same rows in different orders all succeed, as adds and as updates', async (t) => {
  const book = await newBook('Racy orders');
  const rows = (name: string) => Array.from({ length: 200 }, (_, i) => ({ email: `order${i}@example.com`, firstName: name }));
  const orders = <T>(list: T[]) => [list, [...list].reverse(), [...list.slice(100), ...list.slice(0, 100)], [...list.slice(50).reverse(), ...list.slice(0, 50)]];
  const added = await Promise.all(orders(rows('First')).map((body) => t0.request('POST', path(book, '/bulk'), { body })));
  t.deepEqual(added.map((r) => r.status), [200, 200, 200, 200], JSON.stringify(added.map((r) => r.body.error ?? r.body.message)));
  t.is((await t0.request('GET', `/v1/contactBooks/${book}`)).body._count.contacts, 200);
  const updated = await Promise.all(orders(rows('Second')).map((body, i) => t0.request('POST', path(book, '/bulk'), { body: body.map((r) => ({ ...r, lastName: `L${i}` })) })));
  t.deepEqual(updated.map((r) => r.status), [200, 200, 200, 200], JSON.stringify(updated.map((r) => r.body.error ?? r.body.message)));
  t.deepEqual(updated.map((r) => r.body.updated), [200, 200, 200, 200]);
});

test('bulk delete: {contactIds} 1..1000 as a DELETE body; unknown ids are not counted', async (t) => {
  const book = await newBook();
  const rows = Array.from({ length: 5 }, (_, i) => ({ email: `bd${i}@example.com` }));
  await t0.request('POST', path(book, '/bulk'), { body: rows });
  const ids = (await t0.request('GET', path(book))).body.map((c: any) => c.id);
  const res = await t0.request('DELETE', path(book, '/bulk'), { body: { contactIds: [ids[0], ids[1], ids[1], 'ct_unknown'] } });
  t.is(res.status, 200);
  t.deepEqual(res.body, { success: true, count: 2 });
  t.deepEqual(eventsFor(ids[0]), ['contact.created', 'contact.deleted']);
  t.is((await t0.request('GET', path(book))).body.length, 3);
  for (const body of [{}, { contactIds: [] }, { contactIds: 'x' }, { contactIds: Array.from({ length: 1001 }, (_, i) => `ct_${i}`) }]) {
    const bad = await t0.request('DELETE', path(book, '/bulk'), { body });
    t.is(bad.status, 400, JSON.stringify(body).slice(0, 80));
    t.regex(bad.body.error.message, /^contactIds: /);
  }
  // A contact id from another book is not deleted through this one.
  const other = await newBook('other');
  const foreign = (await t0.request('POST', path(other), { body: { email: 'keep@example.com' } })).body.contactId;
  t.deepEqual((await t0.request('DELETE', path(book, '/bulk'), { body: { contactIds: [foreign] } })).body, { success: true, count: 0 });
  t.is((await t0.request('GET', path(other, `/${foreign}`))).status, 200);
});

test('other teams cannot see or touch contacts', async (t) => {
  const book = await newBook();
  const id = (await t0.request('POST', path(book), { body: { email: 'private@example.com' } })).body.contactId;
  const key = (await twoTeams(t0, { b: { name: 'Intruder' } })).b.key;
  t.is((await t0.request('GET', path(book), { key })).status, 404);
  t.is((await t0.request('GET', path(book, `/${id}`), { key })).status, 404);
  t.is((await t0.request('PATCH', path(book, `/${id}`), { key, body: { firstName: 'x' } })).status, 404);
  t.is((await t0.request('DELETE', path(book, `/${id}`), { key })).status, 404);
  t.is((await t0.request('POST', path(book, '/bulk'), { key, body: [{ email: 'x@example.com' }] })).status, 404);
  t.is((await t0.request('GET', path(book, `/${id}`))).status, 200);
});

test('the usesend-js SDK drives contact books and contacts', async (t) => {
  const sdk = new UseSend(t0.key, t0.baseUrl);
  const book = await sdk.contactBooks.create({ name: 'SDK book', emoji: '📗' });
  t.is(book.error, null);
  const bookId = book.data!.id;
  t.is((await sdk.contactBooks.get(bookId)).data!.name, 'SDK book');
  t.true((await sdk.contactBooks.list()).data!.some((b: { id: string }) => b.id === bookId));
  t.is((await sdk.contactBooks.update(bookId, { name: 'Renamed' })).data!.name, 'Renamed');

  const created = await sdk.contacts.create(bookId, { email: 'sdk@example.com', firstName: 'S', properties: { k: 'v' } });
  t.is(created.error, null);
  const contactId = created.data!.contactId!;
  t.is((await sdk.contacts.get(bookId, contactId)).data!.email, 'sdk@example.com');
  t.is((await sdk.contacts.update(bookId, contactId, { lastName: 'D' })).data!.contactId, contactId);
  t.is((await sdk.contacts.upsert(bookId, contactId, { email: 'sdk@example.com', firstName: 'T' })).data!.contactId, contactId);
  const bulk = await sdk.contacts.bulkCreate(bookId, [{ email: 'sdk1@example.com' }, { email: 'sdk2@example.com' }]);
  t.is(bulk.error, null);
  t.is(bulk.data!.count, 2);
  const ids = (await t0.request('GET', path(bookId))).body.map((c: any) => c.id).filter((id: string) => id !== contactId);
  const removed = await sdk.contacts.bulkDelete(bookId, { contactIds: ids });
  t.is(removed.error, null);
  t.is(removed.data!.count, 2);
  t.is((await sdk.contacts.delete(bookId, contactId)).data!.success, true);
  const gone = await sdk.contacts.delete(bookId, contactId);
  t.is(gone.data, null);
  t.is((gone.error as any).error?.code ?? (gone.error as any).code, 'NOT_FOUND');
  t.is((await sdk.contactBooks.delete(bookId)).data!.success, true);
});
