import { sql, type RawBuilder } from 'kysely';

/*
 * Content retention's writes are bounded by bytes as well as rows. Freeing a stored value makes
 * the engine walk all of it (SQLite reads every overflow page of a value to free its pages, on
 * the thread that serves the API): 500 emails of 10 MB would be one write of seconds. The sizes
 * come from the row headers (octet_length reads no content on either engine).
 */

export interface ChunkLimit {
  rows: number;
  /** Bytes of content one write may free; a single larger item is a write of its own. */
  bytes: number;
}

/** The leading rows of `rows` whose `bytes` fit `limit` (at least one). */
export function withinBytes<T extends { bytes: unknown }>(rows: T[], limit: number): T[] {
  let total = 0;
  for (let i = 0; i < rows.length; i++) {
    total += Number(rows[i]!.bytes ?? 0);
    if (total > limit && i > 0) return rows.slice(0, i);
  }
  return rows;
}

/** The stored size of nullable columns, summed, without reading their content. */
export function storedBytes(...columns: string[]): RawBuilder<number> {
  return sql<number>`${sql.join(columns.map((c) => sql`coalesce(octet_length(${sql.ref(c)}), 0)`), sql` + `)}`;
}
