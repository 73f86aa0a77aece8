import { sql, type RawBuilder, type SqlBool } from 'kysely';
import type { Db } from '../db.js';
import { storeKindOf } from '../store-context.js';
import { unicodeLower } from '../unicode-lower.js';

/**
 * Whether any of `columns` contains `needle`, case ignored in every alphabet. Both sides are
 * lowered by the same SQL (unicode-lower.ts), so a text always finds itself and both engines
 * find the same rows. instr()/strpos() take the needle literally: no LIKE wildcards to escape.
 */
export function containsIgnoringCase(db: Db, columns: readonly string[], needle: string): RawBuilder<SqlBool> {
  const kind = storeKindOf(db);
  const find = (col: string) => (kind === 'postgres' ? sql`strpos(${unicodeLower(kind, sql.ref(col))}, ${unicodeLower(kind, needle)}) > 0` : sql`instr(${unicodeLower(kind, sql.ref(col))}, ${unicodeLower(kind, needle)}) > 0`);
  return sql<SqlBool>`(${sql.join(columns.map(find), sql` or `)})`;
}
