import type { CampaignService } from '../core/campaigns/campaign-service.js';
import type { JobMonitor } from '../core/operators/job-monitor.js';
import type { Logger } from '../lib/logger.js';

/**
 * In a cluster: the campaign counts a dead node committed the events of but never made, made from
 * the stored events as at a start (the sweep that finds the node dead asks for it). A pass over
 * every campaign recipient, in chunks: run off the heartbeat (a long one would get this node taken
 * for dead), one at a time, and ended between chunks by a graceful stop (the next start of any
 * node makes the rest).
 */
export function deadNodeRecount(deps: { campaigns: Pick<CampaignService, 'recoverCounts'>; jobs: JobMonitor; logger: Logger; stopping: () => boolean }) {
  let recount: Promise<void> = Promise.resolve();
  let queued = false;
  return {
    /** Starts a pass, after the one under way if any. */
    start(): void {
      if (queued) return; // the pass not yet started reads this death's events too
      queued = true;
      recount = recount.then(async () => {
        queued = false;
        if (deps.stopping()) return;
        try {
          const recounted = await deps.jobs.run('campaign-recount', () => deps.campaigns.recoverCounts(deps.stopping));
          if (recounted) deps.logger.info({ event: 'cluster.campaigns_recounted', recounted }, `counted ${recounted} campaign count(s) a dead node had not made`);
        } catch (err) {
          deps.logger.warn({ err }, 'recounting the campaign counts of a dead node failed; the next start of a node recounts them');
        }
      });
    },
    /** Resolves once the pass under way, if any, has ended. */
    settled: (): Promise<void> => recount,
  };
}
