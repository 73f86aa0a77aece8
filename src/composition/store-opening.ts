import { hostname as osHostname } from 'node:os';
import { join, resolve } from 'node:path';
import type { Config } from '../config/defaults.js';
import { createLogger, type Logger } from '../lib/logger.js';
import { isPostgresUrl, openAppStore, type AppStore, type StoreSettings } from '../store/open-store.js';
import { parseDuration } from '../lib/rate-spec.js';
import type { CopyProgress, CopyReport } from '../store/store-copy.js';
import type { BackupReport } from '../store/store-backup.js';
import type { RestoreReport } from '../store/store-restore.js';
import { databaseUrlTarget, PgStoreUnsupportedError } from '../store/pg/pg-url.js';
import { migrateToLatest } from '../store/migrate.js';
import { checkDataDir, storeReadableByOthers } from './data-dir-check.js';

// Opening the store a configuration names (the composition root's first step), and the
// commands that need the store alone: migrate, store copy, store backup and store restore.

/** The store file of a configuration. */
const storeFile = (config: Config) => join(resolve(config.dataDir), 'posthorn.db');

/** Where a configuration keeps its data: PostgreSQL at store.url, or SQLite in the data directory. */
export function storeSettings(config: Config): StoreSettings {
  return { url: config.store.url, file: storeFile(config), durability: config.store.durability, poolMax: config.store.pool.max, connectTimeoutMs: config.store.pool.connectTimeoutMs, statementTimeoutMs: config.store.statementTimeout === '0' ? 0 : parseDuration(config.store.statementTimeout)! };
}

/** This node's id in the cluster (its leases, health, logs): cluster.nodeName, or <hostname>:<pid>. */
export function nodeIdOf(config: Config): string {
  return config.cluster.nodeName || `${osHostname()}:${process.pid}`;
}

/**
 * The application_name of this node's PostgreSQL connections (pg_stat_activity): "posthorn "
 * and the node's id, so an operator can tell the nodes' sessions apart (and end one node's).
 * PostgreSQL keeps 63 bytes of it.
 */
export function applicationNameOf(config: Config): string {
  return `posthorn ${nodeIdOf(config)}`.slice(0, 63);
}

/** Pauses between attempts to reach a PostgreSQL store that is down at start: 1 s, doubling to 30 s. */
const STORE_RETRY_FIRST_MS = 1000;
const STORE_RETRY_MAX_MS = 30_000;

/**
 * Opens the store. A PostgreSQL server that cannot be reached is a clear error: logged with its
 * host (never the password) and, when `wait` is set, retried until it answers.
 */
export async function openStoreOf(config: Config, logger: Logger, hooks: Parameters<typeof openAppStore>[1], wait: boolean): Promise<AppStore> {
  if (!config.store.url) {
    checkDataDir(resolve(config.dataDir));
    // Said by the server, where an operator reads its log; an admin command prints results.
    const readable = hooks?.serveLock ? storeReadableByOthers(resolve(config.dataDir)) : undefined;
    if (readable) logger.warn({ event: 'store.readable_by_others', file: storeFile(config) }, readable);
  }
  for (let pause = STORE_RETRY_FIRST_MS; ; pause = Math.min(pause * 2, STORE_RETRY_MAX_MS)) {
    try {
      return await openAppStore(storeSettings(config), hooks);
    } catch (err) {
      if (!config.store.url || err instanceof PgStoreUnsupportedError) throw err;
      const target = databaseUrlTarget(config.store.url);
      const reason = (err as Error).message || String((err as { code?: unknown }).code ?? err);
      if (!wait) throw new Error(`the PostgreSQL store at ${target} cannot be reached: ${reason}`);
      logger.error({ event: 'store.unavailable', store: target, err: reason, retryInMs: pause }, `the PostgreSQL store at ${target} cannot be reached (${reason}); retrying in ${pause / 1000} s`);
      await new Promise((r) => setTimeout(r, pause));
    }
  }
}

/** `posthorn migrate`: applies pending migrations without starting anything else. */
export async function migrateStore(config: Config): Promise<string[]> {
  const store = await openStoreOf(config, createLogger('silent'), {}, false);
  try {
    return (await migrateToLatest(store.db)).applied;
  } finally {
    await store.close();
  }
}

/**
 * `posthorn store copy --to <url>`: copies this configuration's SQLite store (in dataDir) into
 * the empty PostgreSQL database at `targetUrl` (store/store-copy.ts).
 */
export async function copyStoreTo(config: Config, targetUrl: string, onProgress?: (p: CopyProgress) => void): Promise<CopyReport> {
  if (config.store.url) {
    throw new Error(`the configured store is already PostgreSQL (store.url, ${databaseUrlTarget(config.store.url)}): store copy reads a SQLite installation; run it with store.url and POSTHORN_DATABASE_URL unset`);
  }
  if (!isPostgresUrl(targetUrl)) throw new Error('--to: must be a postgres:// or postgresql:// URL, such as postgres://user:password@host:5432/posthorn');
  // Loaded by these two commands alone: they use both stores' drivers.
  const { copySqliteToPostgres } = await import('../store/store-copy.js');
  return copySqliteToPostgres({ sqliteFile: storeFile(config), targetUrl, onProgress });
}

/** `posthorn store backup --to <file>`: an online copy of this configuration's SQLite store (store/store-backup.ts). */
export async function backupStoreTo(config: Config, target: string): Promise<BackupReport> {
  const { backupSqlite, BackupRefused } = await import('../store/store-backup.js');
  if (config.store.url) {
    throw new BackupRefused(`the configured store is PostgreSQL (store.url, ${databaseUrlTarget(config.store.url)}): back it up with PostgreSQL's own tools (pg_dump, or base backups with WAL archiving); store backup copies a SQLite installation`);
  }
  return backupSqlite({ sqliteFile: storeFile(config), target });
}

/** `posthorn store restore --from <file>`: a backup put in place as this configuration's SQLite store (store/store-restore.ts). */
export async function restoreStoreFrom(config: Config, from: string, force: boolean): Promise<RestoreReport> {
  const { restoreSqlite, RestoreRefused } = await import('../store/store-restore.js');
  if (config.store.url) {
    throw new RestoreRefused(
      `the configured store is PostgreSQL (store.url, ${databaseUrlTarget(config.store.url)}): restore it with PostgreSQL's own tools (pg_restore of a pg_dump); ` +
        'store restore puts a SQLite backup in place, which posthorn store copy then moves into PostgreSQL; run it with store.url and POSTHORN_DATABASE_URL unset',
    );
  }
  return restoreSqlite({ dataDir: config.dataDir, from, force });
}
