import { sql, type Kysely, type RawBuilder } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// JSON text that PostgreSQL reads as jsonb must not hold an unpaired surrogate escape ("\ud800":
// half a character, which jsonb refuses). Before the API refused one (and received mail had it
// replaced), a contact property could hold one, which made every property filter of its book
// fail on PostgreSQL, and so could a bounce's text, which stopped the campaign recount there.
// Each becomes U+FFFD, as new text does. Only JSON with an escape is read: JSON.stringify writes
// "\u" for control characters and lone surrogates alone.

const UNPAIRED = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

function clean(value: unknown): unknown {
  if (typeof value === 'string') return value.replace(UNPAIRED, '\uFFFD');
  if (Array.isArray(value)) return value.map(clean);
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [clean(k), clean(v)]));
  return value;
}

/** The JSON text cleaned, or undefined when it needs nothing (or is not JSON: left as it is). */
function cleaned(json: string): string | undefined {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    return undefined;
  }
  const out = JSON.stringify(clean(value));
  return out === JSON.stringify(value) ? undefined : out;
}

async function cleanColumn(db: Kysely<unknown>, table: string, column: string, where: RawBuilder<unknown>): Promise<void> {
  // ESCAPE '!': PostgreSQL's LIKE would otherwise take the backslash as its escape character.
  const rows = (await sql<{ id: string | number; json: string }>`select id, ${sql.ref(column)} as json from ${sql.table(table)} where ${sql.ref(column)} like ${'%\\u%'} escape '!' and ${where}`.execute(db)).rows;
  for (const row of rows) {
    const json = cleaned(row.json);
    if (json !== undefined) await sql`update ${sql.table(table)} set ${sql.ref(column)} = ${json} where id = ${row.id}`.execute(db);
  }
}

export async function up(db: Kysely<unknown>): Promise<void> {
  await cleanColumn(db, 'contacts', 'properties_json', sql`1 = 1`);
  // The campaign recount reads a bounce's data as jsonb.
  await cleanColumn(db, 'email_events', 'data_json', sql`status = 'BOUNCED'`);
}
