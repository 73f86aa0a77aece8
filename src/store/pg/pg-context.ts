import type pg from 'pg';

/** The pool behind a PostgreSQL store's Kysely instance (the overrides' hot paths use it directly). */
const pools = new WeakMap<object, pg.Pool>();

export function registerPgPool(db: object, pool: pg.Pool): void {
  pools.set(db, pool);
}

export function pgPoolOf(db: object): pg.Pool {
  const pool = pools.get(db);
  if (!pool) throw new Error('not a PostgreSQL store');
  return pool;
}
