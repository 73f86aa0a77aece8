import type { Config } from '../config/defaults.js';
import type { Logger } from '../lib/logger.js';
import type { JobMonitor } from '../core/operators/job-monitor.js';
import { startCronJobs, type CronJobs } from '../scheduler/cron-jobs.js';
import { startCampaignRunner, type CampaignRunner } from '../scheduler/campaign-runner.js';
import type { CoreServices } from './core-services-wiring.js';

// The node's periodic work: the cron jobs (in a cluster each run is claimed by one node) and the
// campaign runner. Both start last in start() and are the first to stop in stop().

export function wireScheduler(
  o: Pick<CoreServices, 'domains' | 'emails' | 'queue' | 'campaigns' | 'cronRuns' | 'contentRetention'> & {
    /** Makes the due TLS reports (generate) and sends what is due; the outbound side, wired by start(), does it. */
    runTlsReports: (generate: boolean, signal?: AbortSignal) => Promise<unknown>;
    config: Config;
    logger: Logger;
    jobs: JobMonitor;
  },
) {
  const { domains, emails, queue, campaigns, runTlsReports, cronRuns, contentRetention, config, logger, jobs } = o;
  const tlsReportConfig = config.outbound.tlsReports;
  let cron: CronJobs | undefined;
  let campaignRunner: CampaignRunner | undefined;
  return {
    start(): void {
      cron = startCronJobs({ logger, domains, emails, queue, contentRetention, config, jobs, runs: cronRuns, tlsReports: tlsReportConfig.enabled ? { daily: (signal) => runTlsReports(true, signal), retries: (signal) => runTlsReports(false, signal) } : undefined });
      // A run the previous process left unfinished (stopped or killed partway) carries on.
      // Then a daily job whose time passed while the server was down runs once.
      const started = cron;
      void started
        .takeUp()
        .catch((err: unknown) => logger.warn({ err }, 'could not take up the cron runs left unfinished; the next start or sweep tries again'))
        .then(() => started.catchUp())
        .catch((err: unknown) => logger.warn({ err }, 'could not run the cron jobs that missed their time; they run at their next time'));
      campaignRunner = startCampaignRunner({ campaigns, logger, jobs });
    },
    /** Carries on the cron runs nodes that are gone left unfinished (after a cluster sweep). */
    takeUp: async () => cron?.takeUp(),
    /** No more cron ticks; a job under way stops at its next step (cronSettled() waits for it). */
    stopCron: () => cron?.stop(),
    stopCampaignRunner: () => campaignRunner?.stop(),
    cronSettled: () => cron?.settled(),
    // The tests' handles (App.runCampaigns, App.runCronJob).
    runCampaigns: () => campaignRunner?.tickNow() ?? campaigns.tick(),
    runCronJob: (name: string, scheduled?: Date) => cron?.runNow(name, scheduled) ?? Promise.resolve(false),
  };
}

export type Scheduler = ReturnType<typeof wireScheduler>;
