import { sql, type RawBuilder, type SqlBool } from 'kysely';
import type { Db } from '../db.js';
import { isPostgres } from '../store-context.js';

/**
 * Whether any of `columns` contains `needle`, case ignored. Both sides are lowered by the same
 * SQL lower(), so a text always finds itself: lowering the needle in JavaScript folded letters
 * the store's lower() keeps (SQLite's folds ASCII only, as PostgreSQL's does in the C locale),
 * and a name such as "Été" could not be found even when typed exactly. instr()/strpos() take
 * the needle literally: no LIKE wildcards to escape.
 */
export function containsIgnoringCase(db: Db, columns: readonly string[], needle: string): RawBuilder<SqlBool> {
  const find = isPostgres(db) ? (col: string) => sql`strpos(lower(${sql.ref(col)}), lower(${needle})) > 0` : (col: string) => sql`instr(lower(${sql.ref(col)}), lower(${needle})) > 0`;
  return sql<SqlBool>`(${sql.join(columns.map(find), sql` or `)})`;
}
