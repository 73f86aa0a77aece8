import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// 20261129060000-address-keys merged contacts that one key made the same mailbox, and wrote the
// kept contact's properties in merge order. Every other write stores them as canonical JSON
// (keys sorted, lib/canonical-json.ts), and a contact upsert compares the stored text: the next
// import of the same properties read as a change (a contact.updated event, updated_at moved).
// The kept contacts are the ones contact_aliases leads to; their properties are written again,
// sorted, when they differ. A second run finds them all sorted.

/** Canonical JSON as it was on 2026-11-29: object keys sorted recursively, undefined dropped. */
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

export async function up(db: Kysely<unknown>): Promise<void> {
  const run = async (trx: Kysely<unknown>) => {
    const rows = (
      await sql<{ id: string; properties_json: string }>`select id, properties_json from contacts
        where id in (select contact_id from contact_aliases)`.execute(trx)
    ).rows;
    for (const row of rows) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(row.properties_json);
      } catch {
        continue; // not JSON: left as it is, as every reader already copes with it
      }
      const text = canonical(parsed);
      if (text !== row.properties_json) await sql`update contacts set properties_json = ${text} where id = ${row.id}`.execute(trx);
    }
  };
  // PostgreSQL runs each migration in a transaction already; SQLite does not.
  if (db.isTransaction) await run(db);
  else await db.transaction().execute(run);
}
