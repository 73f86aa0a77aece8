import type { Kysely, Transaction } from 'kysely';

/*
 * Which engine a store's Kysely instance talks to, and what PostgreSQL adds (architecture.md,
 * Growing past one server). Repositories receive only `db`; the ones with SQLite-only hot paths
 * (prepared statements inside the group commit) hand their object to `withDialect`, which on
 * PostgreSQL replaces those methods with the PostgreSQL store's own (store/pg/), so core sees
 * one interface whatever the engine. Everything written with Kysely is shared.
 */

export type StoreKind = 'sqlite' | 'postgres';

/** Replaces some methods of a repository on PostgreSQL; gets the repository built for SQLite. */
export type DialectOverride = (db: Kysely<any>, base: object) => object;

export interface PgDialect {
  /** Per repository name, the methods PostgreSQL implements its own way. */
  overrides: Record<string, DialectOverride>;
  /**
   * Runs fn inside a Kysely transaction so that what transactional event handlers queue during
   * it (outbox rows, analytics) is written in that same transaction before it commits.
   */
  transact<T>(db: Kysely<any>, fn: (trx: Transaction<any>) => Promise<T>): Promise<T>;
}

const pgDialects = new WeakMap<object, PgDialect>();

export function registerPgDialect(db: object, dialect: PgDialect): void {
  pgDialects.set(db, dialect);
}

export function storeKindOf(db: object): StoreKind {
  return pgDialects.has(db) ? 'postgres' : 'sqlite';
}

export function isPostgres(db: object): boolean {
  return pgDialects.has(db);
}

/** The repository as built, or on PostgreSQL with the methods that engine implements itself. */
export function withDialect<T extends object>(db: Kysely<any>, name: string, repo: T): T {
  const override = pgDialects.get(db)?.overrides[name];
  return override ? ({ ...repo, ...override(db, repo) } as T) : repo;
}

/**
 * A Kysely transaction for a write whose events are written with it (the transactional outbox,
 * core/events.ts). On SQLite the handlers' synchronous statements land in the one connection's
 * open transaction, so this is db.transaction(); PostgreSQL collects them and writes them in
 * the transaction before its commit.
 */
export function transact<DB, T>(db: Kysely<DB>, fn: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
  const pg = pgDialects.get(db);
  return pg ? pg.transact(db, fn as (trx: Transaction<any>) => Promise<T>) : db.transaction().execute(fn);
}

/** A transaction opened on `db` directly answers storeKindOf (and withDialect) as `db` does. */
export function inheritDialect(db: object, trx: object): void {
  const pg = pgDialects.get(db);
  if (pg) pgDialects.set(trx, pg);
}
