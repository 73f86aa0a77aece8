import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';

// Matching that ignores case folds every letter, not only ASCII, and the same way on SQLite and
// PostgreSQL: a segment's audience (and so who a campaign mails) and a search's result must not
// depend on the store. Every answer is checked as an exact set.
//
// Both stores lower text with Unicode's full lowercase mapping, not case folding: JavaScript's
// toLowerCase() on SQLite, ICU's root-locale lower() on PostgreSQL, which agree letter for
// letter. The expectations below are the ones both give. Where lowercasing is not what a
// person might expect, it is so on both stores alike, which is what matters for an audience:
// - "ß" has no one-letter uppercase, and lowercasing never turns "SS" into "ß": "STRASSE" does
//   not find "Straße" (case folding would; neither engine folds). The capital "ẞ" does lower to "ß".
// - The dotted capital "İ" lowers to "i" plus a combining dot above, and "I" to "i" (the root
//   locale, not Turkish rules): "istanbul" does not find "İstanbul".
// - Accents are letters, not case: "emile" does not find "Émile".
// - Text is compared in the form it was stored, composed or decomposed: no NFC on either side
//   (normalize() on every row made a search on PostgreSQL about three times slower).
// - The one context-dependent letter is folded: small final "ς" and "σ" are one letter, so a
//   word's start ("ΚΑΣ", lowered "κας") finds the word ("ΚΑΣΤΡΟΣ", lowered "καστρος").

let t0: TestApp;
let bookId: string;
const contactIds: Record<string, string> = {};

const PEOPLE: { label: string; firstName: string; lastName: string; city?: string }[] = [
  { label: 'Émile', firstName: 'Émile', lastName: 'Müller', city: 'ZÜRICH' },
  { label: 'ÉMILE', firstName: 'ÉMILE', lastName: 'MÜLLER', city: 'zürich' },
  { label: 'Emile', firstName: 'Emile', lastName: 'Muller', city: 'Zurich' },
  { label: 'Straße', firstName: 'Anna', lastName: 'Straße' },
  { label: 'STRASSE', firstName: 'Ben', lastName: 'STRASSE' },
  { label: 'İstanbul', firstName: 'Cem', lastName: 'İstanbul' },
  { label: 'ÖL_50%', firstName: 'Dora', lastName: 'ÖL_50%' },
  { label: 'ÖLX50', firstName: 'Ede', lastName: 'ÖLX50' },
  { label: 'ΚΑΣΤΡΟΣ', firstName: 'Ζωή', lastName: 'ΚΑΣΤΡΟΣ' },
];

const TITLES = ['Émile welcome', 'ÉMILE promo', 'Emile plain', 'Grüße aus Köln', 'GRÜSSE', 'ΚΑΣΤΡΟΣ'];
const titleIds: Record<'templates' | 'campaigns', Record<string, string>> = { templates: {}, campaigns: {} };

test.before(async () => {
  t0 = await startTestApp();
  bookId = (await t0.request('POST', '/v1/contactBooks', { body: { name: 'Folding' } })).body.id;
  for (const [i, p] of PEOPLE.entries()) {
    const res = await t0.request('POST', `/v1/contactBooks/${bookId}/contacts`, {
      body: { email: `p${i}@example.net`, firstName: p.firstName, lastName: p.lastName, ...(p.city ? { properties: { city: p.city } } : {}) },
    });
    if (res.status !== 200) throw new Error(JSON.stringify(res.body));
    contactIds[p.label] = res.body.contactId;
  }
  await addVerifiedDomain(t0, 'fold.dev');
  for (const name of TITLES) {
    titleIds.templates[name] = (await t0.request('POST', '/v1/templates', { body: { name, subject: 'hello' } })).body.id;
    titleIds.campaigns[name] = (await t0.request('POST', '/v1/campaigns', { body: { name, from: 'x@fold.dev', subject: 'hello', contactBookId: bookId, html: '<p>hi</p>' } })).body.id;
  }
});
test.after.always(async () => {
  await t0?.close();
});

/** Labels of the contacts a one-condition segment selects, sorted. */
async function members(field: string, op: string, value: string): Promise<string[]> {
  const seg = await t0.request('POST', '/v1/segments', { body: { name: 's', contactBookId: bookId, filters: { match: 'all', conditions: [{ field, op, value }] } } });
  if (seg.status !== 200) throw new Error(JSON.stringify(seg.body));
  const res = await t0.request('GET', `/v1/segments/${seg.body.id}/contacts?limit=100`);
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  const label = new Map(Object.entries(contactIds).map(([k, v]) => [v, k]));
  return (res.body.contacts as { id: string }[]).map((c) => label.get(c.id)!).sort();
}

const SEGMENT_CASES: [string, string, string, string[]][] = [
  ['firstName', 'contains', 'émile', ['ÉMILE', 'Émile']],
  ['firstName', 'contains', 'ÉMILE', ['ÉMILE', 'Émile']],
  ['firstName', 'startsWith', 'éM', ['ÉMILE', 'Émile']],
  ['firstName', 'contains', 'emile', ['Emile']],
  ['lastName', 'contains', 'müller', ['ÉMILE', 'Émile']],
  ['lastName', 'endsWith', 'ÜLLER', ['ÉMILE', 'Émile']],
  ['properties.city', 'contains', 'Zürich', ['ÉMILE', 'Émile']],
  ['lastName', 'contains', 'straße', ['Straße']],
  ['lastName', 'contains', 'STRAẞE', ['Straße']],
  ['lastName', 'contains', 'strasse', ['STRASSE']],
  ['lastName', 'contains', 'istanbul', []],
  ['lastName', 'contains', 'İSTANBUL', ['İstanbul']],
  // Sigma lowers to "ς" at the end of a word and "σ" elsewhere: the start of a word, in its own
  // case, finds the word, and either small sigma finds either.
  ['lastName', 'startsWith', 'ΚΑΣ', ['ΚΑΣΤΡΟΣ']],
  ['lastName', 'contains', 'καστροσ', ['ΚΑΣΤΡΟΣ']],
  ['lastName', 'contains', 'κας', ['ΚΑΣΤΡΟΣ']],
  ['lastName', 'endsWith', 'ος', ['ΚΑΣΤΡΟΣ']],
  // LIKE's wildcards stay text after folding.
  ['lastName', 'startsWith', 'öl_', ['ÖL_50%']],
  ['lastName', 'endsWith', '0%', ['ÖL_50%']],
  ['lastName', 'contains', 'ö%5', []],
];

test('segment text operators ignore case in any alphabet, with the same audience on every store', async (t) => {
  for (const [field, op, value, expected] of SEGMENT_CASES) t.deepEqual(await members(field, op, value), expected, `${field} ${op} ${value}`);
});

test('template and campaign searches ignore case in any alphabet', async (t) => {
  const search = async (what: 'templates' | 'campaigns', q: string) => {
    const res = await t0.request('GET', `/v1/${what}?search=${encodeURIComponent(q)}&limit=100`);
    t.is(res.status, 200, JSON.stringify(res.body));
    const name = new Map(Object.entries(titleIds[what]).map(([k, v]) => [v, k]));
    return (res.body[what] as { id: string }[]).map((x) => name.get(x.id)).filter((x) => x !== undefined).sort();
  };
  for (const what of ['templates', 'campaigns'] as const) {
    t.deepEqual(await search(what, 'émile'), ['ÉMILE promo', 'Émile welcome'].sort(), `${what}: émile`);
    t.deepEqual(await search(what, 'ÉMILE'), ['ÉMILE promo', 'Émile welcome'].sort(), `${what}: ÉMILE`);
    t.deepEqual(await search(what, 'grüße AUS köln'), ['Grüße aus Köln'], `${what}: grüße AUS köln`);
    t.deepEqual(await search(what, 'grüsse'), ['GRÜSSE'], `${what}: grüsse`);
    t.deepEqual(await search(what, 'ΚΑΣ'), ['ΚΑΣΤΡΟΣ'], `${what}: ΚΑΣ`);
  }
});
