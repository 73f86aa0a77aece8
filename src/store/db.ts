import { closeSync, mkdirSync, openSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect, SqliteDriver, type CompiledQuery, type DatabaseConnection, type Driver, type SqliteDialectConfig } from 'kysely';
import type { Database } from './tables/database.js';
import { withStatementCache } from './statement-cache.js';
import { ParenthesizeRawPlugin } from './parenthesize-raw-plugin.js';
import { createGroupCommit, registerGroupCommit } from './group-commit.js';
import { startWalCheckpointer, type WalCheckpointer } from './wal-checkpointer.js';
import { createWalSync, type WalSync } from './wal-sync.js';
import { acquireServeLock } from './serve-lock.js';
import { registerUnicodeLower } from './unicode-lower.js';

export type Db = Kysely<Database>;

export interface SqliteStore {
  kind: 'sqlite';
  db: Db;
  /** The raw handle, for the few hot paths (claims) that need synchronous transactions. */
  sqlite: BetterSqlite3.Database;
  /** Set when checkpoints run in the background (see StoreOptions). */
  checkpointer?: WalCheckpointer;
  /** Set with durability full: syncs the write-ahead log before writes are reported stored. */
  walSync?: WalSync;
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
  /**
   * full (the default): every commit is synced to disk before it returns, so what the caller
   * was told is stored survives a power cut or an OS crash. normal: synced at checkpoints
   * only; a killed process loses nothing, a power cut can lose the last commits.
   */
  durability?: 'full' | 'normal';
  /** `posthorn serve`: hold the data directory for this process alone (serve-lock.ts). */
  serveLock?: boolean;
}

/** The main connection's own threshold when the worker checkpoints: 16384 pages of 4 KiB = 64 MiB. */
const SAFETY_NET_CHECKPOINT_PAGES = 16384;
/** The WAL file is truncated back to this after a checkpoint reset it. */
const WAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024;

/**
 * Opens (creating if missing) the SQLite file. WAL lets readers run beside the one writer;
 * synchronous=NORMAL writes the log at every commit and syncs it at checkpoints, which is
 * durable against a killed process. With durability full (the default) every write is also
 * synced to disk before its caller hears it is stored (wal-sync.ts), off the event loop: the
 * group commit syncs once per batch, and a Kysely write or transaction once it has released
 * the connection.
 */
export function openStore(file: string, opts: StoreOptions = {}): SqliteStore {
  if (file !== ':memory:') {
    mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
    // A new store is its owner's alone (SQLite would make it 0644), and SQLite gives its -wal
    // and -shm files the mode of the database file. An empty file is an empty database.
    try {
      closeSync(openSync(file, 'wx', 0o600));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  const lock = opts.serveLock && file !== ':memory:' ? acquireServeLock(dirname(file)) : undefined;
  let sqlite: BetterSqlite3.Database;
  try {
    sqlite = new BetterSqlite3(file);
  } catch (err) {
    lock?.release();
    throw err;
  }
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('synchronous = NORMAL');
  const walSync = opts.durability === 'normal' || file === ':memory:' ? undefined : createWalSync(`${file}-wal`);
  const checkpointer = opts.backgroundCheckpoints && file !== ':memory:' ? startWalCheckpointer(file, { onError: opts.onCheckpointError }) : undefined;
  if (checkpointer) {
    // The worker checkpoints; this connection only if the WAL grows past the safety net
    // (the worker stuck or dead). After a checkpoint the WAL file is cut back to the limit.
    sqlite.pragma(`wal_autocheckpoint = ${SAFETY_NET_CHECKPOINT_PAGES}`);
    sqlite.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`);
  }
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma('busy_timeout = 5000');
  // 16 MB of page cache holds the hot pages of the queue's indexes; the operating system's file
  // cache keeps the rest a read() away without counting against the process (64 MB cost ~30 MB
  // of resident memory under load for no measurable CPU).
  sqlite.pragma('cache_size = -16384');
  sqlite.pragma('temp_store = MEMORY');
  registerUnicodeLower(sqlite);
  const cached = withStatementCache(sqlite);
  const dialect = new KeepErrorsSqliteDialect(sqlite, { database: cached }, walSync);
  const db = new Kysely<Database>({ dialect, plugins: [new ParenthesizeRawPlugin()] });
  registerGroupCommit(db, createGroupCommit(db, cached, () => dialect.connectionHeld, walSync));
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
    walSync,
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
      await walSync?.close();
      await db.destroy(); // closes the better-sqlite3 handle too, if Kysely ever opened its driver
      if (sqlite.open) sqlite.close(); // it had not: only the raw handle was used
      lock?.release();
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
 * With a WalSync, a holder that wrote syncs the log after letting the connection go and
 * before its caller gets the answer, so the next holder does not wait for the disk.
 */
class KeepErrorsSqliteDialect extends SqliteDialect {
  /** Someone (a Kysely query or transaction, or the hot path) holds the one connection. */
  connectionHeld = false;
  /** The current holder changed the database. */
  private wrote = false;

  constructor(
    private readonly handle: BetterSqlite3.Database,
    private readonly driverConfig: SqliteDialectConfig,
    private readonly walSync?: WalSync,
  ) {
    super(driverConfig);
  }

  override createDriver(): Driver {
    const handle = this.handle;
    const dialect = this;
    const walSync = this.walSync;
    const wraps = new WeakMap<DatabaseConnection, DatabaseConnection>();
    const noteWrites = (connection: DatabaseConnection): DatabaseConnection => {
      let wrapped = wraps.get(connection);
      if (!wrapped) {
        wrapped = {
          executeQuery: (query) => {
            if (isWrite(query)) dialect.wrote = true;
            return connection.executeQuery(query);
          },
          streamQuery: (query, chunkSize) => connection.streamQuery(query, chunkSize),
        };
        wraps.set(connection, wrapped);
      }
      return wrapped;
    };
    return new (class extends SqliteDriver {
      override async acquireConnection(): Promise<DatabaseConnection> {
        const connection = await super.acquireConnection();
        dialect.connectionHeld = true;
        dialect.wrote = false;
        return walSync ? noteWrites(connection) : connection;
      }
      override async releaseConnection(): Promise<void> {
        const wrote = dialect.wrote;
        dialect.connectionHeld = false;
        dialect.wrote = false;
        await super.releaseConnection();
        if (wrote && walSync) await walSync.sync();
      }
      override async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
        if (!handle.inTransaction) return;
        await super.rollbackTransaction(connection);
      }
    })(this.driverConfig);
  }
}

/** A statement that may change the database (the rest are reads, which need no sync). */
function isWrite(query: CompiledQuery): boolean {
  const kind = query.query.kind;
  if (kind === 'SelectQueryNode') return false;
  if (kind === 'InsertQueryNode' || kind === 'UpdateQueryNode' || kind === 'DeleteQueryNode' || kind === 'MergeQueryNode') return true;
  // Raw SQL and schema changes: anything but a plain read or transaction control.
  return !/^\s*(select|pragma|begin|commit|rollback|savepoint|release|explain)\b/i.test(query.sql);
}
