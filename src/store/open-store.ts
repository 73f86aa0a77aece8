import type { SqliteStore } from './db.js';
import type { PgStore } from './pg/pg-store.js';

/** The store an app runs on: SQLite (one server, the default) or PostgreSQL (one or more nodes). */
export type AppStore = SqliteStore | PgStore;

export interface StoreSettings {
  /** A postgres:// URL selects PostgreSQL; empty means SQLite in `file`. */
  url: string;
  /** The SQLite database file. */
  file: string;
  durability: 'full' | 'normal';
  poolMax: number;
  connectTimeoutMs: number;
  /** PostgreSQL: statement_timeout of the reads served on behalf of requests, in ms (0: none). */
  statementTimeoutMs?: number;
}

export interface OpenHooks {
  /** SQLite: checkpoint the WAL from a worker thread (the long-running server). */
  backgroundCheckpoints?: boolean;
  onCheckpointError?: (message: string) => void;
  onPoolError?: (err: Error) => void;
  applicationName?: string;
  /** SQLite: `posthorn serve` holds the data directory for itself (serve-lock.ts). */
  serveLock?: boolean;
}

export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//i.test(url);
}

/** Opens the configured store; PostgreSQL throws when the server cannot be reached (the caller retries). */
export async function openAppStore(s: StoreSettings, hooks: OpenHooks = {}): Promise<AppStore> {
  if (s.url) {
    if (!isPostgresUrl(s.url)) throw new Error('store.url: must be a postgres:// or postgresql:// URL (or empty for SQLite)');
    const { openPgStore } = await import('./pg/pg-store.js');
    return openPgStore({ url: s.url, poolMax: s.poolMax, connectTimeoutMs: s.connectTimeoutMs, durability: s.durability, onPoolError: hooks.onPoolError, applicationName: hooks.applicationName, statementTimeoutMs: s.statementTimeoutMs });
  }
  // Each store's driver is loaded only when it is the one configured (better-sqlite3 here, pg above).
  const { openStore } = await import('./db.js');
  return openStore(s.file, { durability: s.durability, backgroundCheckpoints: hooks.backgroundCheckpoints, onCheckpointError: hooks.onCheckpointError, serveLock: hooks.serveLock });
}
