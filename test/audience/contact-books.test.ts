import test from 'ava';
import type { BusEvent } from '../../src/core/events.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { twoTeams } from '../helpers/two-teams.js';

let t0: TestApp;
let domain: any;
const events: BusEvent[] = [];
test.before(async () => {
  t0 = await startTestApp();
  domain = await addVerifiedDomain(t0, 'books.dev');
  t0.app.services.events.on('*', (e) => {
    events.push(e);
  });
});
test.after.always(async () => {
  await t0?.close();
});

const create = (body: unknown, key?: string) => t0.request('POST', '/v1/contactBooks', { body, key });

test('create returns every field with defaults; get and list agree', async (t) => {
  const res = await create({ name: 'Newsletter' });
  t.is(res.status, 200, JSON.stringify(res.body));
  const b = res.body;
  t.regex(b.id, /^cb_[A-Za-z0-9]{21}$/);
  t.is(b.name, 'Newsletter');
  t.is(b.teamId, t0.teamId);
  t.deepEqual(b.properties, {});
  t.deepEqual(b.variables, []);
  t.is(b.emoji, '📙');
  t.false(b.doubleOptInEnabled);
  t.is(b.doubleOptInFrom, null);
  t.is(b.doubleOptInSubject, null);
  t.is(b.doubleOptInContent, null);
  t.deepEqual(b._count, { contacts: 0 });
  t.truthy(Date.parse(b.createdAt));
  t.is(b.createdAt, b.updatedAt);
  t.deepEqual((await t0.request('GET', `/v1/contactBooks/${b.id}`)).body, b);
  const list = await t0.request('GET', '/v1/contactBooks');
  t.is(list.status, 200);
  t.true(Array.isArray(list.body));
  t.deepEqual(list.body.find((x: any) => x.id === b.id), b);
  // The SDK's /api/v1 prefix serves the same resource.
  t.is((await t0.request('GET', `/api/v1/contactBooks/${b.id}`)).body.id, b.id);
});

test('create with every field; _count.contacts follows the contacts', async (t) => {
  const res = await create({
    name: 'Customers',
    emoji: '🚀',
    properties: { owner: 'sales', region: 'eu' },
    variables: ['company', 'plan_tier', 'company'],
    doubleOptInEnabled: true,
    doubleOptInFrom: 'Books <news@books.dev>',
    doubleOptInSubject: 'Confirm, please',
  });
  t.is(res.status, 200, JSON.stringify(res.body));
  const b = res.body;
  t.is(b.emoji, '🚀');
  t.deepEqual(b.properties, { owner: 'sales', region: 'eu' });
  t.deepEqual(b.variables, ['company', 'plan_tier']);
  t.true(b.doubleOptInEnabled);
  t.is(b.doubleOptInFrom, 'Books <news@books.dev>');
  t.is(b.doubleOptInSubject, 'Confirm, please');
  // Turn double opt-in off so the contacts below need no confirmation mail.
  await t0.request('PATCH', `/v1/contactBooks/${b.id}`, { body: { doubleOptInEnabled: false } });
  for (const email of ['a@example.com', 'b@example.com', 'c@example.com']) {
    t.is((await t0.request('POST', `/v1/contactBooks/${b.id}/contacts`, { body: { email } })).status, 200);
  }
  t.deepEqual((await t0.request('GET', `/v1/contactBooks/${b.id}`)).body._count, { contacts: 3 });
  const listed = (await t0.request('GET', '/v1/contactBooks')).body.find((x: any) => x.id === b.id);
  t.deepEqual(listed._count, { contacts: 3 });
});

test('bad bodies are 400 naming the field', async (t) => {
  const cases: [unknown, RegExp][] = [
    [{}, /^name: /],
    [{ name: '' }, /^name: /],
    [{ name: '   ' }, /^name: /],
    [{ name: 'x', variables: ['ok', 'bad-name'] }, /^variables\[1\]: /],
    [{ name: 'x', variables: ['email'] }, /^variables\[0\]: .*built in/],
    [{ name: 'x', variables: 'company' }, /^variables: /],
    [{ name: 'x', properties: { a: 1 } }, /^properties\.a: /],
    [{ name: 'x', properties: ['a'] }, /^properties: /],
    [{ name: 'x', emoji: '' }, /^emoji: /],
    [{ name: 'x', doubleOptInEnabled: 'yes' }, /^doubleOptInEnabled: /],
    [{ name: 'x', doubleOptInEnabled: true }, /^doubleOptInFrom: required/],
    [{ name: 'x', doubleOptInFrom: 'not an address' }, /^doubleOptInFrom: /],
    [{ name: 'x', doubleOptInFrom: 'hello@unknown-domain.dev' }, /^doubleOptInFrom: .*not a domain of this team/],
    [{ name: 'x', doubleOptInContent: '{not json' }, /^doubleOptInContent: .*JSON/],
    [{ name: 'x', doubleOptInContent: JSON.stringify({ type: 'doc', content: [{ type: 'paragraph', content: [{ type: 'text', text: 'no link' }] }] }) }, /^doubleOptInContent: must contain/],
    [{ name: 'x', doubleOptInContent: JSON.stringify({ type: 'doc', content: [{ type: 'mystery' }] }) }, /^doubleOptInContent: /],
    [{ name: 'x', unknownField: 1 }, /unknownField/],
  ];
  for (const [body, message] of cases) {
    const res = await create(body);
    t.is(res.status, 400, JSON.stringify(body));
    t.is(res.body.error.code, 'BAD_REQUEST');
    t.regex(res.body.error.message, message, JSON.stringify(body));
  }
  const malformed = await t0.request('POST', '/v1/contactBooks', { rawBody: '{"name":' });
  t.is(malformed.status, 400);
  t.is(malformed.body.error.code, 'BAD_REQUEST');
});

test('doubleOptInFrom must be on a verified domain of the team', async (t) => {
  // A domain that exists but is not verified.
  const pending = await t0.request('POST', '/v1/domains', { body: { name: 'pending-books.dev', region: 'r' } });
  t.is(pending.status, 200);
  const res = await create({ name: 'x', doubleOptInEnabled: true, doubleOptInFrom: 'hi@pending-books.dev' });
  t.is(res.status, 400);
  t.regex(res.body.error.message, /^doubleOptInFrom: .*not verified/);
  // Another team's verified domain is not ours.
  const otherKey = (await twoTeams(t0)).b.key;
  const foreign = await create({ name: 'x', doubleOptInFrom: `hi@${domain.name}` }, otherKey);
  t.is(foreign.status, 400);
  // A verified domain of the team is accepted on create and on PATCH.
  const ok = await create({ name: 'ok', doubleOptInEnabled: true, doubleOptInFrom: `Hi <hi@${domain.name}>` });
  t.is(ok.status, 200);
  const patched = await t0.request('PATCH', `/v1/contactBooks/${ok.body.id}`, { body: { doubleOptInFrom: 'hi@pending-books.dev' } });
  t.is(patched.status, 400);
  t.regex(patched.body.error.message, /^doubleOptInFrom: /);
  // Clearing the sender while double opt-in is on is refused; turning both off is fine.
  const cleared = await t0.request('PATCH', `/v1/contactBooks/${ok.body.id}`, { body: { doubleOptInFrom: null } });
  t.is(cleared.status, 400);
  const off = await t0.request('PATCH', `/v1/contactBooks/${ok.body.id}`, { body: { doubleOptInEnabled: false, doubleOptInFrom: null } });
  t.is(off.status, 200);
  t.is(off.body.doubleOptInFrom, null);
});

test('a key bound to another domain may not name this one as sender (403)', async (t) => {
  const other = await addVerifiedDomain(t0, 'books-other.dev');
  const bound = (await t0.app.services.apiKeys.create(t0.teamId, { name: 'bound', permission: 'FULL', domainId: other.id })).token;
  const res = await create({ name: 'x', doubleOptInFrom: `hi@${domain.name}` }, bound);
  t.is(res.status, 403);
  t.is(res.body.error.code, 'FORBIDDEN');
  t.is((await create({ name: 'x', doubleOptInFrom: `hi@${other.name}` }, bound)).status, 200);
});

test('PATCH changes only what is given; content is validated and can be reset to the default', async (t) => {
  const b = (await create({ name: 'Patch me', properties: { a: '1' } })).body;
  const content = JSON.stringify({
    type: 'doc',
    content: [{ type: 'button', attrs: { text: 'Yes', url: '{{confirmUrl}}' } }],
  });
  const res = await t0.request('PATCH', `/v1/contactBooks/${b.id}`, {
    body: { name: 'Patched', emoji: '📘', variables: ['company'], doubleOptInSubject: 'Line\r\nbreak', doubleOptInContent: content },
  });
  t.is(res.status, 200, JSON.stringify(res.body));
  t.is(res.body.name, 'Patched');
  t.is(res.body.emoji, '📘');
  t.deepEqual(res.body.properties, { a: '1' });
  t.deepEqual(res.body.variables, ['company']);
  t.is(res.body.doubleOptInSubject, 'Line break');
  t.is(res.body.doubleOptInContent, content);
  t.not(res.body.updatedAt, undefined);
  // useSend's {{doubleOptInUrl}} link is accepted too.
  const legacy = JSON.stringify({ type: 'doc', content: [{ type: 'button', attrs: { text: 'Yes', url: '{{doubleOptInUrl}}' } }] });
  t.is((await t0.request('PATCH', `/v1/contactBooks/${b.id}`, { body: { doubleOptInContent: legacy } })).status, 200);
  const reset = await t0.request('PATCH', `/v1/contactBooks/${b.id}`, { body: { doubleOptInContent: '' } });
  t.is(reset.body.doubleOptInContent, null);
  const bad = await t0.request('PATCH', `/v1/contactBooks/${b.id}`, { body: { name: '' } });
  t.is(bad.status, 400);
  t.regex(bad.body.error.message, /^name: /);
  t.is((await t0.request('PATCH', '/v1/contactBooks/cb_missing', { body: { name: 'x' } })).status, 404);
});

test('delete removes the book, its contacts (each announced) and segments; a second delete is 404', async (t) => {
  const b = (await create({ name: 'Doomed' })).body;
  const ids: string[] = [];
  for (const email of ['d1@example.com', 'd2@example.com']) {
    ids.push((await t0.request('POST', `/v1/contactBooks/${b.id}/contacts`, { body: { email } })).body.contactId);
  }
  const seg = await t0.request('POST', '/v1/segments', { body: { name: 's', contactBookId: b.id, filters: { match: 'all', conditions: [] } } });
  t.is(seg.status, 200);
  const res = await t0.request('DELETE', `/v1/contactBooks/${b.id}`);
  t.is(res.status, 200);
  t.deepEqual(res.body, { id: b.id, success: true, message: 'Contact book deleted successfully' });
  const deleted = events.filter((e) => e.type === 'contact.deleted').map((e) => e.data.id);
  for (const id of ids) t.true(deleted.includes(id));
  t.is((await t0.request('GET', `/v1/contactBooks/${b.id}`)).status, 404);
  t.is((await t0.request('GET', `/v1/segments/${seg.body.id}`)).status, 404);
  const again = await t0.request('DELETE', `/v1/contactBooks/${b.id}`);
  t.is(again.status, 404);
  t.is(again.body.error.code, 'NOT_FOUND');
});

test('books are per team; SENDING keys and missing keys are refused', async (t) => {
  const b = (await create({ name: 'Mine' })).body;
  const otherKey = (await twoTeams(t0, { b: { name: 'Stranger' } })).b.key;
  t.is((await t0.request('GET', `/v1/contactBooks/${b.id}`, { key: otherKey })).status, 404);
  t.is((await t0.request('PATCH', `/v1/contactBooks/${b.id}`, { key: otherKey, body: { name: 'x' } })).status, 404);
  t.is((await t0.request('DELETE', `/v1/contactBooks/${b.id}`, { key: otherKey })).status, 404);
  t.false((await t0.request('GET', '/v1/contactBooks', { key: otherKey })).body.some((x: any) => x.id === b.id));
  const sending = (await t0.app.services.apiKeys.create(t0.teamId, { name: 's', permission: 'SENDING' })).token;
  const forbidden = await t0.request('GET', '/v1/contactBooks', { key: sending });
  t.is(forbidden.status, 403);
  t.is(forbidden.body.error.code, 'FORBIDDEN');
  t.is((await t0.request('GET', '/v1/contactBooks', { key: null })).status, 401);
  t.is((await t0.request('PUT', '/v1/contactBooks')).status, 405);
});

// Writes into a book that is being deleted: each one was checked against the book, then
// inserted after the book was gone, and the foreign key refused it with a 500. They are
// answered as a request after the deletion would be.
test('adding contacts or segments to a book while it is deleted is a 200 or a not-found, never a 500', async (t) => {
  const statuses = new Set<string>();
  for (let round = 0; round < 8; round++) {
    const book = (await create({ name: `Doomed ${round}` })).body.id;
    const results = await Promise.all([
      ...Array.from({ length: 3 }, (_, i) => t0.request('POST', '/v1/segments', { body: { name: `s${i}`, contactBookId: book, filters: { match: 'all', conditions: [] } } })),
      ...Array.from({ length: 3 }, (_, i) => t0.request('POST', `/v1/contactBooks/${book}/contacts`, { body: { email: `late${i}@example.com` } })),
      t0.request('POST', `/v1/contactBooks/${book}/contacts/bulk`, { body: [{ email: 'bulk-late@example.com' }] }),
      t0.request('DELETE', `/v1/contactBooks/${book}`),
    ]);
    for (const [i, r] of results.entries()) {
      statuses.add(`${i < 3 ? 'segment' : i < 7 ? 'contact' : 'delete'} ${r.status}`);
      if (i < 3) t.true(r.status === 200 || (r.status === 400 && /^contactBookId: contact book .* not found$/.test(r.body.error.message)), `${i}: ${JSON.stringify(r.body)}`);
      else if (i < 7) t.true(r.status === 200 || (r.status === 404 && r.body.error.code === 'NOT_FOUND'), `${i}: ${JSON.stringify(r.body)}`);
      else t.is(r.status, 200, `${i}: ${JSON.stringify(r.body)}`);
    }
    t.is((await t0.request('GET', `/v1/contactBooks/${book}`)).status, 404);
    t.is((await t0.request('GET', `/v1/segments?contactBookId=${book}`)).body.total ?? 0, 0, 'no segment of a deleted book is left');
  }
  t.log([...statuses].sort().join(', '));
});
