import { mkdirSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect, SqliteDriver, type DatabaseConnection, type Driver, type SqliteDialectConfig } from 'kysely';
import type { Database } from './tables/database.js';
import { withStatementCache } from './statement-cache.js';
import { ParenthesizeRawPlugin } from './parenthesize-raw-plugin.js';
import { createGroupCommit, registerGroupCommit } from './group-commit.js';
import { startWalCheckpointer, type WalCheckpointer } from './wal-checkpointer.js';

export type Db = Kysely<Database>;

export interface SqliteStore {
  kind: 'sqlite';
  db: Db;
  /** The raw handle, for the few hot paths (claims) that need synchronous transactions. */
  sqlite: BetterSqlite3.Database;
  /** Set when checkpoints run in the background (see StoreOptions). */
  checkpointer?: WalCheckpointer;
  /** The database file and its write-ahead log, with their sizes in bytes (absent files are 0). */
  fileSizes(): Promise<Record<'db' | 'wal', number>>;
  /** The database file, for logs and health. */
  describe(): string;
  /** True when the database answers a query. */
  ping(): Promise<boolean>;
  close(): Promise<void>;
}
/** The SQLite store (the name SQLite-only code and tests use). */
export type Store = SqliteStore;

export interface StoreOptions {
  /**
   * Checkpoint the WAL from a worker thread (the long-running server). Without it SQLite
   * checkpoints inside the COMMIT that crosses 1000 pages, blocking the event loop on the
   * page copying and fsyncs.
   */
  backgroundCheckpoints?: boolean;
  onCheckpointError?: (message: string) => void;
  /** full: synchronous=FULL (a COMMIT survives an OS crash); normal (the default): synchronous=NORMAL. */
  durability?: 'full' | 'normal';
}

/** The main connection's own threshold when the worker checkpoints: 16384 pages of 4 KiB = 64 MiB. */
const SAFETY_NET_CHECKPOINT_PAGES = 16384;
/** The WAL file is truncated back to this after a checkpoint reset it. */
const WAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024;

/**
 * Opens (creating if missing) the SQLite file. WAL lets readers run beside the one writer;
 * synchronous=NORMAL in WAL mode is durable against a killed process (only an OS crash
 * can lose the last transactions), which is the failure we promise to survive.
 */
export function openStore(file: string, opts: StoreOptions = {}): SqliteStore {
  if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true });
  const sqlite = new BetterSqlite3(file);
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma(opts.durability === 'full' ? 'synchronous = FULL' : 'synchronous = NORMAL');
  const checkpointer = opts.backgroundCheckpoints && file !== ':memory:' ? startWalCheckpointer(file, { onError: opts.onCheckpointError }) : undefined;
  if (checkpointer) {
    // The worker checkpoints; this connection only if the WAL grows past the safety net
    // (the worker stuck or dead). After a checkpoint the WAL file is cut back to the limit.
    sqlite.pragma(`wal_autocheckpoint = ${SAFETY_NET_CHECKPOINT_PAGES}`);
    sqlite.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`);
  }
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma('busy_timeout = 5000');
  // 64 MB page cache (default 2 MB) keeps the hot indexes of the queue in memory.
  sqlite.pragma('cache_size = -65536');
  sqlite.pragma('temp_store = MEMORY');
  const cached = withStatementCache(sqlite);
  const dialect = new KeepErrorsSqliteDialect(sqlite, { database: cached });
  const db = new Kysely<Database>({ dialect, plugins: [new ParenthesizeRawPlugin()] });
  registerGroupCommit(db, createGroupCommit(db, cached, () => dialect.connectionHeld));
  let closed = false;
  return {
    kind: 'sqlite',
    db,
    sqlite,
    checkpointer,
    describe: () => file,
    async ping() {
      try {
        sqlite.prepare('select 1').get();
        return true;
      } catch {
        return false;
      }
    },
    async fileSizes() {
      const size = (path: string) => stat(path).then((s) => s.size, () => 0);
      if (file === ':memory:') return { db: 0, wal: 0 };
      const [db, wal] = await Promise.all([size(file), size(`${file}-wal`)]);
      return { db, wal };
    },
    async close() {
      if (closed) return;
      closed = true;
      // First, so that this connection is the last one and its close checkpoints and removes the WAL.
      await checkpointer?.stop();
      await db.destroy(); // closes the better-sqlite3 handle too, if Kysely ever opened its driver
      if (sqlite.open) sqlite.close(); // it had not: only the raw handle was used
    },
  };
}

/**
 * Tracks who holds the connection (for the hot path's synchronous reads), and:
 * SQLITE_FULL, SQLITE_IOERR and a few others may roll back the whole transaction on their
 * own (sqlite.org/lang_transaction.html). Kysely then still sends ROLLBACK, which fails with
 * "cannot rollback - no transaction is active" and replaces the real error: a full disk
 * would surface as a meaningless SQLITE_ERROR. Skip the ROLLBACK when there is nothing left
 * to roll back, so the caller sees what actually happened.
 */
class KeepErrorsSqliteDialect extends SqliteDialect {
  /** Someone (a Kysely query or transaction, or the hot path) holds the one connection. */
  connectionHeld = false;

  constructor(
    private readonly handle: BetterSqlite3.Database,
    private readonly driverConfig: SqliteDialectConfig,
  ) {
    super(driverConfig);
  }

  override createDriver(): Driver {
    const handle = this.handle;
    const dialect = this;
    return new (class extends SqliteDriver {
      override async acquireConnection(): Promise<DatabaseConnection> {
        const connection = await super.acquireConnection();
        dialect.connectionHeld = true;
        return connection;
      }
      override async releaseConnection(): Promise<void> {
        dialect.connectionHeld = false;
        await super.releaseConnection();
      }
      override async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
        if (!handle.inTransaction) return;
        await super.rollbackTransaction(connection);
      }
    })(this.driverConfig);
  }
}
