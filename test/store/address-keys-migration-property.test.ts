import { join } from 'node:path';
import { domainToASCII } from 'node:url';
import test, { type ExecutionContext } from 'ava';
import { Migrator, sql, type Kysely } from 'kysely';
import { migrateToLatest } from '../../src/store/migrate.js';
import { MIGRATIONS } from '../../src/store/migrations/index.js';
import { addressKey } from '../../src/store/migrations/address-key-2026-11-29.js';
import { up } from '../../src/store/migrations/20261129060000-address-keys.js';
import { openAppStore } from '../../src/store/open-store.js';
import { createEmptyDatabase, dropTestDatabase, testStoreKind } from '../helpers/pg-databases.js';
import { tempDir } from '../helpers/temp-dir.js';

// Property test of the re-keying migration (address-keys-migration.test.ts has the worked
// examples): random stores whose addresses come from a small pool, so one mailbox is often stored
// under several spellings (A-label, Unicode NFC and NFD, other case) in one team or book. An
// oracle written here (grouping by the frozen key) says what must be left; the real store is
// migrated and checked against it. FUZZ_SEED picks the first seed; each run tries SEEDS of them.

const BEFORE = '20261129050000-segment-email-keys';
const SEEDS = 5;
const FIRST_SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : 20261129;

/** mulberry32: small, seedable, the same sequence on every platform. */
function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1));
  const pick = <T>(xs: readonly T[]): T => xs[int(0, xs.length - 1)]!;
  return { next, int, pick, chance: (p: number) => next() < p };
}
type Rng = ReturnType<typeof prng>;

// ---- the pool ----------------------------------------------------------------------------

const IDN_DOMAINS = ['bücher.example', 'münchen.example'];
const IDN_LOCALS = ['ann', 'bob', 'cy', 'jürgen', 'ju\u0308rgen'];
// Addresses whose domain is ASCII: never touched (a non-ASCII local part stays as it is).
const ASCII_DOMAIN = ['plain@example.net', 'ann@example.net', 'ann@xn--bcher-kva.example.net', 'jürgen@example.net', 'ju\u0308rgen@example.net', 'zoë@example.net'];

const upperFirst = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);

/** One spelling of a mailbox: mostly one with an internationalised domain, in one of its forms. */
function drawAddress(r: Rng): string {
  if (r.chance(0.2)) return r.pick(ASCII_DOMAIN);
  const local = r.pick(IDN_LOCALS);
  const domain = r.pick(IDN_DOMAINS);
  switch (r.int(0, 3)) {
    case 0:
      return `${local}@${domainToASCII(domain)}`;
    case 1:
      return `${local}@${domain}`;
    case 2:
      return `${local}@${domain.normalize('NFD')}`;
    default:
      return `${upperFirst(local)}@${domain.toUpperCase()}`;
  }
}

// ---- the generated store -------------------------------------------------------------------

interface Sup { id?: number; team: number; email: string; reason: string; source: string | null; at: string }
interface Con { id: string; team: number; book: string; email: string; first: string | null; last: string | null; subscribed: number; reason: string | null; props: string; at: string }
interface Mail { id: string; team: number; contact: string | null }
interface Rcpt { campaign: string; contact: string; email: string; unsubscribed: number }
interface World { teams: number[]; books: { id: string; team: number }[]; sups: Sup[]; cons: Con[]; mails: Mail[]; campaigns: { id: string; team: number; book: string }[]; rcpts: Rcpt[] }

function generate(r: Rng, seed: number, teams: number[]): World {
  const used = new Set<string>();
  const stamp = () => {
    // Distinct times, so "the earlier row" is one row.
    for (;;) {
      const iso = new Date(Date.UTC(2026, 9, 1) + r.int(0, 50 * 24 * 60) * 60_000 + r.int(0, 999)).toISOString();
      if (!used.has(iso)) return used.add(iso), iso;
    }
  };
  const w: World = { teams, books: [], sups: [], cons: [], mails: [], campaigns: [], rcpts: [] };
  for (const team of teams) {
    const taken = new Set<string>();
    for (let i = r.int(12, 25); i > 0; i--) {
      const email = drawAddress(r);
      if (taken.has(email)) continue;
      taken.add(email);
      w.sups.push({ team, email, reason: r.pick(['HARD_BOUNCE', 'COMPLAINT', 'MANUAL']), source: r.chance(0.2) ? null : `src_${r.int(1, 999)}`, at: stamp() });
    }
    for (let b = r.int(2, 3); b > 0; b--) w.books.push({ id: `cb_${seed}_${team}_${b}`, team });
  }
  let n = 0;
  const contact = (book: { id: string; team: number }, email: string): Con => {
    const state = r.int(0, 9);
    const props: Record<string, string> = {};
    if (r.chance(0.5)) props.plan = r.pick(['free', 'pro', 'team']);
    if (r.chance(0.4)) props.city = r.pick(['Köln', 'Graz', 'Bern']);
    if (r.chance(0.2)) props[`k${r.int(1, 3)}`] = String(r.int(1, 9));
    return {
      id: `ct_${seed}_${++n}`,
      team: book.team,
      book: book.id,
      email,
      first: r.pick([null, null, '', 'Ann', 'Jürgen', 'Cy']),
      last: r.pick([null, null, '', 'Muster', 'Öz']),
      // Subscribed, pending double opt-in, or unsubscribed (with its reason).
      subscribed: state < 5 ? 1 : 0,
      reason: state < 7 ? null : r.pick(['UNSUBSCRIBED', 'BOUNCED', 'COMPLAINED']),
      props: JSON.stringify(props),
      at: stamp(),
    };
  };
  for (const [i, book] of w.books.entries()) {
    const taken = new Set<string>();
    const add = (email: string) => {
      if (taken.has(email)) return undefined;
      taken.add(email);
      const c = contact(book, email);
      w.cons.push(c);
      return c;
    };
    // The first book always holds one mailbox under both keys, reached by one campaign.
    const pair = i === 0 ? [add('ann@xn--bcher-kva.example')!, add('ann@bücher.example')!] : [];
    for (let k = r.int(5, 12); k > 0; k--) add(drawAddress(r));
    const mine = w.cons.filter((c) => c.book === book.id);
    for (let k = r.int(1, 2); k > 0; k--) {
      const campaign = `cp_${book.id}_${k}`;
      w.campaigns.push({ id: campaign, team: book.team, book: book.id });
      const reached = new Set(mine.filter(() => r.chance(0.5)));
      if (k === 1) pair.forEach((c) => reached.add(c));
      for (const c of reached) {
        const email = `em_${seed}_${w.mails.length + 1}`;
        w.mails.push({ id: email, team: book.team, contact: c.id });
        w.rcpts.push({ campaign, contact: c.id, email, unsubscribed: r.chance(0.3) ? 1 : 0 });
      }
    }
    for (const c of mine) if (r.chance(0.3)) w.mails.push({ id: `em_${seed}_${w.mails.length + 1}`, team: book.team, contact: c.id });
    w.mails.push({ id: `em_${seed}_${w.mails.length + 1}`, team: book.team, contact: null });
  }
  return w;
}

async function load(db: Kysely<any>, w: World): Promise<void> {
  const OLD = '2026-09-01T00:00:00.000Z';
  for (const b of w.books) await sql`insert into contact_books (id, team_id, name, emoji, created_at, updated_at) values (${b.id}, ${b.team}, 'b', 'x', ${OLD}, ${OLD})`.execute(db);
  for (const s of w.sups) {
    s.id = Number((await sql<{ id: number }>`insert into suppressions (team_id, email, reason, source, created_at) values (${s.team}, ${s.email}, ${s.reason}, ${s.source}, ${s.at}) returning id`.execute(db)).rows[0]!.id);
  }
  for (const c of w.cons) {
    await sql`insert into contacts (id, team_id, contact_book_id, email, first_name, last_name, subscribed, unsubscribe_reason, properties_json, created_at, updated_at)
      values (${c.id}, ${c.team}, ${c.book}, ${c.email}, ${c.first}, ${c.last}, ${c.subscribed}, ${c.reason}, ${c.props}, ${c.at}, ${c.at})`.execute(db);
  }
  for (const c of w.campaigns) {
    await sql`insert into campaigns (id, team_id, name, from_addr, subject, contact_book_id, status, batch_size, created_at, updated_at)
      values (${c.id}, ${c.team}, 'c', 'a@news.example', 's', ${c.book}, 'SENT', 10, ${OLD}, ${OLD})`.execute(db);
  }
  for (const m of w.mails) {
    await sql`insert into emails (id, team_id, from_addr, to_json, subject, message_id, latest_status, status_rank, contact_id, created_at, updated_at)
      values (${m.id}, ${m.team}, 'a@news.example', '["x@example.net"]', 's', ${`<${m.id}@x.example>`}, 'SENT', 1, ${m.contact}, ${OLD}, ${OLD})`.execute(db);
  }
  for (const x of w.rcpts) await sql`insert into campaign_recipients (campaign_id, contact_id, email_id, unsubscribed) values (${x.campaign}, ${x.contact}, ${x.email}, ${x.unsubscribed})`.execute(db);
}

// ---- the oracle ----------------------------------------------------------------------------

const byTime = <T extends { at: string }>(a: T, b: T) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0);

function groupBy<T>(rows: T[], key: (r: T) => string): Map<string, T[]> {
  const m = new Map<string, T[]>();
  for (const row of rows) m.set(key(row), [...(m.get(key(row)) ?? []), row]);
  return m;
}

interface ExpectedContact { id: string; book: string; email: string; first: string | null; last: string | null; subscribed: number; reason: string | null; props: Record<string, unknown>; at: string; members: Con[] }

/** What each (book, key) group becomes: the row already under the key, else the oldest; the others folded in, oldest first. */
function expectContacts(cons: Con[]): { kept: Map<string, ExpectedContact>; into: Map<string, string> } {
  const kept = new Map<string, ExpectedContact>();
  const into = new Map<string, string>();
  for (const members of groupBy(cons, (c) => `${c.book} ${addressKey(c.email)}`).values()) {
    const ordered = [...members].sort(byTime);
    const key = addressKey(ordered[0]!.email);
    const head = ordered.find((c) => c.email === key) ?? ordered[0]!;
    const rest = ordered.filter((c) => c !== head);
    const e: ExpectedContact = { id: head.id, book: head.book, email: key, first: head.first, last: head.last, subscribed: head.subscribed, reason: head.reason, props: JSON.parse(head.props), at: head.at, members };
    for (const c of rest) {
      e.first = e.first || c.first;
      e.last = e.last || c.last;
      if (e.reason === null && c.reason !== null) [e.reason, e.subscribed] = [c.reason, 0];
      e.props = { ...JSON.parse(c.props), ...e.props };
      if (c.at < e.at) e.at = c.at;
      into.set(c.id, head.id);
    }
    kept.set(head.id, e);
  }
  return { kept, into };
}

/** Key-value pairs as an object in key order (deepEqual compares a Map's order too). */
const plain = (pairs: Iterable<readonly [string, unknown]>) => Object.fromEntries([...pairs].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));

// ---- the run -------------------------------------------------------------------------------

async function snapshot(db: Kysely<any>) {
  const q = async (text: string) => (await sql.raw(text).execute(db)).rows as any[];
  return {
    suppressions: await q('select id, team_id, email, reason, source, created_at from suppressions order by id'),
    contacts: await q('select * from contacts order by id'),
    emails: await q('select id, contact_id from emails order by id'),
    recipients: await q('select campaign_id, contact_id, email_id, unsubscribed from campaign_recipients order by campaign_id, contact_id'),
    aliases: await q('select id, contact_id from contact_aliases order by id'),
  };
}

async function property(t: ExecutionContext, seed: number): Promise<void> {
  t.log(`FUZZ_SEED=${seed}`);
  const pg = testStoreKind() === 'postgres';
  const url = pg ? await createEmptyDatabase() : '';
  const store = await openAppStore({ url, file: join(tempDir(t, 'posthorn-address-keys-prop-'), 'posthorn.db'), durability: 'normal', poolMax: 2, connectTimeoutMs: 5000 });
  t.teardown(async () => {
    await store.close();
    if (pg) await dropTestDatabase(url);
  });
  const db = store.db as Kysely<any>;
  t.falsy((await new Migrator({ db, provider: { getMigrations: async () => MIGRATIONS } }).migrateTo(BEFORE)).error);
  const teams: number[] = [];
  for (const name of ['one', 'two']) {
    teams.push(Number((await sql<{ id: number }>`insert into teams (name, created_at, updated_at) values (${name}, '2026-09-01T00:00:00.000Z', '2026-09-01T00:00:00.000Z') returning id`.execute(db)).rows[0]!.id));
  }
  const w = generate(prng(seed), seed, teams);
  await load(db, w);

  await migrateToLatest(db);
  const after = await snapshot(db);
  const ctx = `seed ${seed}`;

  // (1) Suppressions: one row per (team, key), under the key, with the earliest row's reason; each team its own.
  const supGroups = groupBy(w.sups, (s) => `${s.team} ${addressKey(s.email)}`);
  t.is(after.suppressions.length, supGroups.size, ctx);
  const supAfter = new Map(after.suppressions.map((s) => [`${Number(s.team_id)} ${s.email}`, s]));
  t.is(supAfter.size, after.suppressions.length, `${ctx}: one suppression per team and key`);
  for (const [group, members] of supGroups) {
    const first = [...members].sort(byTime)[0]!;
    const row = supAfter.get(group);
    t.truthy(row, `${ctx}: ${JSON.stringify(group)} still suppressed`);
    if (!row) continue;
    t.true(members.some((m) => m.id === Number(row.id)), `${ctx}: the row kept is one of the team's own`);
    t.deepEqual({ reason: row.reason, source: row.source, at: row.created_at }, { reason: first.reason, source: first.source, at: first.at }, `${ctx}: ${group} keeps its first reason`);
  }

  // (2) Contacts: unique per (book, key); the kept row as the oracle says.
  const { kept, into } = expectContacts(w.cons);
  t.log(`${w.sups.length} suppressions -> ${supGroups.size}, ${w.cons.length} contacts -> ${kept.size}, ${w.mails.length} emails, ${w.rcpts.length} campaign recipients, largest contact group ${Math.max(...[...kept.values()].map((e) => e.members.length))}`);
  const conAfter = new Map(after.contacts.map((c) => [c.id as string, c]));
  t.deepEqual([...conAfter.keys()].sort(), [...kept.keys()].sort(), `${ctx}: the contacts left`);
  t.is(new Set(after.contacts.map((c) => `${c.contact_book_id} ${c.email}`)).size, after.contacts.length, `${ctx}: one contact per book and key`);
  for (const e of kept.values()) {
    const c = conAfter.get(e.id);
    if (!c) continue;
    t.like(
      { ...c, subscribed: Number(c.subscribed) },
      { contact_book_id: e.book, email: e.email, first_name: e.first, last_name: e.last, subscribed: e.subscribed, unsubscribe_reason: e.reason, created_at: e.at },
      `${ctx}: ${e.id}`,
    );
    t.deepEqual(JSON.parse(c.properties_json), e.props, `${ctx}: ${e.id} properties`);
    // Stated apart from the oracle: unsubscribed anywhere is unsubscribed; never subscribed by the merge.
    if (e.members.some((m) => m.reason !== null)) t.not(c.unsubscribe_reason, null, `${ctx}: ${e.id} stays unsubscribed`);
    if (Number(c.subscribed) === 1) t.true(w.cons.find((m) => m.id === e.id)!.subscribed === 1 && e.members.every((m) => m.reason === null), `${ctx}: ${e.id} subscribed only if it was`);
  }

  // (3) References: at the kept contact of the mailbox in the same book; one recipient row per campaign and contact.
  const keptOf = (id: string) => into.get(id) ?? id;
  const bookOf = new Map(w.cons.map((c) => [c.id, c.book]));
  for (const m of after.emails) {
    const before = w.mails.find((x) => x.id === m.id)!;
    t.is(m.contact_id, before.contact === null ? null : keptOf(before.contact), `${ctx}: email ${m.id}`);
    if (m.contact_id !== null) t.is(conAfter.get(m.contact_id)?.contact_book_id, bookOf.get(before.contact!), `${ctx}: email ${m.id} in its book`);
  }
  t.is(after.emails.length, w.mails.length, ctx);
  const expectedRcpts = new Map<string, number>();
  for (const x of w.rcpts) {
    const k = `${x.campaign} ${keptOf(x.contact)}`;
    expectedRcpts.set(k, Math.max(expectedRcpts.get(k) ?? 0, x.unsubscribed));
  }
  t.deepEqual(
    plain(after.recipients.map((x) => [`${x.campaign_id} ${x.contact_id}`, Number(x.unsubscribed)])),
    plain(expectedRcpts),
    `${ctx}: campaign recipients, unsubscribed if any row of the mailbox was`,
  );
  t.is(new Set(after.recipients.map((x) => `${x.campaign_id} ${x.contact_id}`)).size, after.recipients.length, ctx);
  for (const x of after.recipients) {
    t.true(conAfter.has(x.contact_id), `${ctx}: recipient ${x.contact_id} exists`);
    const sent = w.rcpts.find((y) => y.email === x.email_id)!;
    t.is(keptOf(sent.contact), x.contact_id, `${ctx}: recipient row ${x.email_id} is its mailbox's`);
  }

  // (4) Every contact merged away leads to the one kept.
  t.deepEqual(plain(after.aliases.map((a) => [a.id, a.contact_id])), plain(into), `${ctx}: aliases`);

  // (5) A row already under its key (every ASCII-domain row, a non-ASCII local part too) keeps its
  // id and address; alone in its group it is exactly as it was.
  for (const s of w.sups.filter((s) => addressKey(s.email) === s.email)) {
    const row = after.suppressions.find((x) => Number(x.id) === s.id);
    t.is(row?.email, s.email, `${ctx}: suppression ${s.email} kept`);
    if (supGroups.get(`${s.team} ${s.email}`)!.length === 1) t.like(row, { team_id: row?.team_id, email: s.email, reason: s.reason, source: s.source, created_at: s.at });
  }
  for (const c of w.cons.filter((c) => addressKey(c.email) === c.email)) {
    t.is(conAfter.get(c.id)?.email, c.email, `${ctx}: contact ${c.email} kept`);
    if (kept.get(c.id)?.members.length === 1) {
      t.like(conAfter.get(c.id), { email: c.email, first_name: c.first, last_name: c.last, unsubscribe_reason: c.reason, properties_json: c.props, created_at: c.at, updated_at: c.at }, `${ctx}: ${c.id} untouched`);
    }
  }
  // The pool does collide: a test that never merges proves little.
  t.true(into.size > 0 && [...supGroups.values()].some((g) => g.length > 1), `${ctx}: the store had collisions`);

  // (6) The migration run again changes nothing.
  await up(db);
  t.deepEqual(await snapshot(db), after, `${ctx}: a second run`);
}

for (let i = 0; i < SEEDS; i++) {
  const seed = FIRST_SEED + i;
  test.serial(`re-keying a random store (seed ${seed}) leaves each mailbox one row per team or book, merged as the oracle says, references and aliases at the kept contact, and a second run changes nothing`, (t) => property(t, seed));
}
