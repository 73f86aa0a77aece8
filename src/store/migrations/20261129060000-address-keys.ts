import { sql, type Kysely } from 'kysely';
import { addressKey } from './address-key-2026-11-29.js';

// Frozen: never edit a migration that has shipped; add a new one.
// Suppressions and contacts are keyed trimmed, lowercased and with the domain in A-labels
// ("ute@xn--bcher-kva.example"); rows stored before the domain was converted hold it in Unicode
// (only lowercased), and every lookup compares the A-label key exactly: such a suppression
// stopped no send, such a contact was missed by the emails filter, upserts (which made a second
// contact for the mailbox), unsubscribes and bounces. Keyed here as a row stored now is. Only an
// address holding a non-ASCII character can need it; a non-ASCII local part stays as it is.
//
// A row whose key is already taken (same team for suppressions, same book for contacts) is
// merged into the row holding it, so nothing that stops mail is lost:
// - suppressions: one row stays; it carries the reason, source and time of the earlier of the
//   two, as a suppression keeps the reason it was first stopped for (suppression-service.ts).
// - contacts: the row under the key stays (what lookups have found since). It is unsubscribed
//   if the other was (its reason; otherwise it keeps its own state, a pending double opt-in
//   too: never subscribed by the merge), takes the names and properties it lacks from the other, and
//   the earlier creation time; emails and campaign recipients of the other point at it (a
//   campaign that reached both keeps the kept contact's row, unsubscribed if either was).
//   Links in mail already sent (unsubscribe, double opt-in confirmation) name the other's id:
//   contact_aliases leads that id to the kept contact.

/** Rows of the table whose email holds a non-ASCII character (characters and bytes differ), oldest first. */
async function nonAscii<T>(db: Kysely<unknown>, table: string, columns: string, order: string): Promise<T[]> {
  return (await sql<T>`select ${sql.raw(columns)} from ${sql.table(table)} where length(email) <> octet_length(email) order by ${sql.raw(order)}`.execute(db)).rows;
}

interface Suppression {
  id: number;
  team_id: number;
  email: string;
  reason: string;
  source: string | null;
  created_at: string;
}

async function keySuppressions(db: Kysely<unknown>): Promise<void> {
  const rows = await nonAscii<Suppression>(db, 'suppressions', 'id, team_id, email, reason, source, created_at', 'created_at, id');
  for (const row of rows) {
    const key = addressKey(row.email);
    if (key === row.email) continue;
    const kept = (await sql<Suppression>`select id, created_at from suppressions where team_id = ${row.team_id} and email = ${key}`.execute(db)).rows[0];
    if (!kept) {
      await sql`update suppressions set email = ${key} where id = ${row.id}`.execute(db);
      continue;
    }
    if (row.created_at < kept.created_at) {
      await sql`update suppressions set reason = ${row.reason}, source = ${row.source}, created_at = ${row.created_at} where id = ${kept.id}`.execute(db);
    }
    await sql`delete from suppressions where id = ${row.id}`.execute(db);
  }
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
    properties_json: keptProps && goneProps ? JSON.stringify({ ...goneProps, ...keptProps }) : kept.properties_json,
    created_at: gone.created_at < kept.created_at ? gone.created_at : kept.created_at,
    updated_at: nowIso,
  };
}

const CHUNK = 200;

/** Emails and campaign recipients of each merged contact (key) now belong to the kept one (value). */
async function repoint(db: Kysely<unknown>, into: Map<string, string>): Promise<void> {
  const gone = [...into.keys()];
  for (let i = 0; i < gone.length; i += CHUNK) {
    const part = gone.slice(i, i + CHUNK);
    const ids = sql.join(part);
    // emails.contact_id has no index: one pass over the table per chunk, not one per contact.
    const cases = sql.join(part.map((id) => sql`when ${id} then ${into.get(id)!}`), sql` `);
    await sql`update emails set contact_id = case contact_id ${cases} end where contact_id in (${ids})`.execute(db);

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
  const columns = 'id, contact_book_id, email, first_name, last_name, subscribed, unsubscribe_reason, properties_json, created_at, updated_at';
  const rows = await nonAscii<Contact>(db, 'contacts', columns, 'created_at, id');
  const nowIso = new Date().toISOString();
  const into = new Map<string, string>();
  for (const row of rows) {
    const key = addressKey(row.email);
    if (key === row.email) continue;
    const kept = (await sql<Contact>`select ${sql.raw(columns)} from contacts where contact_book_id = ${row.contact_book_id} and email = ${key}`.execute(db)).rows[0];
    if (!kept) {
      await sql`update contacts set email = ${key} where id = ${row.id}`.execute(db);
      continue;
    }
    const m = merged(kept, row, nowIso);
    await sql`update contacts set first_name = ${m.first_name}, last_name = ${m.last_name}, subscribed = ${m.subscribed}, unsubscribe_reason = ${m.unsubscribe_reason},
      properties_json = ${m.properties_json}, created_at = ${m.created_at}, updated_at = ${m.updated_at} where id = ${kept.id}`.execute(db);
    into.set(row.id, kept.id);
  }
  if (!into.size) return;
  for (const [id, contactId] of into) await sql`insert into contact_aliases (id, contact_id) values (${id}, ${contactId})`.execute(db);
  // References first, the merged rows last: a run cut short in between is finished by the next
  // (the rows still there are merged again, which changes nothing more).
  await repoint(db, into);
  const gone = [...into.keys()];
  for (let i = 0; i < gone.length; i += CHUNK) await sql`delete from contacts where id in (${sql.join(gone.slice(i, i + CHUNK))})`.execute(db);
}

export async function up(db: Kysely<unknown>): Promise<void> {
  const run = async (trx: Kysely<unknown>) => {
    await trx.schema
      .createTable('contact_aliases')
      .ifNotExists()
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('contact_id', 'text', (c) => c.notNull().references('contacts.id').onDelete('cascade'))
      .execute();
    // Deleting a contact looks its aliases up (the cascade).
    await trx.schema.createIndex('contact_aliases_contact').ifNotExists().on('contact_aliases').column('contact_id').execute();
    await keySuppressions(trx);
    await keyContacts(trx);
  };
  // PostgreSQL runs each migration in a transaction already; SQLite does not.
  if (db.isTransaction) await run(db);
  else await db.transaction().execute(run);
}
