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

/**
 * One instance per store of what must be shared by every repository built over it (the group
 * commits: two repositories over one store batch together, as SQLite's one connection does).
 */
const shared = new WeakMap<object, Map<string, unknown>>();

export function sharedOf<T>(db: object, name: string, make: () => T): T {
  let map = shared.get(db);
  if (!map) shared.set(db, (map = new Map()));
  if (!map.has(name)) map.set(name, make());
  return map.get(name) as T;
}

/** store.statementTimeout in ms (0: none), for the reads served on behalf of requests (bounded-read.ts). */
const statementTimeouts = new WeakMap<object, number>();

export function registerStatementTimeout(db: object, ms: number): void {
  statementTimeouts.set(db, ms);
}

export function statementTimeoutOf(db: object): number {
  return statementTimeouts.get(db) ?? 0;
}
