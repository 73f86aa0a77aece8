import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { ConsoleClient } from '../console/helpers/console-client.js';
import { twoTeams } from '../helpers/two-teams.js';

// Searches of addresses whose domain is internationalised (docs/api.md, "Searching addresses"):
// addresses are stored with the domain in A-labels, and a search that writes the domain in
// Unicode finds them as one that writes it in A-labels does, wherever it is typed: the
// suppressions list, a segment's contains/startsWith/endsWith on email, the console's
// contact and suppression searches. Two teams hold the same addresses; team A holds one more,
// so a search that reaches past the wall shows it.

let t0: TestApp;
let keyB: string;
const books: Record<'a' | 'b', string> = { a: '', b: '' };

/** Written in Unicode; stored with the domain in A-labels. */
const ADDRESSES = ['ute@bücher.example', 'max@büchershop.example', 'ann@mail.bücher.example', '"jürgen"@example.net', 'x_y%z@example.net', 'plain@example.net', 'eva@münchen.2026.example', 'eli@example.ΕΛΛΆΣ'];
const STORED: Record<string, string> = {
  ute: 'ute@xn--bcher-kva.example',
  max: 'max@xn--bchershop-q9a.example',
  ann: 'ann@mail.xn--bcher-kva.example',
  jürgen: '"jürgen"@example.net',
  xyz: 'x_y%z@example.net',
  plain: 'plain@example.net',
  eva: 'eva@xn--mnchen-3ya.2026.example',
  // A capital Σ is σ, also where it ends the domain (toLowerCase would make it ς there).
  eli: 'eli@example.xn--hxarsa5b',
};
const ONLY_A = 'only-a@bücher.example';

async function fill(key: string, extra: string[] = []): Promise<string> {
  const book = (await t0.request('POST', '/v1/contactBooks', { body: { name: 'book' }, key })).body.id as string;
  const added = await t0.request('POST', `/v1/contactBooks/${book}/contacts/bulk`, { body: [...ADDRESSES, ...extra].map((email) => ({ email })), key });
  if (added.status !== 200 || added.body.errors?.length) throw new Error(JSON.stringify(added.body));
  const sup = await t0.request('POST', '/v1/suppressions/bulk', { body: { emails: [...ADDRESSES, ...extra] }, key });
  if (sup.status !== 200) throw new Error(JSON.stringify(sup.body));
  return book;
}

test.before(async () => {
  t0 = await startTestApp();
  keyB = (await twoTeams(t0, { b: { consoleUser: 'b@b.example' } })).b.key;
  books.a = await fill(t0.key, [ONLY_A]);
  books.b = await fill(keyB);
});
test.after.always(async () => {
  await t0?.close();
});

const names = (emails: string[]) => emails.map((e) => Object.keys(STORED).find((k) => STORED[k] === e) ?? e).sort();

/** [term, the names of B's rows a contains-search for it finds] */
const CONTAINS: [string, string[]][] = [
  // The domain in Unicode, in any case, finds what its A-labels find.
  ['bücher.example', ['ann', 'ute']],
  ['BÜCHER.Example', ['ann', 'ute']],
  ['xn--bcher-kva.example', ['ann', 'ute']],
  ['@bücher.example', ['ute']],
  ['@xn--bcher-kva.example', ['ute']],
  ['ute@bücher.example', ['ute']],
  ['Ute@Bücher.Example', ['ute']],
  ['e@bücher.ex', ['ute']],
  // After an @ the term starts a domain, and its last label is taken as whole.
  ['@bücher', ['ute']],
  ['ute@bücher', ['ute']],
  ['@büchershop', ['max']],
  ['.bücher.example', ['ann']],
  ['mail.bücher', ['ann']],
  ['büchershop.example', ['max']],
  // A domain typed up to a label of digits is still a domain (no IPv4 address).
  ['münchen.2026', ['eva']],
  ['@münchen.20', ['eva']],
  ['münchen.2026.', ['eva']],
  ['@münchen.2026.example', ['eva']],
  // A capital Σ ending the term is σ; a typed ς is another letter, so another domain.
  ['@example.ΕΛΛΆΣ', ['eli']],
  ['example.ελλάσ', ['eli']],
  ['example.ελλάς', []],
  // A bare word is a fragment of a label: matched as typed only.
  ['bücher', []],
  ['@büch', []],
  // Wildcards stay characters, beside an internationalised domain too.
  ['%bücher.example', []],
  ['bü_her.example', []],
  ['@bücher.%', []],
  ['_@bücher.example', []],
  // Text outside the domain is matched as typed (a quoted local part may hold UTF-8).
  ['jürgen', ['jürgen']],
  ['"JÜRGEN"@', ['jürgen']],
  ['example.net', ['jürgen', 'plain', 'xyz']],
];

test('a suppressions search finds an internationalised domain written in Unicode or in A-labels, and only the caller\'s entries', async (t) => {
  const search = async (q: string, key = keyB) => {
    const res = await t0.request('GET', `/v1/suppressions?limit=100&search=${encodeURIComponent(q)}`, { key });
    t.is(res.status, 200, JSON.stringify(res.body));
    t.is(res.body.total, res.body.suppressions.length, `${q}: total`);
    return (res.body.suppressions as { email: string }[]).map((s) => s.email);
  };
  for (const [term, want] of CONTAINS) t.deepEqual(names(await search(term)), want, `search=${term}`);
  // The wall: team A's extra entry is found by A, in either form, and never by B.
  for (const term of ['only-a@bücher.example', 'only-a@xn--bcher-kva.example', '@bücher', 'bücher.example']) {
    t.true((await search(term, t0.key)).includes('only-a@xn--bcher-kva.example'), `A: ${term}`);
    t.false((await search(term)).some((e) => e.startsWith('only-a@')), `B: ${term}`);
  }
});

test('a segment\'s contains, startsWith and endsWith on email find an internationalised domain written in Unicode or in A-labels, inside the caller\'s book', async (t) => {
  const members = async (op: string, value: string, key = keyB, book = books.b) => {
    const seg = await t0.request('POST', '/v1/segments', { body: { name: 's', contactBookId: book, filters: { match: 'all', conditions: [{ field: 'email', op, value }] } }, key });
    t.is(seg.status, 200, JSON.stringify(seg.body));
    const res = await t0.request('GET', `/v1/segments/${seg.body.id}/contacts?limit=100`, { key });
    t.is(res.status, 200, JSON.stringify(res.body));
    return (res.body.contacts as { email: string }[]).map((c) => c.email);
  };
  for (const [term, want] of CONTAINS) t.deepEqual(names(await members('contains', term)), want, `contains ${term}`);
  const cases: [string, string, string[]][] = [
    ['startsWith', 'ute@bücher', ['ute']],
    ['startsWith', 'ute@bücher.example', ['ute']],
    ['startsWith', 'UTE@xn--bcher-kva', ['ute']],
    ['startsWith', 'ute@büch', []],
    // Without an @ a startsWith term is the start of a local part, not a domain.
    ['startsWith', 'bücher.example', []],
    ['endsWith', '@bücher.example', ['ute']],
    ['endsWith', 'bücher.example', ['ann', 'ute']],
    ['endsWith', '.bücher.example', ['ann']],
    // An A-label keeps its code at the label's end: the end of a label is no part of it.
    ['endsWith', 'shop.example', []],
    ['endsWith', 'bücher', []],
    ['endsWith', '%.example', []],
  ];
  for (const [op, value, want] of cases) t.deepEqual(names(await members(op, value)), want, `${op} ${value}`);
  // The filter reads back as it was written (lowercased): the rule applies when it is evaluated.
  const seg = await t0.request('POST', '/v1/segments', { body: { name: 's', contactBookId: books.b, filters: { match: 'all', conditions: [{ field: 'email', op: 'contains', value: '@Bücher' }] } }, key: keyB });
  t.deepEqual(seg.body.filters.conditions, [{ field: 'email', op: 'contains', value: '@bücher' }]);
  // The wall: A's book holds one more at bücher.example; B's segment never sees it.
  t.deepEqual(names(await members('contains', '@bücher', t0.key, books.a)), ['only-a@xn--bcher-kva.example', 'ute']);
  t.false((await members('contains', 'only-a@bücher')).length > 0);
  const foreign = await t0.request('POST', '/v1/segments', { body: { name: 's', contactBookId: books.a, filters: { match: 'all', conditions: [{ field: 'email', op: 'contains', value: '@bücher' }] } }, key: keyB });
  t.is(foreign.status, 400, JSON.stringify(foreign.body));
});

test('the console\'s contact and suppression searches find an internationalised domain written in Unicode or in A-labels, and only the caller\'s rows', async (t) => {
  const c = new ConsoleClient(t0.baseUrl);
  await c.signIn('b@b.example');
  const found = (html: string) => Object.values(STORED).filter((e) => html.includes(e.replace(/"/g, '&quot;')));
  for (const page of [`/console/contacts/${books.b}`, '/console/suppressions']) {
    for (const [term, want] of CONTAINS) {
      const res = await c.get(`${page}?q=${encodeURIComponent(term)}`);
      t.is(res.status, 200, `${page} ${term}`);
      t.deepEqual(names(found(res.text)), want, `${page}?q=${term}`);
      t.false(res.text.includes('only-a@'), `${page}?q=${term}: team A's address`);
    }
    // The term is shown back in the search box; team A's stored address is not shown.
    t.false((await c.get(`${page}?q=${encodeURIComponent('only-a@bücher.example')}`)).text.includes('only-a@xn--'));
  }
  t.is((await c.get(`/console/contacts/${books.a}?q=${encodeURIComponent('@bücher')}`)).status, 404);
});
