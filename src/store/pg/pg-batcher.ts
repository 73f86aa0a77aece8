import type pg from 'pg';
import { clientExec, withTxWrites, type PgExec } from './pg-exec.js';
import { isConnectionFailure } from '../store-errors.js';
import { commitOutcome, CURRENT_XID_SQL } from './pg-commit-outcome.js';

/*
 * PostgreSQL's group commit (the counterpart of store/group-commit.ts). Writes of one kind that
 * arrive together share one transaction, and the kind writes them with multi-row statements
 * (unnest arrays, RETURNING), so a burst of N sends costs a handful of round trips, not N.
 *
 * - A batch starts at the next turn of the event loop (or after coalesceMs for background work)
 *   while fewer than maxConcurrent batches of that kind are in flight; otherwise writes wait for
 *   one to finish and go together in the next: the busier the store, the bigger the batches.
 * - Each caller is answered after the COMMIT, so "accepted" still means "stored"; a COMMIT
 *   whose connection was cut before it answered is looked up (pg-commit-outcome.ts), so a
 *   write that was stored is never answered "not stored".
 * - When a batch fails, each of its writes is retried in a transaction of its own, so a failing
 *   write (a duplicate campaign recipient) fails alone. When the store itself is unreachable,
 *   every write of the batch fails at once with that error.
 * - Transactional event handlers that run inside `run` queue their writes (pg-exec.ts); they
 *   are written in the same transaction before the commit.
 */

export interface BatchRun<I, R> {
  (exec: PgExec, items: I[]): Promise<R[]>;
}

interface Pending<I, R> {
  item: I;
  resolve: (v: R) => void;
  reject: (e: unknown) => void;
}

export interface PgBatcher<I, R> {
  write(item: I, opts?: { coalesceMs?: number }): Promise<R>;
}

export function createPgBatcher<I, R>(pool: pg.Pool, run: BatchRun<I, R>, opts: { maxBatch?: number; maxConcurrent?: number } = {}): PgBatcher<I, R> {
  const maxBatch = opts.maxBatch ?? 512;
  const maxConcurrent = opts.maxConcurrent ?? 2;
  let queue: Pending<I, R>[] = [];
  let inFlight = 0;
  let scheduled = false;
  let timer: NodeJS.Timeout | undefined;

  async function inTransaction(items: I[]): Promise<R[]> {
    const client = await pool.connect();
    let broken: unknown;
    let xid: string | undefined;
    let results: R[] | undefined;
    try {
      // The transaction's id comes with BEGIN (one round trip): a COMMIT cut off from its
      // answer is looked up by it (pg-commit-outcome.ts).
      const begun = (await client.query(`begin; ${CURRENT_XID_SQL}`)) as unknown as pg.QueryResult<{ x: string }>[];
      xid = begun[1]?.rows[0]?.x;
      const exec = clientExec(client);
      results = await withTxWrites(exec, () => run(exec, items));
      await client.query('commit');
      return results;
    } catch (err) {
      broken = isConnectionFailure(err) ? err : undefined;
      if (broken && results && xid && (await commitOutcome(pool, xid))) return results;
      await client.query('rollback').catch((e: unknown) => (broken ??= e));
      throw err;
    } finally {
      // A connection that failed mid-transaction is closed rather than handed to the next user.
      client.release(broken instanceof Error ? broken : undefined);
    }
  }

  async function flush(): Promise<void> {
    const batch = queue.splice(0, maxBatch);
    if (!batch.length) return;
    inFlight++;
    try {
      let results: R[];
      try {
        results = await inTransaction(batch.map((p) => p.item));
      } catch (err) {
        if (batch.length === 1 || isConnectionFailure(err)) {
          for (const p of batch) p.reject(err);
          return;
        }
        // One write spoiled the batch: each alone, so only the failing ones fail.
        for (const p of batch) {
          try {
            p.resolve((await inTransaction([p.item]))[0]!);
          } catch (itemErr) {
            p.reject(itemErr);
          }
        }
        return;
      }
      batch.forEach((p, i) => p.resolve(results[i]!));
    } finally {
      inFlight--;
      if (queue.length) schedule();
    }
  }

  function schedule(): void {
    if (scheduled || inFlight >= maxConcurrent) return;
    scheduled = true;
    if (timer) clearTimeout(timer);
    timer = undefined;
    setImmediate(() => {
      scheduled = false;
      void flush();
      if (queue.length) schedule();
    });
  }

  function scheduleWithin(ms: number): void {
    if (scheduled || timer) return;
    timer = setTimeout(() => {
      timer = undefined;
      schedule();
    }, ms);
  }

  return {
    write(item: I, o?: { coalesceMs?: number }): Promise<R> {
      return new Promise<R>((resolve, reject) => {
        queue.push({ item, resolve, reject });
        if (o?.coalesceMs && queue.length < maxBatch) scheduleWithin(o.coalesceMs);
        else schedule();
      });
    },
  };
}
