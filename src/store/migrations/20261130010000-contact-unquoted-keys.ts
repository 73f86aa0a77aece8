import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// `"ann"@x` and `ann@x` are one mailbox (RFC 5321 4.1.2), and a send writes it unquoted. A
// contact added as `"ann"@x` was keyed with the quotes, so one book could hold the mailbox twice
// and a campaign to it mailed the person twice; contacts are now keyed without quotes a local
// part does not need (mailboxKey, core/emails/addresses.ts). Keyed here the same way.
//
// Where the key is already taken in the book, the two contacts are merged as
// 20261129060000-address-keys merged them, except that the older contact stays (its id is the
// one the longest history names; order by creation time, then id):
// - it is unsubscribed if the other was (its reason; otherwise it keeps its own state, a pending
//   double opt-in too: never subscribed by the merge), takes the names and properties it lacks
//   from the other (its properties written as canonical JSON, keys sorted, as every write
//   stores them), and the merge moves its updated_at;
// - emails and campaign recipients of the other point at it (a campaign that reached both keeps
//   the kept contact's row, unsubscribed if either was);
// - contact_aliases leads the other's id to it (links in mail already sent: unsubscribe, double
//   opt-in confirmation), and so do aliases that led to the other (merged by the earlier migration).
// Segment filters (and the snapshots of campaigns started from one) whose email eq, neq or in
// value is such a quoted address are keyed the same way, as a filter saved now is.
// All in one transaction; a second run finds nothing quoted to do.

const DOT_ATOM_QUOTED = /^"([A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*)"(@.*)$/s;

/** The address without quotes its local part does not need; as it is otherwise. */
function unquotedKey(address: string): string {
  const m = DOT_ATOM_QUOTED.exec(address);
  return m ? m[1]! + m[2]! : address;
}

/** Canonical JSON as it was on 2026-11-30: object keys sorted recursively, undefined dropped. */
function canonical(value: unknown): string {
  const sorted = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map((x) => (x === undefined ? null : sorted(x)));
    if (v === null || typeof v !== 'object') return v;
    const out: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
    for (const key of Object.keys(v as Record<string, unknown>).sort()) {
      const x = (v as Record<string, unknown>)[key];
      if (x !== undefined) out[key] = sorted(x);
    }
    return out;
  };
  return JSON.stringify(sorted(value));
}

interface Contact {
  id: string;
  contact_book_id: string;
  email: string;
  first_name: string | null;
  last_name: string | null;
  subscribed: number;
  unsubscribe_reason: string | null;
  properties_json: string;
  created_at: string;
  updated_at: string;
}

const COLUMNS = 'id, contact_book_id, email, first_name, last_name, subscribed, unsubscribe_reason, properties_json, created_at, updated_at';

function propertiesOf(json: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(json);
    return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The kept contact with what the merged one adds; unchanged fields as they were. */
function merged(kept: Contact, gone: Contact, nowIso: string): Contact {
  const keptProps = propertiesOf(kept.properties_json);
  const goneProps = propertiesOf(gone.properties_json);
  const unsubscribed = kept.unsubscribe_reason === null && gone.unsubscribe_reason !== null;
  return {
    ...kept,
    first_name: kept.first_name || gone.first_name,
    last_name: kept.last_name || gone.last_name,
    subscribed: unsubscribed ? 0 : Number(kept.subscribed),
    unsubscribe_reason: unsubscribed ? gone.unsubscribe_reason : kept.unsubscribe_reason,
    properties_json: keptProps && goneProps ? canonical({ ...goneProps, ...keptProps }) : kept.properties_json,
    created_at: gone.created_at < kept.created_at ? gone.created_at : kept.created_at,
    updated_at: nowIso,
  };
}

const older = (a: Contact, b: Contact) => (a.created_at < b.created_at || (a.created_at === b.created_at && a.id < b.id) ? a : b);

const CHUNK = 200;

/** Emails, campaign recipients and aliases of each merged contact (key) now belong to the kept one (value). */
async function repoint(db: Kysely<unknown>, into: Map<string, string>): Promise<void> {
  const gone = [...into.keys()];
  for (let i = 0; i < gone.length; i += CHUNK) {
    const part = gone.slice(i, i + CHUNK);
    const ids = sql.join(part);
    const cases = sql.join(part.map((id) => sql`when ${id} then ${into.get(id)!}`), sql` `);
    // emails.contact_id has no index: one pass over the table per chunk, not one per contact.
    await sql`update emails set contact_id = case contact_id ${cases} end where contact_id in (${ids})`.execute(db);
    // An alias leading to a merged contact would go with it (the cascade): it leads on to the kept one.
    await sql`update contact_aliases set contact_id = case contact_id ${cases} end where contact_id in (${ids})`.execute(db);

    const kept = [...new Set(part.map((id) => into.get(id)!))];
    const rows = (
      await sql<{ campaign_id: string; contact_id: string; unsubscribed: number }>`select campaign_id, contact_id, unsubscribed from campaign_recipients
        where contact_id in (${sql.join([...part, ...kept])})`.execute(db)
    ).rows;
    const reached = new Map(rows.filter((r) => !into.has(r.contact_id)).map((r) => [`${r.campaign_id}\0${r.contact_id}`, r]));
    for (const r of rows) {
      const to = into.get(r.contact_id);
      if (to === undefined) continue;
      const other = reached.get(`${r.campaign_id}\0${to}`);
      if (!other) {
        await sql`update campaign_recipients set contact_id = ${to} where campaign_id = ${r.campaign_id} and contact_id = ${r.contact_id}`.execute(db);
        reached.set(`${r.campaign_id}\0${to}`, { ...r, contact_id: to });
        continue;
      }
      // The campaign reached both: one row stays (the primary key allows one), unsubscribed if either was.
      if (Number(r.unsubscribed) === 1 && Number(other.unsubscribed) !== 1) {
        await sql`update campaign_recipients set unsubscribed = 1 where campaign_id = ${r.campaign_id} and contact_id = ${to}`.execute(db);
        other.unsubscribed = 1;
      }
      await sql`delete from campaign_recipients where campaign_id = ${r.campaign_id} and contact_id = ${r.contact_id}`.execute(db);
    }
  }
}

async function keyContacts(db: Kysely<unknown>): Promise<void> {
  const rows = (await sql<Contact>`select ${sql.raw(COLUMNS)} from contacts where email like '"%' order by created_at, id`.execute(db)).rows;
  const nowIso = new Date().toISOString();
  const into = new Map<string, string>();
  // Rows whose key is set once the contact holding it now is gone (the unique book-and-email index).
  const rekey: { id: string; email: string }[] = [];
  for (const row of rows) {
    const key = unquotedKey(row.email);
    if (key === row.email) continue;
    const other = (await sql<Contact>`select ${sql.raw(COLUMNS)} from contacts where contact_book_id = ${row.contact_book_id} and email = ${key}`.execute(db)).rows[0];
    if (!other) {
      await sql`update contacts set email = ${key} where id = ${row.id}`.execute(db);
      continue;
    }
    const kept = older(row, other);
    const gone = kept === row ? other : row;
    const m = merged(kept, gone, nowIso);
    await sql`update contacts set first_name = ${m.first_name}, last_name = ${m.last_name}, subscribed = ${m.subscribed}, unsubscribe_reason = ${m.unsubscribe_reason},
      properties_json = ${m.properties_json}, created_at = ${m.created_at}, updated_at = ${m.updated_at} where id = ${kept.id}`.execute(db);
    into.set(gone.id, kept.id);
    if (kept === row) rekey.push({ id: row.id, email: key });
  }
  if (into.size) {
    for (const [id, contactId] of into) await sql`insert into contact_aliases (id, contact_id) values (${id}, ${contactId})`.execute(db);
    await repoint(db, into);
    const gone = [...into.keys()];
    for (let i = 0; i < gone.length; i += CHUNK) await sql`delete from contacts where id in (${sql.join(gone.slice(i, i + CHUNK))})`.execute(db);
  }
  for (const r of rekey) await sql`update contacts set email = ${r.email} where id = ${r.id}`.execute(db);
}

type Node = { conditions?: Node[]; field?: unknown; op?: unknown; value?: unknown };

function keyed(node: Node): Node {
  if (Array.isArray(node.conditions)) return { ...node, conditions: node.conditions.map(keyed) };
  if (node.field !== 'email') return node;
  if ((node.op === 'eq' || node.op === 'neq') && typeof node.value === 'string') return { ...node, value: unquotedKey(node.value) };
  if (node.op === 'in' && Array.isArray(node.value)) return { ...node, value: [...new Set(node.value.map((v) => (typeof v === 'string' ? unquotedKey(v) : v)))] };
  return node;
}

/** The filter JSON keyed, or undefined when it needs nothing (or is not JSON: left as it is). */
function rewritten(json: string): string | undefined {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    return undefined;
  }
  if (!value || typeof value !== 'object') return undefined;
  const out = JSON.stringify(keyed(value as Node));
  return out === JSON.stringify(value) ? undefined : out;
}

/** Filters holding a quoted local part (a JSON string holds its quote as \"): the only ones that can need it. */
async function keyFilters(db: Kysely<unknown>, table: string, column: string): Promise<void> {
  const rows = (await sql<{ id: string; json: string }>`select id, ${sql.ref(column)} as json from ${sql.table(table)} where ${sql.ref(column)} like '%"@%'`.execute(db)).rows;
  for (const row of rows) {
    const json = rewritten(row.json);
    if (json !== undefined) await sql`update ${sql.table(table)} set ${sql.ref(column)} = ${json} where id = ${row.id}`.execute(db);
  }
}

export async function up(db: Kysely<unknown>): Promise<void> {
  const run = async (trx: Kysely<unknown>) => {
    await keyContacts(trx);
    await keyFilters(trx, 'segments', 'filters_json');
    await keyFilters(trx, 'campaigns', 'segment_filters_json');
  };
  // PostgreSQL runs each migration in a transaction already; SQLite does not.
  if (db.isTransaction) await run(db);
  else await db.transaction().execute(run);
}
