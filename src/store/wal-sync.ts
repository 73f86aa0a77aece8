import { open, type FileHandle } from 'node:fs/promises';

/*
 * Power-cut durability without stopping the event loop. SQLite's synchronous=FULL would fsync
 * the write-ahead log inside every COMMIT, on the main thread: ~5 ms of a blocked event loop
 * per commit on this class of disk. Instead the store runs synchronous=NORMAL (SQLite writes the
 * WAL frames at commit and syncs only at checkpoints) and, before any caller is told its write
 * is stored, fdatasyncs the WAL itself on libuv's thread pool: the same bytes reach the disk
 * as with FULL, one sync covers every commit made before it started (group fsync), and the
 * event loop keeps serving meanwhile.
 */

export interface WalSync {
  /** Resolves once everything committed before the call is on disk. */
  sync(): Promise<void>;
  /** Syncs done so far (tests, benchmarks). */
  readonly count: number;
  close(): Promise<void>;
}

export function createWalSync(walPath: string): WalSync {
  let handle: FileHandle | null = null;
  let running: Promise<void> | null = null;
  let next: Promise<void> | null = null;
  let count = 0;
  let closed = false;

  async function once(): Promise<void> {
    if (closed) return;
    // SQLite creates the WAL with the first write and keeps it while a connection is open.
    handle ??= await open(walPath, 'r').catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return null;
      throw err;
    });
    if (!handle) return;
    await handle.datasync();
    count++;
  }

  function start(): Promise<void> {
    running = once().finally(() => {
      running = null;
    });
    return running;
  }

  return {
    sync() {
      if (!running) return start();
      // The sync under way may have begun before the caller's commit: the next one covers it,
      // and every caller that arrives meanwhile shares that next one.
      next ??= running.catch(() => undefined).then(() => {
        next = null;
        return start();
      });
      return next;
    },
    get count() {
      return count;
    },
    async close() {
      closed = true;
      await running?.catch(() => undefined);
      await handle?.close();
      handle = null;
    },
  };
}
