import { CompiledQuery, Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { Database } from '../tables/database.js';
import { ParenthesizeRawPlugin } from '../parenthesize-raw-plugin.js';
import { registerGroupCommit, type GroupCommitStore } from '../group-commit.js';
import { registerPgDialect, type PgDialect } from '../store-context.js';
import { PgSchemaPlugin } from './pg-schema-plugin.js';
import { kyselyExec, withTxWrites } from './pg-exec.js';
import { PG_OVERRIDES } from './pg-overrides.js';
import { registerPgPool, registerStatementTimeout } from './pg-context.js';
import { PG_LOWER_COLLATION } from '../unicode-lower.js';
import { PgStoreUnsupportedError, redactDatabaseUrl } from './pg-url.js';
import { ASSIGNED_XID_SQL, commitOutcome } from './pg-commit-outcome.js';
import { isConnectionFailure } from '../store-errors.js';

export interface PgStoreOptions {
  /** postgres://user:password@host:port/database */
  url: string;
  /** Connections in this node's pool. */
  poolMax: number;
  /** How long to wait for a connection (new or from the pool) before the operation fails. */
  connectTimeoutMs: number;
  /** full: a COMMIT returns once the WAL is flushed (synchronous_commit on); normal: before (off). */
  durability: 'full' | 'normal';
  /** An idle pooled connection failed (the server went away): logged, the pool replaces it. */
  onPoolError?: (err: Error) => void;
  /** Shown in pg_stat_activity. */
  applicationName?: string;
  /** store.statementTimeout in ms for reads served on behalf of requests (bounded-read.ts); 0 or absent: none. */
  statementTimeoutMs?: number;
}

export interface PgStore {
  kind: 'postgres';
  db: Kysely<Database>;
  pool: pg.Pool;
  /** The URL with its password replaced, for logs and health. */
  describe(): string;
  /** True when the server answers a query. */
  ping(): Promise<boolean>;
  /** The database's size (there is no WAL file of ours to report). */
  fileSizes(): Promise<Record<'db' | 'wal', number>>;
  close(): Promise<void>;
}

const INT8_OID = 20;
const NUMERIC_OID = 1700;

/**
 * bigint columns (all our integers, see pg-schema-plugin.ts), count(*) and sum() come back as
 * numbers, as they do from SQLite: none of ours passes 2^53 (epoch ms, counters, row ids).
 */
const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === INT8_OID || oid === NUMERIC_OID) return (value: string) => Number(value);
    return pg.types.getTypeParser(oid, format as 'text');
  },
};

/**
 * node-postgres takes a URL's `options` parameter (server settings: a search path, a timeout)
 * over the pool's own, which would drop the durability's setting: the URL's go first, ours
 * after them (the last -c of a setting wins).
 */
function withServerOptions(url: string, own: string): { connectionString: string; options: string } {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return { connectionString: url, options: own };
  }
  const given = u.searchParams.get('options');
  if (given === null) return { connectionString: url, options: own };
  u.searchParams.delete('options');
  return { connectionString: u.toString(), options: `${given} ${own}` };
}

/** SQLSTATE 42704: the collation is not there (no ICU, or none for the database's encoding). */
const UNDEFINED_OBJECT = '42704';

/** Builds the pool and checks that the server answers; throws (the pool closed) when it does not. */
export async function openPgStore(opts: PgStoreOptions): Promise<PgStore> {
  const pool = new pg.Pool({
    ...withServerOptions(opts.url, `-c synchronous_commit=${opts.durability === 'full' ? 'on' : 'off'}`),
    max: opts.poolMax,
    connectionTimeoutMillis: opts.connectTimeoutMs,
    idleTimeoutMillis: 30_000,
    application_name: opts.applicationName ?? 'posthorn',
    types,
  });
  // An idle connection that breaks (the server restarted) is dropped by the pool; without a
  // listener its error event would end the process.
  pool.on('error', (err) => opts.onPoolError?.(err));
  // A connection that breaks while checked out (between the statements of a transaction: the
  // server shut down) emits 'error' too, where the pool does not listen: unheard, it would end
  // the process. The statement in flight, or the next one, fails with it (a 500 "not stored"),
  // and the pool drops the connection when it is given back.
  pool.on('connect', (client) => client.on('error', () => undefined));
  try {
    // Answers, and has ICU's root collation (unicode-lower.ts: case-ignoring matches need it).
    await pool.query(`select lower('A' collate "${PG_LOWER_COLLATION}")`);
  } catch (err) {
    await pool.end().catch(() => undefined);
    if ((err as { code?: unknown }).code === UNDEFINED_OBJECT) {
      throw new PgStoreUnsupportedError(
        `the PostgreSQL database has no collation "${PG_LOWER_COLLATION}" (a server built without ICU, or a database not encoded in UTF8); Posthorn needs it to match text ignoring case in every alphabet`,
      );
    }
    throw err;
  }
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }), plugins: [new ParenthesizeRawPlugin(), new PgSchemaPlugin()] });
  registerGroupCommit(db, sqliteOnly);
  registerPgPool(db, pool);
  registerStatementTimeout(db, opts.statementTimeoutMs ?? 0);
  const dialect: PgDialect = {
    overrides: PG_OVERRIDES,
    transact: async (kdb, fn) => {
      let xid: string | undefined;
      let done: { result: unknown } | undefined;
      try {
        return await kdb.transaction().execute(async (trx) => {
          // Code that asks which engine it runs on gets the same answer from the transaction.
          registerPgDialect(trx, dialect);
          const result = await withTxWrites(kyselyExec(trx), () => fn(trx));
          // Its id, if it wrote (read-only work gets none and has nothing to lose), to learn
          // the fate of a COMMIT whose answer a cut connection lost (pg-commit-outcome.ts).
          xid = (await trx.executeQuery<{ x: string | null }>(CompiledQuery.raw(ASSIGNED_XID_SQL))).rows[0]?.x ?? undefined;
          done = { result };
          return result;
        });
      } catch (err) {
        if (done && xid && isConnectionFailure(err) && (await commitOutcome(pool, xid))) return done.result as never;
        throw err;
      }
    },
  };
  registerPgDialect(db, dialect);
  let closed = false;
  return {
    kind: 'postgres',
    db,
    pool,
    describe: () => redactDatabaseUrl(opts.url),
    async ping() {
      try {
        await pool.query('select 1');
        return true;
      } catch {
        return false;
      }
    },
    async fileSizes() {
      const r = await pool.query<{ size: number }>('select pg_database_size(current_database()) as size');
      return { db: Number(r.rows[0]?.size ?? 0), wal: 0 };
    },
    async close() {
      if (closed) return;
      closed = true;
      await db.destroy(); // ends the pool
    },
  };
}

function unsupported(): never {
  throw new Error('a SQLite-only store path was called on PostgreSQL (store/pg/ must override it)');
}

/** Repositories take their group-commit store when they are built; on PostgreSQL every use is a bug. */
const sqliteOnly: GroupCommitStore = {
  get sqlite(): never {
    return unsupported();
  },
  write: unsupported,
  read: unsupported,
};
