import test from 'ava';
import fc from 'fast-check';
import { ManualClock } from '../../src/lib/clock.js';
import { twoTeams } from '../helpers/two-teams.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { createIcuTestDatabase, dropTestDatabase, testStoreKind } from '../helpers/pg-databases.js';
import {
  addressSpellings,
  contactSet,
  filterTreeArb,
  matches,
  normalised,
  propertyParams,
  PROPERTY_KEYS,
  STORED_DOMAINS,
  storedAddress,
  TYPED_PROPERTY_VALUES,
  idnStats,
  UNKNOWN_KEY,
  type OracleContact,
} from './helpers/filter-oracle.js';

// A segment's members, and a campaign's audience, are exactly the contacts of the segment's
// own book that the filter selects, whatever the filter: random any/all trees over three books
// (team A's, and two of team B's) holding the same addresses, names, properties and creation
// times, so a filter that escaped its book would find matching rows everywhere. Some addresses
// have an internationalised domain (typed in Unicode, in any case, or in A-labels; stored in
// A-labels), and email values name or cut them in either form. On PostgreSQL the
// database's default collation is ICU's en-US, not the test server's C: text must order by code
// point there too, as on SQLite.

const DAY = 86_400_000;
const clock = new ManualClock(Date.UTC(2026, 10, 1, 9, 0, 0));
let w: MailWorld;
let icuUrl: string | undefined;
let keyB: string;
let b1: string;
let b1Contacts: OracleContact[];
let suppressedByB: Set<string>;
let addresses: string[];
const createdAts: string[] = [];

const doc = JSON.stringify({ type: 'doc', content: [{ type: 'paragraph', content: [{ type: 'text', text: 'Hello {{firstName}}' }] }] });

async function must(key: string, method: string, path: string, body?: unknown): Promise<any> {
  const res = await w.t0.request(method, path, { key, body });
  if (res.status !== 200) throw new Error(`${method} ${path} -> ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

async function allContacts(key: string, bookId: string): Promise<OracleContact[]> {
  const out: OracleContact[] = [];
  for (let page = 1; ; page++) {
    // A bare array, newest first.
    const body = (await must(key, 'GET', `/v1/contactBooks/${bookId}/contacts?limit=100&page=${page}`)) as OracleContact[];
    out.push(...body);
    if (body.length < 100) return out;
  }
}

test.before(async () => {
  icuUrl = testStoreKind() === 'postgres' ? await createIcuTestDatabase() : undefined;
  w = await startMailWorld({ clock, overrides: { rateLimit: { perSecond: 1_000_000 }, campaigns: { batchWindowSeconds: 60 }, ...(icuUrl ? { store: { url: icuUrl } } : {}) } });
  for (const d of STORED_DOMAINS) w.addRecipientDomain(d);
  const app = w.t0.app;
  keyB = (await twoTeams(w.t0, { b: { domains: ['bee-mail.dev'] } })).b.key;
  const keyA = w.t0.key;

  const a1 = (await must(keyA, 'POST', '/v1/contactBooks', { name: 'A one' })).id;
  b1 = (await must(keyB, 'POST', '/v1/contactBooks', { name: 'B one' })).id;
  const b2 = (await must(keyB, 'POST', '/v1/contactBooks', { name: 'B two' })).id;
  const data = contactSet(7, 48);
  // Four days of imports: every book gets the same rows at the same instants.
  for (let day = 0; day < 4; day++) {
    const part = data.slice(day * 12, day * 12 + 12);
    for (const [key, book] of [[keyA, a1], [keyB, b1], [keyB, b2]] as const) await must(key, 'POST', `/v1/contactBooks/${book}/contacts/bulk`, part);
    createdAts.push(clock.now().toISOString(), new Date(clock.nowMs() + DAY / 2).toISOString());
    clock.advance(DAY);
  }
  // Each team suppresses its own addresses; A's suppressions must not touch B's campaigns.
  suppressedByB = new Set();
  for (const [i, c] of data.entries()) {
    if (i % 7 === 0) await must(keyA, 'POST', '/v1/suppressions', { email: c.email, reason: 'MANUAL' });
    if (i % 5 === 0) {
      await must(keyB, 'POST', '/v1/suppressions', { email: c.email, reason: 'MANUAL' });
      suppressedByB.add(storedAddress(c.email)!);
    }
  }
  // Some properties hold a JSON number, boolean or null: the API never writes one (it keeps text),
  // but a store may hold them, and they compare as json_extract's typed values do on SQLite.
  let typed = 0;
  for (const [i, c] of data.entries()) {
    if (i % 4 !== 1) continue;
    const properties = { ...c.properties, [PROPERTY_KEYS[i % PROPERTY_KEYS.length]!]: TYPED_PROPERTY_VALUES[typed++ % TYPED_PROPERTY_VALUES.length] };
    const set = await app.store.db.updateTable('contacts').set({ properties_json: JSON.stringify(properties) }).where('email', '=', storedAddress(c.email)!).executeTakeFirst();
    if (Number(set.numUpdatedRows) !== 3) throw new Error(`${c.email}: ${set.numUpdatedRows} rows`);
  }
  b1Contacts = await allContacts(keyB, b1);
  if (b1Contacts.length !== data.length) throw new Error(`book B one holds ${b1Contacts.length} contacts`);
  // Keyed on save: each address is stored as the oracle keys it, however its domain was typed.
  const stored = b1Contacts.map((c) => c.email).sort();
  const want = data.map((c) => storedAddress(c.email)!).sort();
  if (JSON.stringify(stored) !== JSON.stringify(want)) throw new Error(`stored ${JSON.stringify(stored)}, keyed ${JSON.stringify(want)}`);
  addresses = addressSpellings(stored);
});
test.after.always(async () => {
  await w?.close();
  if (icuUrl) await dropTestDatabase(icuUrl);
});

test.serial('the issue\'s case: an "any" segment of team B lists only its own contact', async (t) => {
  const book = (await must(keyB, 'POST', '/v1/contactBooks', { name: 'Solo' })).id;
  const only = await must(keyB, 'POST', `/v1/contactBooks/${book}/contacts`, { email: 'bee@example.net', firstName: 'Bee' });
  const seg = await must(keyB, 'POST', '/v1/segments', {
    name: 'any',
    contactBookId: book,
    filters: { match: 'any', conditions: [{ field: 'firstName', op: 'eq', value: 'Bee' }, { field: 'email', op: 'contains', value: '@' }] },
  });
  const members = await must(keyB, 'GET', `/v1/segments/${seg.id}/contacts?limit=100`);
  t.deepEqual(
    members.contacts.map((c: any) => c.id),
    [only.contactId],
  );
  t.is(members.total, 1);
});

test.serial('property: segment members are exactly the oracle\'s selection of the segment\'s book', async (t) => {
  const seg = await must(keyB, 'POST', '/v1/segments', { name: 'prop', contactBookId: b1, filters: { match: 'all', conditions: [] } });
  let nonEmpty = 0;
  await fc.assert(
    fc.asyncProperty(filterTreeArb(createdAts, 5, addresses), async (tree) => {
      const patched = await must(keyB, 'PATCH', `/v1/segments/${seg.id}`, { filters: tree });
      // The oracle reads the filter as sent, kept as the docs say (an email eq keyed, ...); the
      // store's keeping of it must agree, but for a value the oracle knows to match no one.
      const filters = normalised(tree);
      const kept = JSON.stringify(filters).includes(JSON.stringify(UNKNOWN_KEY).slice(1, -1)) || JSON.stringify(patched.filters) === JSON.stringify(filters);
      t.true(kept, `kept as ${JSON.stringify(patched.filters)}, not ${JSON.stringify(filters)}`);
      const res = await must(keyB, 'GET', `/v1/segments/${seg.id}/contacts?limit=100`);
      const got = (res.contacts as OracleContact[]).map((c) => c.id).sort();
      const want = b1Contacts.filter((c) => matches(c, filters)).map((c) => c.id).sort();
      if (want.length) nonEmpty++;
      t.is(res.total, want.length, JSON.stringify(patched.filters));
      t.deepEqual(got, want, JSON.stringify(patched.filters));
      return kept && res.total === want.length && JSON.stringify(got) === JSON.stringify(want);
    }),
    propertyParams(300),
  );
  t.true(nonEmpty > 30, `only ${nonEmpty} trees selected anyone: the generator is too narrow`);
  t.log(`email terms: ${idnStats.foundByALabels} finds by A-labels alone, ${idnStats.refusedAsPartial} A-label forms found only as part of a label`);
  t.true(idnStats.foundByALabels > 20 && idnStats.refusedAsPartial > 5, 'the generator reaches internationalised domains in both ways');
});

test.serial("property: a campaign to such a segment delivers to exactly those contacts (subscribed, not suppressed by the sender's team)", async (t) => {
  let run = 0;
  let delivered = 0;
  await fc.assert(
    fc.asyncProperty(filterTreeArb(createdAts, 5, addresses), async (tree) => {
      run++;
      const seg = await must(keyB, 'POST', '/v1/segments', { name: `c${run}`, contactBookId: b1, filters: tree });
      const before = w.sink.messages.length;
      const c = await must(keyB, 'POST', '/v1/campaigns', {
        name: `run ${run}`,
        from: 'news@bee-mail.dev',
        subject: `run ${run}`,
        contactBookId: b1,
        segmentId: seg.id,
        content: doc,
        sendNow: true,
        batchSize: 1000,
      });
      await w.t0.app.runCampaigns();
      await w.settle();
      // The sink (smtp-server) shows an A-label domain in Unicode: keyed back, as the oracle keys.
      const got = w.sink.messages.slice(before).flatMap((m) => m.rcptTo.map((r) => storedAddress(r))).sort();
      const want = b1Contacts
        .filter((x) => x.subscribed && !suppressedByB.has(x.email) && matches(x, normalised(tree)))
        .map((x) => x.email)
        .sort();
      delivered += got.length;
      const status = (await must(keyB, 'GET', `/v1/campaigns/${c.id}`)).status;
      t.is(status, 'SENT', `campaign ${c.id}`);
      t.deepEqual(got, want, JSON.stringify(seg.filters));
      return JSON.stringify(got) === JSON.stringify(want);
    }),
    propertyParams(15),
  );
  t.true(delivered > 0, 'some campaign reached someone');
});
