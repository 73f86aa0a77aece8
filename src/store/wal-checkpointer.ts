import { WORKER_EXEC_ARGV } from '../lib/worker-options.js';
import { Worker } from 'node:worker_threads';
import { CHECKPOINT_WORKER_ROLE, type CheckpointReport } from './wal-checkpoint-worker.js';

export interface WalCheckpointer {
  /** Resolves with the report of the next checkpoint the worker runs (tests). */
  nextCheckpoint(): Promise<CheckpointReport>;
  /** Asks for a checkpoint now instead of at the next interval. */
  checkpointNow(): void;
  /** Stops the worker and closes its connection; resolves once it has exited. */
  stop(): Promise<void>;
}

/** How often the worker checkpoints. Frequent passive checkpoints keep each one small. */
export const CHECKPOINT_INTERVAL_MS = 250;
const WORKER_SCRIPT = new URL('./wal-checkpoint-worker.js', import.meta.url);

/**
 * Checkpoints a WAL-mode database file from a worker thread. The caller raises its own
 * connection's wal_autocheckpoint so that it checkpoints only if this worker falls behind.
 */
export function startWalCheckpointer(file: string, opts: { intervalMs?: number; onError?: (message: string) => void } = {}): WalCheckpointer {
  const worker = new Worker(WORKER_SCRIPT, { workerData: { role: CHECKPOINT_WORKER_ROLE, file, intervalMs: opts.intervalMs ?? CHECKPOINT_INTERVAL_MS }, execArgv: WORKER_EXEC_ARGV, resourceLimits: { maxYoungGenerationSizeMb: 2 } });
  // A checkpointer alone must not keep a process alive: what it skips is done by the main
  // connection's own threshold or when the store closes.
  worker.unref();
  let waiters: ((r: CheckpointReport) => void)[] = [];
  let lastError: string | undefined;
  worker.on('message', (report: CheckpointReport) => {
    if (!report.ok && report.error !== lastError) opts.onError?.(report.error);
    lastError = report.ok ? undefined : report.error;
    const w = waiters;
    waiters = [];
    for (const resolve of w) resolve(report);
  });
  worker.on('error', (err) => opts.onError?.(`checkpoint worker failed: ${err.message}`));
  const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  let stopping: Promise<void> | undefined;
  return {
    nextCheckpoint: () => new Promise((resolve) => waiters.push(resolve)),
    checkpointNow: () => worker.postMessage('now'),
    stop() {
      stopping ??= (async () => {
        worker.ref(); // an unref'd worker's exit would not hold the loop while it is awaited
        worker.postMessage('stop');
        await exited;
      })();
      return stopping;
    },
  };
}
