import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';

// Contact books are the team's, but a book's confirmation email goes out under one domain's
// name: a key bound to domain A edits the double opt-in settings (sender, subject, text) of
// books that confirm from A, and of none that confirm from another domain of the team.

let t0: TestApp;
let a: any;
let b: any;
let keyA: string;
const content = (word: string) => JSON.stringify({ type: 'doc', content: [{ type: 'button', attrs: { text: word, url: '{{confirmUrl}}' } }] });

test.before(async () => {
  t0 = await startTestApp();
  a = await addVerifiedDomain(t0, 'keys-a.dev');
  b = await addVerifiedDomain(t0, 'keys-b.dev');
  keyA = (await t0.app.services.apiKeys.create(t0.teamId, { name: 'bound to A', permission: 'FULL', domainId: a.id })).token;
});
test.after.always(async () => {
  await t0?.close();
});

const create = (body: unknown, key?: string) => t0.request('POST', '/v1/contactBooks', { body, key });
const patch = (id: string, body: unknown, key?: string) => t0.request('PATCH', `/v1/contactBooks/${id}`, { body, key });
const get = async (id: string) => (await t0.request('GET', `/v1/contactBooks/${id}`)).body;

/** A book confirming from `domain`, made with the team's unrestricted key. */
async function bookFrom(domain: any, enabled = true): Promise<any> {
  const res = await create({ name: `from ${domain.name}`, doubleOptInEnabled: enabled, doubleOptInFrom: `News <news@${domain.name}>`, doubleOptInSubject: 'Confirm', doubleOptInContent: content('Yes') });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  return res.body;
}

function refused(t: any, res: { status: number; body: any }, field: string) {
  t.is(res.status, 403, JSON.stringify(res.body));
  t.is(res.body.error.code, 'FORBIDDEN');
  t.is(res.body.error.message.split(':')[0], field);
  t.regex(res.body.error.message, new RegExp(`this API key is restricted to domain ${a.id}`));
}

test('the door: a key bound to A edits the double opt-in settings of a book confirming from A', async (t) => {
  const book = await bookFrom(a);
  const res = await patch(book.id, { doubleOptInSubject: 'Please confirm', doubleOptInContent: content('Confirm'), doubleOptInFrom: `Other <other@${a.name}>` }, keyA);
  t.is(res.status, 200, JSON.stringify(res.body));
  t.is(res.body.doubleOptInSubject, 'Please confirm');
  t.is(res.body.doubleOptInContent, content('Confirm'));
  t.is(res.body.doubleOptInFrom, `Other <other@${a.name}>`);
  const off = await patch(book.id, { doubleOptInEnabled: false }, keyA);
  t.is(off.status, 200, JSON.stringify(off.body));
  t.false(off.body.doubleOptInEnabled);
  const created = await create({ name: 'made by A', doubleOptInEnabled: true, doubleOptInFrom: `news@${a.name}`, doubleOptInSubject: 'Hi' }, keyA);
  t.is(created.status, 200, JSON.stringify(created.body));
});

test("the walls: a key bound to A changes nothing of the double opt-in of a book confirming from B", async (t) => {
  const book = await bookFrom(b);
  refused(t, await patch(book.id, { doubleOptInSubject: 'Words under B' }, keyA), 'doubleOptInSubject');
  refused(t, await patch(book.id, { doubleOptInContent: content('Words under B') }, keyA), 'doubleOptInContent');
  refused(t, await patch(book.id, { doubleOptInEnabled: false }, keyA), 'doubleOptInEnabled');
  refused(t, await patch(book.id, { doubleOptInFrom: `other@${b.name}` }, keyA), 'doubleOptInFrom');
  // Nor takes the book over to its own domain, nor clears its sender.
  refused(t, await patch(book.id, { doubleOptInFrom: `news@${a.name}` }, keyA), 'doubleOptInFrom');
  refused(t, await patch(book.id, { doubleOptInEnabled: false, doubleOptInFrom: null }, keyA), 'doubleOptInFrom');
  // A refused PATCH writes none of its fields.
  refused(t, await patch(book.id, { name: 'renamed', doubleOptInSubject: 'Words under B' }, keyA), 'doubleOptInSubject');
  t.deepEqual(await get(book.id), book);
});

test("the walls hold while the book's double opt-in is off: its confirmations would still come from B", async (t) => {
  const book = await bookFrom(b, false);
  refused(t, await patch(book.id, { doubleOptInSubject: 'Words under B' }, keyA), 'doubleOptInSubject');
  refused(t, await patch(book.id, { doubleOptInEnabled: true }, keyA), 'doubleOptInFrom');
  t.deepEqual(await get(book.id), book);
});

test('the walls: a key bound to A makes no book confirming from B, and moves none of its own to B', async (t) => {
  refused(t, await create({ name: 'under B', doubleOptInEnabled: true, doubleOptInFrom: `news@${b.name}` }, keyA), 'doubleOptInFrom');
  refused(t, await create({ name: 'under B, off', doubleOptInFrom: `news@${b.name}`, doubleOptInSubject: 'Words under B' }, keyA), 'doubleOptInFrom');
  t.false((await t0.request('GET', '/v1/contactBooks')).body.some((x: any) => x.name.startsWith('under B')), 'nothing created');
  const mine = await bookFrom(a);
  refused(t, await patch(mine.id, { doubleOptInFrom: `news@${b.name}` }, keyA), 'doubleOptInFrom');
  refused(t, await patch(mine.id, { doubleOptInFrom: `news@${b.name}`, doubleOptInSubject: 'Words under B' }, keyA), 'doubleOptInFrom');
  t.deepEqual(await get(mine.id), mine);
});

test("what stays open: a key bound to A reads B's book, renames it, resends what it already holds; unrestricted keys edit it all", async (t) => {
  const book = await bookFrom(b);
  const read = await t0.request('GET', `/v1/contactBooks/${book.id}`, { key: keyA });
  t.is(read.status, 200);
  t.is(read.body.doubleOptInFrom, book.doubleOptInFrom);
  t.true((await t0.request('GET', '/v1/contactBooks', { key: keyA })).body.some((x: any) => x.id === book.id));
  const renamed = await patch(book.id, { name: 'renamed by A', emoji: '📗', variables: ['company'] }, keyA);
  t.is(renamed.status, 200, JSON.stringify(renamed.body));
  // A client that sends the book back as it read it changes no double opt-in setting.
  const same = await patch(book.id, { name: 'again', doubleOptInEnabled: true, doubleOptInFrom: book.doubleOptInFrom, doubleOptInSubject: 'Confirm', doubleOptInContent: content('Yes') }, keyA);
  t.is(same.status, 403, 'naming B as sender is refused even unchanged: the key may not send from B');
  const unchanged = await patch(book.id, { name: 'again', doubleOptInEnabled: true, doubleOptInSubject: 'Confirm', doubleOptInContent: content('Yes') }, keyA);
  t.is(unchanged.status, 200, JSON.stringify(unchanged.body));
  t.is(unchanged.body.name, 'again');
  const full = await patch(book.id, { doubleOptInSubject: 'Changed by the team', doubleOptInFrom: `news@${a.name}` });
  t.is(full.status, 200, JSON.stringify(full.body));
  t.is(full.body.doubleOptInSubject, 'Changed by the team');
});
