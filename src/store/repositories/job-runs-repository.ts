import { sql } from 'kysely';
import type { Db } from '../db.js';
import { storeNowMs } from './cluster-repository.js';

/*
 * Cron runs (job_runs): one row per (job, period), the period being the run's scheduled time.
 * Nodes sharing a store claim a run with the row's insert, so it runs once for the cluster; a
 * run is finished when it ended, and one left unfinished by a node that is gone is taken over by
 * a live node, the row's owner moving to it.
 */

export interface UnfinishedRun {
  job: string;
  period: string;
  node: string;
  /** When the run was first claimed: what it did since then is done. */
  startedAt: string;
}

export function createJobRunsRepository(db: Db) {
  return {
    /** Claims one run for the cluster: true for the one node whose insert wins. */
    async claim(job: string, period: string, node: string, nowIso: string): Promise<boolean> {
      const res = await db.insertInto('job_runs').values({ job, period, node, started_at: nowIso }).onConflict((oc) => oc.columns(['job', 'period']).doNothing()).executeTakeFirst();
      return Number(res.numInsertedOrUpdatedRows ?? 0n) > 0;
    },

    /** One node alone: the run starts, again if the period was run before (a job run by hand). */
    async restart(job: string, period: string, node: string, nowIso: string): Promise<void> {
      await db
        .insertInto('job_runs')
        .values({ job, period, node, started_at: nowIso })
        .onConflict((oc) => oc.columns(['job', 'period']).doUpdateSet({ node, started_at: nowIso, finished_at: null }))
        .execute();
    },

    /** The run ended on `node` (it still owns it). */
    async finish(job: string, period: string, node: string, nowIso: string): Promise<void> {
      await db.updateTable('job_runs').set({ finished_at: nowIso }).where('job', '=', job).where('period', '=', period).where('node', '=', node).where('finished_at', 'is', null).execute();
    },

    /** The latest period recorded for each of `jobs` that has run (finished or not). */
    async latest(jobs: readonly string[]): Promise<Map<string, string>> {
      if (!jobs.length) return new Map();
      const rows = await db.selectFrom('job_runs').select(['job', (eb) => eb.fn.max('period').as('period')]).where('job', 'in', jobs).groupBy('job').execute();
      return new Map(rows.map((r) => [r.job, r.period]));
    },

    /**
     * The latest run of each of `jobs` when it is unfinished and its node is `node` (an earlier
     * life of this node: the process running now has not started it) or no node heard from in the
     * last `staleMs` of the store's time (stopped, or dead). On one node (no heartbeats in the store) every owner is gone.
     */
    async unfinished(jobs: readonly string[], node: string, staleMs: number): Promise<UnfinishedRun[]> {
      if (!jobs.length) return [];
      const rows = await db
        .selectFrom('job_runs as r')
        .select(['r.job', 'r.period', 'r.node', 'r.started_at'])
        .where('r.job', 'in', jobs)
        .where('r.finished_at', 'is', null)
        .where((eb) => eb('r.period', '=', eb.selectFrom('job_runs as l').select((l) => l.fn.max('l.period').as('latest')).whereRef('l.job', '=', 'r.job')))
        .where((eb) => eb.or([eb('r.node', '=', node), eb('r.node', 'not in', eb.selectFrom('cluster_nodes').select('id').where('heartbeat_at', '>=', sql<number>`${storeNowMs(db)} - ${staleMs}`))]))
        .orderBy('r.job')
        .execute();
      return rows.map((r) => ({ job: r.job, period: r.period, node: r.node, startedAt: r.started_at }));
    },

    /**
     * Takes over a run left unfinished: true for the one node that moves it from its owner. Its
     * owner is still gone (not heard from in the last `staleMs`) as the row is taken, unless it is
     * `node` itself: an owner that came back since unfinished() was read takes up its own run,
     * and taking it from `node` to `node` would not keep another node from taking it too.
     */
    async takeOver(run: UnfinishedRun, node: string, staleMs: number): Promise<boolean> {
      const res = await db
        .updateTable('job_runs')
        .set({ node })
        .where('job', '=', run.job)
        .where('period', '=', run.period)
        .where('node', '=', run.node)
        .where('finished_at', 'is', null)
        .where((eb) => eb.or([eb('node', '=', node), eb('node', 'not in', eb.selectFrom('cluster_nodes').select('id').where('heartbeat_at', '>=', sql<number>`${storeNowMs(db)} - ${staleMs}`))]))
        .executeTakeFirst();
      return Number(res.numUpdatedRows) > 0;
    },

    /** One node alone: the job's earlier runs matter no more (nobody else claims them). */
    async forgetBefore(job: string, period: string): Promise<void> {
      await db.deleteFrom('job_runs').where('job', '=', job).where('period', '<', period).execute();
    },
  };
}
export type JobRunsRepository = ReturnType<typeof createJobRunsRepository>;
