import type pg from 'pg';
import { clientExec } from './pg-exec.js';

/*
 * Per-request reads that SQLite answers synchronously in microseconds (an email by id for the
 * engine, ...) are one round trip each on PostgreSQL. Lookups asked in the same turn of the
 * event loop share one query instead: `select ... where key = any($1)`.
 */
export function createPgLoader<K extends string | number, R>(pool: pg.Pool, sql: string, keyOf: (row: R) => K): (key: K) => Promise<R | undefined> {
  let pending: Map<K, { resolve: (r: R | undefined) => void; reject: (e: unknown) => void }[]> | undefined;
  const exec = clientExec(pool);
  async function flush(batch: NonNullable<typeof pending>): Promise<void> {
    try {
      const rows = await exec.query<R>(sql, [[...batch.keys()]]);
      const byKey = new Map(rows.map((r) => [keyOf(r), r]));
      for (const [key, waiters] of batch) for (const w of waiters) w.resolve(byKey.get(key));
    } catch (err) {
      for (const waiters of batch.values()) for (const w of waiters) w.reject(err);
    }
  }
  return (key: K) =>
    new Promise<R | undefined>((resolve, reject) => {
      if (!pending) {
        const batch = new Map<K, { resolve: (r: R | undefined) => void; reject: (e: unknown) => void }[]>();
        pending = batch;
        setImmediate(() => {
          pending = undefined;
          void flush(batch);
        });
      }
      const list = pending.get(key);
      if (list) list.push({ resolve, reject });
      else pending.set(key, [{ resolve, reject }]);
    });
}
