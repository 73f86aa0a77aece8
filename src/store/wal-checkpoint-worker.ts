// Runs in a worker thread (wal-checkpointer.ts): checkpoints the WAL of the store's file from a
// connection of its own, so a checkpoint's page copying and fsyncs never block the main
// thread's event loop (they did, inside whichever COMMIT crossed the auto-checkpoint threshold).
import { parentPort, workerData } from 'node:worker_threads';
import BetterSqlite3 from 'better-sqlite3';
import { lowerThreadPriority } from '../lib/thread-priority.js';

export interface CheckpointWorkerData {
  role: string;
  file: string;
  intervalMs: number;
}

/** What the worker reports after every checkpoint attempt. */
export type CheckpointReport = { ok: true; busy: number; log: number; checkpointed: number } | { ok: false; error: string };

export const CHECKPOINT_WORKER_ROLE = 'posthorn-wal-checkpoint';

if (parentPort && (workerData as { role?: string } | undefined)?.role === CHECKPOINT_WORKER_ROLE) {
  const port = parentPort;
  const { file, intervalMs } = workerData as CheckpointWorkerData;
  // Background work: the event loop's commits go first (thread-priority.ts).
  lowerThreadPriority();
  const sqlite = new BetterSqlite3(file);
  // Never wait on the writer: PASSIVE copies what it can and leaves the rest for next time.
  sqlite.pragma('busy_timeout = 0');
  // A checkpoint copies pages through; it needs no cache of its own (the build's default is 16 MB).
  sqlite.pragma('cache_size = -512');
  const tick = (): void => {
    let report: CheckpointReport;
    try {
      const [row] = sqlite.pragma('wal_checkpoint(PASSIVE)') as { busy: number; log: number; checkpointed: number }[];
      report = { ok: true, busy: row?.busy ?? 0, log: row?.log ?? 0, checkpointed: row?.checkpointed ?? 0 };
    } catch (err) {
      // A full disk or a busy database: the main connection's own threshold is the safety net.
      report = { ok: false, error: (err as Error).message };
    }
    port.postMessage(report);
  };
  const timer = setInterval(tick, intervalMs);
  port.on('message', (msg: unknown) => {
    if (msg === 'now') tick();
    if (msg === 'stop') {
      clearInterval(timer);
      sqlite.close();
      port.close();
    }
  });
}
