import type { CampaignService } from '../core/campaigns/campaign-service.js';
import type { Logger } from '../lib/logger.js';
import type { JobMonitor } from '../core/operators/job-monitor.js';

/** How often due campaign batches are looked for. */
export const CAMPAIGN_TICK_MS = 1000;

export interface CampaignRunner {
  /** Runs a tick now (tests drive it after moving their clock). */
  tickNow(): Promise<number>;
  stop(): Promise<void>;
}

/** Due work loop for campaigns: one tick at a time, never overlapping. */
export function startCampaignRunner(deps: { campaigns: CampaignService; logger: Logger; intervalMs?: number; jobs?: JobMonitor }): CampaignRunner {
  let current: Promise<number> = Promise.resolve(0);
  let stopped = false;
  const tick = () => {
    current = current.then(
      () => (stopped ? 0 : deps.jobs ? deps.jobs.run('campaigns', () => deps.campaigns.tick()) : deps.campaigns.tick()),
      () => 0,
    );
    current.catch((err) => deps.logger.error({ err }, 'campaign tick failed'));
    return current;
  };
  const timer = setInterval(() => void tick(), deps.intervalMs ?? CAMPAIGN_TICK_MS);
  timer.unref();
  return {
    tickNow: tick,
    async stop() {
      stopped = true;
      clearInterval(timer);
      await current.catch(() => 0);
    },
  };
}
