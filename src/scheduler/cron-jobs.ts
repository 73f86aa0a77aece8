import cron, { type ScheduledTask } from 'node-cron';
import type { Config } from '../config/defaults.js';
import type { DomainService } from '../core/domains/domain-service.js';
import type { EmailService } from '../core/emails/email-service.js';
import type { Logger } from '../lib/logger.js';
import type { JobMonitor } from '../core/operators/job-monitor.js';
import type { QueueService } from '../core/queue/queue-service.js';

export interface CronJobs {
  stop(): void;
}

/** Periodic jobs (node-cron). Each job skips a tick while its previous run is still going. */
export interface CronJobDeps {
  logger: Logger;
  domains: DomainService;
  emails: Pick<EmailService, 'purgeExpiredIdempotencyKeys'>;
  queue?: Pick<QueueService, 'prune'>;
  config: Config;
  /** TLS reporting (RFC 8460): the daily reports, and retries of their deliveries; absent when turned off. */
  tlsReports?: { daily: () => Promise<unknown>; retries: () => Promise<unknown> };
  /** Records each run's outcome for /admin/v1/health. */
  jobs?: JobMonitor;
  /**
   * Nodes sharing a store: claims one run (job, scheduled time) for the cluster; only the node
   * whose claim wins runs it. Absent with SQLite (one node).
   */
  claimRun?: (job: string, period: string) => Promise<boolean>;
}

export function startCronJobs(deps: CronJobDeps): CronJobs {
  const tasks: ScheduledTask[] = [];
  const job = (name: string, expression: string, fn: () => Promise<unknown>) => {
    let running = false;
    tasks.push(
      cron.schedule(expression, async (context) => {
        if (running) return;
        running = true;
        try {
          if (deps.claimRun) {
            // The scheduled time names the run: every node's tick for it has the same name.
            const period = new Date(Math.floor(context.date.getTime() / 1000) * 1000).toISOString();
            if (!(await deps.claimRun(name, period))) return;
          }
          const result = deps.jobs ? await deps.jobs.run(name, fn) : await fn();
          deps.logger.debug({ job: name, result }, 'cron job finished');
        } catch (err) {
          deps.logger.error({ err, job: name }, 'cron job failed');
        } finally {
          running = false;
        }
      }),
    );
  };
  // Unverified domains often, so a newly published record is picked up soon; verified ones
  // daily, so a domain whose records disappear loses SUCCESS.
  job('recheck-unverified-domains', deps.config.domains.recheckUnverifiedCron, () => deps.domains.recheck(false));
  job('recheck-verified-domains', deps.config.domains.recheckVerifiedCron, () => deps.domains.recheck(true));
  // Expired keys already answer as unused (begin() checks the age); this only keeps the table
  // from growing. Hourly at a minute other jobs do not use.
  job('purge-idempotency-keys', '23 * * * *', () => deps.emails.purgeExpiredIdempotencyKeys());
  // Attempt traces past their retention and suspensions long ended, daily.
  const queue = deps.queue;
  if (queue) job('prune-queue-records', '41 4 * * *', () => queue.prune(deps.config.outbound.traces.retentionDays * 86_400_000));
  if (deps.tlsReports) {
    // Once a day for the finished UTC days (a missed run catches up the next day); report
    // deliveries that failed are retried every five minutes as they fall due.
    job('tls-reports', deps.config.outbound.tlsReports.cron, deps.tlsReports.daily);
    job('tls-report-retries', '*/5 * * * *', deps.tlsReports.retries);
  }
  return {
    stop() {
      for (const t of tasks) t.stop();
    },
  };
}
