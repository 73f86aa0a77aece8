import type pg from 'pg';

/*
 * A COMMIT whose connection was cut before its answer came back (the server restarted, an
 * operator or a proxy ended the session, the network dropped) may have taken effect or not.
 * Answering "not stored" for a commit that happened would make a client's retry store it twice
 * (a send without an Idempotency-Key, a result whose retry repeats its events); answering
 * "stored" for one that did not would lose it. The server knows: a transaction's id, read when
 * it began, is looked up in its commit log from another connection (txid_status, PostgreSQL 10
 * and later). A session ended mid-commit finishes or aborts it before it exits, so "in
 * progress" is waited out briefly.
 */

/** The transaction id as text, read in the transaction (it assigns one if none yet: for work that writes anyway). */
export const CURRENT_XID_SQL = 'select txid_current()::text as x';
/** The transaction id as text, or null when it has written nothing (assigning one would make its commit flush the WAL). */
export const ASSIGNED_XID_SQL = 'select txid_current_if_assigned()::text as x';

/** How long a transaction still "in progress" after its session was cut is waited for, in ms. */
const IN_PROGRESS_WAIT_MS = 2000;
const IN_PROGRESS_POLL_MS = 20;

/** True when transaction `xid` committed, false when it aborted, undefined when that cannot be learnt. */
export async function commitOutcome(pool: pg.Pool, xid: string): Promise<boolean | undefined> {
  for (let waited = 0; waited <= IN_PROGRESS_WAIT_MS; waited += IN_PROGRESS_POLL_MS) {
    let status: string | null | undefined;
    try {
      status = (await pool.query<{ s: string | null }>('select txid_status($1::bigint) as s', [xid])).rows[0]?.s;
    } catch {
      return undefined; // the server is gone too: unknown, and the caller fails as before
    }
    if (status === 'committed') return true;
    if (status === 'aborted') return false;
    if (status !== 'in progress') return undefined;
    await new Promise((resolve) => setTimeout(resolve, IN_PROGRESS_POLL_MS));
  }
  return undefined;
}
