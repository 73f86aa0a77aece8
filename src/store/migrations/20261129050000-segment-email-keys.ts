import { sql, type Kysely } from 'kysely';
import { addressKey } from './address-key-2026-11-29.js';

// Frozen: never edit a migration that has shipped; add a new one.
// An email condition's eq, neq and in values are keyed as contacts store addresses (trimmed,
// lowercased, the domain in A-labels) when a filter is saved; before that they were only
// lowercased, and evaluation reads a saved filter as it is, so a value with its domain written in
// Unicode matched no contact ("ute@bücher.example" against "ute@xn--bcher-kva.example"). Keyed
// here as a filter saved now is: segments, and the snapshots of campaigns started from one. Only
// JSON holding a non-ASCII character can need it (JSON.stringify writes such characters as they are).

type Node = { conditions?: Node[]; field?: unknown; op?: unknown; value?: unknown };

function keyed(node: Node): Node {
  if (Array.isArray(node.conditions)) return { ...node, conditions: node.conditions.map(keyed) };
  if (node.field !== 'email') return node;
  if ((node.op === 'eq' || node.op === 'neq') && typeof node.value === 'string') return { ...node, value: addressKey(node.value) };
  if (node.op === 'in' && Array.isArray(node.value)) return { ...node, value: [...new Set(node.value.map((v) => (typeof v === 'string' ? addressKey(v) : v)))] };
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

async function keyColumn(db: Kysely<unknown>, table: string, column: string): Promise<void> {
  const rows = (await sql<{ id: string; json: string }>`select id, ${sql.ref(column)} as json from ${sql.table(table)} where length(${sql.ref(column)}) <> octet_length(${sql.ref(column)})`.execute(db)).rows;
  for (const row of rows) {
    const json = rewritten(row.json);
    if (json !== undefined) await sql`update ${sql.table(table)} set ${sql.ref(column)} = ${json} where id = ${row.id}`.execute(db);
  }
}

export async function up(db: Kysely<unknown>): Promise<void> {
  await keyColumn(db, 'segments', 'filters_json');
  await keyColumn(db, 'campaigns', 'segment_filters_json');
}
