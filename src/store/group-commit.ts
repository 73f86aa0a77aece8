import type BetterSqlite3 from 'better-sqlite3';
import type { Kysely } from 'kysely';
import { isSqliteLockTimeout } from './store-errors.js';
import type { WalSync } from './wal-sync.js';

/**
 * The send and delivery hot paths run a handful of statements per message thousands of times a
 * second. Building each through Kysely and committing each request alone cost more CPU than the
 * SQL itself (profiled: ~40 µs of query building per statement, ~150 µs per commit). So these
 * few repository functions use prepared statements directly and group commits:
 *
 * - write(fn) queues fn; all writes queued in one event-loop turn run in ONE transaction. If an
 *   item throws, the batch is rolled back and redone with a savepoint per item, so a failing
 *   item fails alone (when SQLite itself aborts the transaction, as a full disk does, each item
 *   is redone in a transaction of its own). fn must be a pure function of the database (it may
 *   run more than once). Callers are answered only after the commit, so "accepted" still means
 *   "on disk" (group commit), and a failed write was not stored.
 * - Both read() and write() hold Kysely's connection lock while they run, so they never run in
 *   the middle of a Kysely transaction that is awaiting between statements. A read() while
 *   nobody holds the connection runs at once instead: being synchronous, it can not
 *   interleave with anything, and the lock's promise hops cost ~3% of an API send's CPU
 *   (three reads per send: key, domain, suppressions).
 *
 * SQLite-only by nature; it stays inside store/ (architecture.md, The process).
 */
export interface GroupCommitStore {
  sqlite: BetterSqlite3.Database;
  /**
   * coalesceMs: the write may wait that long for others to share its commit. For background
   * work nobody waits on (delivery results): one commit per result cost more than the
   * results' own statements (profiled at ~1.8 writes per commit under delivery load).
   * A write without it flushes the queue at the next turn, coalescing ones included.
   */
  write<T>(fn: () => T, opts?: { coalesceMs?: number }): Promise<T>;
  read<T>(fn: () => T): Promise<T>;
}

/** SQLite rolled the whole batch transaction back on its own (see flush). */
class BatchAborted extends Error {
  constructor(override readonly cause: unknown) {
    super('the batch transaction was rolled back by SQLite');
  }
}

interface Pending {
  fn: () => unknown;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
}

/** At most this many writes share one transaction (bounds the time the lock is held). */
const MAX_BATCH = 512;

export function createGroupCommit(db: Kysely<any>, sqlite: BetterSqlite3.Database, connectionHeld: () => boolean = () => true, walSync?: WalSync): GroupCommitStore {
  let queue: Pending[] = [];
  let scheduled = false;
  let timer: NodeJS.Timeout | undefined;

  async function flush(): Promise<void> {
    scheduled = false;
    if (timer) clearTimeout(timer);
    timer = undefined;
    const batch = queue.splice(0, MAX_BATCH);
    if (queue.length) schedule();
    if (!batch.length) return;
    let outcomes: { ok: boolean; value: unknown }[] = [];
    try {
      await db.connection().execute(async () => {
        try {
          // Fast path: the whole batch in one transaction, no per-item savepoints.
          sqlite.transaction(() => {
            outcomes = batch.map((item) => ({ ok: true, value: item.fn() }));
          })();
        } catch (err) {
          // The write lock was not had within the busy timeout (another connection holds it):
          // no item can be written, and redoing each would wait that long again per item, with
          // the event loop blocked.
          if (isSqliteLockTimeout(err)) {
            outcomes = batch.map(() => ({ ok: false, value: err }));
            return;
          }
          // Some item failed and rolled the batch back: redo it with a savepoint per item
          // (a nested better-sqlite3 transaction), so only the failing items fail.
          outcomes = [];
          try {
            sqlite.transaction(() => {
              for (const item of batch) {
                try {
                  outcomes.push({ ok: true, value: sqlite.transaction(item.fn)() });
                } catch (err) {
                  // SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM... may roll back the WHOLE
                  // transaction, not just the savepoint (sqlite.org/lang_transaction.html).
                  // Going on would run the next items in autocommit (stored at once, yet
                  // reported failed when the final COMMIT finds no transaction) while the
                  // earlier ones were silently undone.
                  if (!sqlite.inTransaction) throw new BatchAborted(err);
                  outcomes.push({ ok: false, value: err });
                }
              }
            })();
          } catch (err) {
            if (!(err instanceof BatchAborted)) throw err;
            // Nothing of the batch is stored: each item alone, in its own transaction, so
            // whatever still fits is stored and each answer says exactly what happened.
            outcomes = batch.map((item) => {
              try {
                return { ok: true, value: sqlite.transaction(item.fn)() };
              } catch (itemErr) {
                return { ok: false, value: itemErr };
              }
            });
          }
        }
      });
    } catch (err) {
      // The commit itself failed (disk full, I/O error): nothing of the batch is stored.
      for (const item of batch) item.reject(err);
      return;
    }
    if (walSync && outcomes.some((o) => o.ok)) {
      // Durable before anyone is told: one sync of the log for the whole batch (wal-sync.ts).
      try {
        await walSync.sync();
      } catch (err) {
        for (const item of batch) item.reject(err);
        return;
      }
    }
    batch.forEach((item, i) => (outcomes[i]!.ok ? item.resolve(outcomes[i]!.value) : item.reject(outcomes[i]!.value)));
  }

  function schedule(): void {
    if (scheduled) return;
    scheduled = true;
    setImmediate(() => void flush());
  }

  /** A flush within `ms` unless one comes sooner; the timer is kept alive (a pending write must not be cut off by process exit). */
  function scheduleWithin(ms: number): void {
    if (scheduled || timer) return;
    timer = setTimeout(() => {
      timer = undefined;
      if (!scheduled) void flush();
    }, ms);
  }

  return {
    sqlite,
    write<T>(fn: () => T, opts?: { coalesceMs?: number }): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        queue.push({ fn, resolve: resolve as (v: unknown) => void, reject });
        if (opts?.coalesceMs && queue.length < MAX_BATCH) scheduleWithin(opts.coalesceMs);
        else schedule();
      });
    },
    read<T>(fn: () => T): Promise<T> {
      if (!connectionHeld()) {
        try {
          return Promise.resolve(fn());
        } catch (err) {
          return Promise.reject(err);
        }
      }
      return db.connection().execute(async () => fn());
    },
  };
}

const registry = new WeakMap<object, GroupCommitStore>();

export function registerGroupCommit(db: object, store: GroupCommitStore): void {
  registry.set(db, store);
}

/** The group-commit store of a store's Kysely instance (repositories receive only `db`). */
export function groupCommitOf(db: object): GroupCommitStore {
  const store = registry.get(db);
  if (!store) throw new Error('no group-commit store registered for this database');
  return store;
}
