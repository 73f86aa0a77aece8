import { statfs } from 'node:fs/promises';
import type { Clock } from '../../lib/clock.js';
import type { QueueRepository } from '../../store/repositories/queue-repository.js';
import type { JobMonitor } from './job-monitor.js';

/*
 * /admin/v1/health: what /health says (it stays cheap and public) plus what an operator alerts
 * on: how long ready mail has waited, each listener's state, free disk under the data
 * directory, and the last outcome of every background job.
 */

export type ListenerState = { state: 'listening' | 'not started' | 'failed'; host: string | null; port: number | null };

export interface AdminHealthDeps {
  queue: Pick<QueueRepository, 'totals' | 'oldestReadyMs'>;
  jobs: JobMonitor;
  clock: Clock;
  node: string;
  dataDir: string;
  storeOk: () => boolean | Promise<boolean>;
  listeners: () => Record<string, ListenerState>;
  stopping: () => boolean;
  storeKind: 'sqlite' | 'postgres';
  /** The cluster's live nodes as this node sees them. */
  cluster: () => Promise<{ node: string; hostname: string; lastSeenSeconds: number }[]>;
}

export function createAdminHealth(deps: AdminHealthDeps) {
  const startedAtMs = deps.clock.nowMs();
  return async () => {
    const now = deps.clock.nowMs();
    // The store can answer its ping and fail the next read (a connection cut in between, a lock
    // timeout): that is a store in trouble, reported as degraded like a failed ping, never a 500.
    let storeOk = await Promise.resolve(deps.storeOk()).catch(() => false);
    let queue = { ready: 0, inFlight: 0, deferred: 0, suspended: 0, oldestReadyAgeSeconds: null as number | null };
    if (storeOk) {
      try {
        const [totals, oldest] = await Promise.all([deps.queue.totals(now), deps.queue.oldestReadyMs(now)]);
        queue = {
          ready: totals.ready,
          inFlight: totals.inflight,
          deferred: totals.deferred,
          suspended: totals.suspended,
          oldestReadyAgeSeconds: oldest === null ? null : Math.max(0, (now - oldest) / 1000),
        };
      } catch {
        storeOk = false;
      }
    }
    let disk: { path: string; freeBytes: number; totalBytes: number } | null = null;
    try {
      const s = await statfs(deps.dataDir);
      disk = { path: deps.dataDir, freeBytes: s.bavail * s.bsize, totalBytes: s.blocks * s.bsize };
    } catch {
      disk = null;
    }
    const listeners = deps.listeners();
    const degraded = !storeOk || deps.stopping() || Object.values(listeners).some((l) => l.state === 'failed');
    return {
      status: degraded ? ('degraded' as const) : ('ok' as const),
      node: deps.node,
      uptimeSeconds: Math.max(0, (now - startedAtMs) / 1000),
      store: storeOk ? ('ok' as const) : ('error' as const),
      storeKind: deps.storeKind,
      cluster: storeOk ? await deps.cluster().catch(() => []) : [],
      queue,
      listeners,
      disk,
      jobs: deps.jobs.snapshot(),
    };
  };
}
export type AdminHealth = ReturnType<typeof createAdminHealth>;
