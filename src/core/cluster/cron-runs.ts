import type { Clock } from '../../lib/clock.js';
import type { JobRunsRepository, UnfinishedRun } from '../../store/repositories/job-runs-repository.js';
import { STALE_MS } from './cluster-service.js';

/*
 * Which node runs a cron run, and what becomes of one a node did not finish (docs/operations.md,
 * Periodic work). Nodes sharing a store claim each run (job, scheduled time) once for the cluster.
 * A run ends finished unless its node stops (or dies) partway; such a run is taken over by a
 * live node (the sweep that sees the node gone), or by the node itself when it starts again, and
 * carries on in the same period: the jobs skip what is done (a pruned chunk is gone, a reported
 * day is recorded, a domain checked since the run began is not checked again). One node alone
 * (SQLite) takes up at its start the run a stop or a kill left unfinished.
 */

export type { UnfinishedRun };

export interface CronRuns {
  /** True when the run (job, period) is this node's to run. */
  claim(job: string, period: string): Promise<boolean>;
  /** The run ended (it was not stopped partway). */
  finish(job: string, period: string): Promise<void>;
  /** The latest run of each of `jobs` left unfinished by a node that is gone (or by this node's earlier life). */
  unfinished(jobs: readonly string[]): Promise<UnfinishedRun[]>;
  /** True on the one node that takes the run over. */
  takeOver(run: UnfinishedRun): Promise<boolean>;
  /** The latest period recorded for each of `jobs` that has run: what a start catches up from. */
  latest(jobs: readonly string[]): Promise<Map<string, string>>;
  /** The clock the runs are stamped by (the injected one in tests). */
  now(): Date;
}

export function createCronRuns(deps: { repo: JobRunsRepository; clock: Clock; node: string; cluster: boolean }): CronRuns {
  const { repo, clock, node } = deps;
  return {
    async claim(job, period) {
      if (deps.cluster) return repo.claim(job, period, node, clock.now().toISOString());
      await repo.restart(job, period, node, clock.now().toISOString());
      return true;
    },
    async finish(job, period) {
      await repo.finish(job, period, node, clock.now().toISOString());
      // One node alone: nobody claims the earlier runs (the cluster's sweep prunes them otherwise).
      if (!deps.cluster) await repo.forgetBefore(job, period);
    },
    // Heartbeats are the store's times (cluster-service.ts).
    unfinished: (jobs) => repo.unfinished(jobs, node, STALE_MS),
    takeOver: (run) => repo.takeOver(run, node, STALE_MS),
    latest: (jobs) => repo.latest(jobs),
    now: () => clock.now(),
  };
}
