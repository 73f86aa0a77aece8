import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from './tables/database.js';
import { inheritDialect, storeKindOf } from './store-context.js';
import { statementTimeoutOf } from './pg/pg-context.js';
import { StatementTimeoutError } from './store-errors.js';

/** SQLSTATE 57014: the statement was cancelled (here, by the statement_timeout set below). */
const QUERY_CANCELED = '57014';

/**
 * Runs a read served on behalf of a request (a list, search or analytics read that may scan many rows) with
 * PostgreSQL's statement_timeout of `store.statementTimeout`, set LOCAL to a read transaction of
 * its own: the setting ends with that transaction, so the connection goes back to the pool as
 * it came and migrations, store copies, retention and the engine's work (which never come
 * through here) are never cut short. A statement cancelled by it throws StatementTimeoutError;
 * the transaction is rolled back and it wrote nothing. SQLite, or a timeout of 0: fn runs as is.
 */
export async function boundedRead<T>(db: Kysely<Database> | Transaction<Database>, fn: (db: Kysely<Database> | Transaction<Database>) => Promise<T>): Promise<T> {
  const ms = storeKindOf(db) === 'postgres' && !db.isTransaction ? statementTimeoutOf(db) : 0;
  if (ms <= 0) return fn(db);
  try {
    return await db
      .transaction()
      .setAccessMode('read only')
      .execute(async (trx) => {
        inheritDialect(db, trx);
        await sql`select set_config('statement_timeout', ${`${ms}ms`}, true)`.execute(trx);
        return fn(trx);
      });
  } catch (err) {
    if ((err as { code?: unknown } | null)?.code === QUERY_CANCELED) throw new StatementTimeoutError(ms);
    throw err;
  }
}
