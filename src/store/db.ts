import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect, SqliteDriver, type DatabaseConnection, type Driver, type SqliteDialectConfig } from 'kysely';
import type { Database } from './tables/database.js';
import { withStatementCache } from './statement-cache.js';
import { createHotPath, registerHotPath } from './hot-path.js';

export type Db = Kysely<Database>;

export interface Store {
  db: Db;
  /** The raw handle, for the few hot paths (claims) that need synchronous transactions. */
  sqlite: BetterSqlite3.Database;
  close(): Promise<void>;
}

/**
 * Opens (creating if missing) the SQLite file. WAL lets readers run beside the one writer;
 * synchronous=NORMAL in WAL mode is durable against a killed process (only an OS crash
 * can lose the last transactions), which is the failure we promise to survive.
 */
export function openStore(file: string): Store {
  if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true });
  const sqlite = new BetterSqlite3(file);
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('synchronous = NORMAL');
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma('busy_timeout = 5000');
  // 64 MB page cache (default 2 MB) keeps the hot indexes of the queue in memory.
  sqlite.pragma('cache_size = -65536');
  sqlite.pragma('temp_store = MEMORY');
  const cached = withStatementCache(sqlite);
  const dialect = new KeepErrorsSqliteDialect(sqlite, { database: cached });
  const db = new Kysely<Database>({ dialect });
  registerHotPath(db, createHotPath(db, cached, () => dialect.connectionHeld));
  let closed = false;
  return {
    db,
    sqlite,
    async close() {
      if (closed) return;
      closed = true;
      await db.destroy(); // closes the better-sqlite3 handle too
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
