import cron, { type ScheduledTask } from 'node-cron';
import type { Config } from '../config/defaults.js';
import type { DomainService } from '../core/domains/domain-service.js';
import type { EmailService } from '../core/emails/email-service.js';
import type { Logger } from '../lib/logger.js';
import type { JobMonitor } from '../core/operators/job-monitor.js';
import type { QueueService } from '../core/queue/queue-service.js';

export interface CronJobs {
  /** No more ticks; the jobs under way are asked to stop at their next step (settled() waits for them). */
  stop(): void;
  /**
   * Resolves once the jobs under way have ended: each ends at its next step after stop() (a
   * re-check finishes the domain it is on; every step is bounded by its DNS, SMTP or store
   * timeouts), so a graceful stop closes the store only after their last write.
   */
  settled(): Promise<void>;
  /** Runs a job now as its tick would (tests); false when there is no such job. */
  runNow(name: string): Promise<boolean>;
  /** When a job runs next; null for an unknown job or after stop(). */
  nextRun(name: string): Date | null;
}

/**
 * The zone cron expressions are read in, on every node whatever its TZ: nodes in different zones
 * (or a server whose TZ changes) run a daily job at the same instant, so the (job, scheduled
 * time) claim makes it one run for the cluster.
 */
export const CRON_TIME_ZONE = 'UTC';

/** A job: `signal` aborts at stop(); a job that loops starts no further item once it has. */
type JobFn = (signal: AbortSignal) => Promise<unknown>;

/** Periodic jobs (node-cron). Each job skips a tick while its previous run is still going. */
export interface CronJobDeps {
  logger: Logger;
  domains: DomainService;
  emails: Pick<EmailService, 'purgeExpiredIdempotencyKeys'>;
  queue?: Pick<QueueService, 'prune'>;
  config: Config;
  /** TLS reporting (RFC 8460): the daily reports, and retries of their deliveries; absent when turned off. */
  tlsReports?: { daily: JobFn; retries: JobFn };
  /** Records each run's outcome for /admin/v1/health. */
  jobs?: JobMonitor;
  /**
   * Nodes sharing a store: claims one run (job, scheduled time) for the cluster; only the node
   * whose claim wins runs it. Absent with SQLite (one node).
   */
  claimRun?: (job: string, period: string) => Promise<boolean>;
}

export function startCronJobs(deps: CronJobDeps): CronJobs {
  const tasks = new Map<string, ScheduledTask>();
  /** Each job's tick, by name. */
  const ticks = new Map<string, (scheduled: Date) => Promise<void>>();
  const stopping = new AbortController();
  /** The runs under way, by job name. */
  const running = new Map<string, Promise<void>>();
  const runJob = async (name: string, scheduled: Date, fn: JobFn): Promise<void> => {
    try {
      if (deps.claimRun) {
        // The scheduled time names the run: every node's tick for it has the same name.
        const period = new Date(Math.floor(scheduled.getTime() / 1000) * 1000).toISOString();
        if (!(await deps.claimRun(name, period))) return;
      }
      const run = () => fn(stopping.signal);
      const result = deps.jobs ? await deps.jobs.run(name, run) : await run();
      deps.logger.debug({ job: name, result }, 'cron job finished');
    } catch (err) {
      deps.logger.error({ err, job: name }, 'cron job failed');
    }
  };
  const job = (name: string, expression: string, fn: JobFn) => {
    const tick = (scheduled: Date): Promise<void> => {
      if (running.has(name) || stopping.signal.aborted) return Promise.resolve();
      const run = runJob(name, scheduled, fn).finally(() => running.delete(name));
      running.set(name, run);
      return run;
    };
    ticks.set(name, tick);
    tasks.set(name, cron.schedule(expression, (context) => tick(context.date), { name, timezone: CRON_TIME_ZONE }));
  };
  // Unverified domains often, so a newly published record is picked up soon; verified ones
  // daily, so a domain whose records disappear loses SUCCESS.
  job('recheck-unverified-domains', deps.config.domains.recheckUnverifiedCron, (signal) => deps.domains.recheck(false, signal));
  job('recheck-verified-domains', deps.config.domains.recheckVerifiedCron, (signal) => deps.domains.recheck(true, signal));
  // Expired keys already answer as unused (begin() checks the age); this only keeps the table
  // from growing. Hourly at a minute other jobs do not use.
  job('purge-idempotency-keys', '23 * * * *', () => deps.emails.purgeExpiredIdempotencyKeys());
  // Attempt traces past their retention and suspensions long ended, daily.
  const queue = deps.queue;
  if (queue) job('prune-queue-records', '41 4 * * *', (signal) => queue.prune(deps.config.outbound.traces.retentionDays * 86_400_000, signal));
  if (deps.tlsReports) {
    // Once a day for the finished UTC days (a missed run catches up the next day); report
    // deliveries that failed are retried every five minutes as they fall due.
    job('tls-reports', deps.config.outbound.tlsReports.cron, deps.tlsReports.daily);
    job('tls-report-retries', '*/5 * * * *', deps.tlsReports.retries);
  }
  return {
    stop() {
      for (const t of tasks.values()) t.stop();
      stopping.abort();
    },
    async settled() {
      if (!running.size) return;
      const jobs = [...running.keys()];
      deps.logger.info({ event: 'cron.waiting', jobs }, `waiting for the cron job(s) under way to finish: ${jobs.join(', ')}`);
      await Promise.all(running.values());
    },
    async runNow(name) {
      const tick = ticks.get(name);
      if (!tick) return false;
      await tick(new Date());
      return true;
    },
    nextRun(name) {
      return tasks.get(name)?.getNextRun() ?? null;
    },
  };
}
