import cron, { type ScheduledTask } from 'node-cron';
import type { Config } from '../config/defaults.js';
import type { CronRuns } from '../core/cluster/cron-runs.js';
import type { DomainService } from '../core/domains/domain-service.js';
import type { EmailService } from '../core/emails/email-service.js';
import type { Logger } from '../lib/logger.js';
import type { JobMonitor } from '../core/operators/job-monitor.js';
import type { QueueService } from '../core/queue/queue-service.js';
import type { ContentRetentionService } from '../core/retention/content-retention-service.js';

export interface CronJobs {
  /** No more ticks; the jobs under way are asked to stop at their next step (settled() waits for them). */
  stop(): void;
  /**
   * Resolves once the jobs under way have ended: each ends at its next step after stop() (a
   * re-check finishes the domain it is on; every step is bounded by its DNS, SMTP or store
   * timeouts), so a graceful stop closes the store only after their last write.
   */
  settled(): Promise<void>;
  /**
   * Runs a job now as its tick for `scheduled` would (tests); false when there is no such job.
   * In a cluster a run is claimed per job and scheduled second, so a second run within the
   * same second needs another `scheduled`.
   */
  runNow(name: string, scheduled?: Date): Promise<boolean>;
  /** When a job runs next; null for an unknown job or after stop(). */
  nextRun(name: string): Date | null;
  /**
   * Carries on the runs a node left unfinished (stopped or died partway), in their period: at
   * start (this node's earlier life), and after a sweep that found a node gone. Resolves once
   * they are started.
   */
  takeUp(): Promise<void>;
  /**
   * At start, after takeUp: each job whose time passed since its latest recorded run (the
   * server was down across it) runs once, for the latest time it missed. A job that never ran
   * waits for its time. Resolves once the runs are started.
   */
  catchUp(): Promise<void>;
}

/**
 * The zone cron expressions are read in, on every node whatever its TZ: nodes in different zones
 * (or a server whose TZ changes) run a daily job at the same instant, so the (job, scheduled
 * time) claim makes it one run for the cluster.
 */
export const CRON_TIME_ZONE = 'UTC';

/**
 * A job: `signal` aborts at stop(); a job that loops starts no further item once it has. `since`:
 * in a run taken over from a node that did not finish it, when the run began (work done since
 * then is done).
 */
type JobFn = (signal: AbortSignal, since?: Date) => Promise<unknown>;

interface CronFields {
  /** Latest first; a five-field expression has only 0. */
  seconds: number[];
  minutes: Set<number>;
  hours: Set<number>;
}

/** How far back a start looks for a missed time: a weekly job's week (and the 7 days of runs a cluster keeps). */
const CATCH_UP_LOOKBACK_MS = 8 * 86_400_000;

/**
 * The latest time at or before `now`, and after `after`, that the task's expression matches
 * (its seconds field read from `seconds`), or null. Minute by minute backwards: a daily job's
 * search ends within a day, at the first match or at its latest run.
 */
function latestMatch(task: ScheduledTask, fields: CronFields, now: number, after: number): Date | null {
  const floor = Math.max(after, now - CATCH_UP_LOOKBACK_MS);
  for (let minute = Math.floor(now / 60_000) * 60_000; minute + 60_000 > floor; minute -= 60_000) {
    // The expression is read in UTC (CRON_TIME_ZONE): a minute or hour it does not name is
    // passed over without asking the task.
    const d = new Date(minute);
    if (!fields.minutes.has(d.getUTCMinutes()) || !fields.hours.has(d.getUTCHours())) continue;
    for (const s of fields.seconds) {
      const at = minute + s * 1000;
      if (at > now) continue;
      if (at <= floor) return null;
      if (task.match(new Date(at))) return new Date(at);
    }
  }
  return null;
}

/** Periodic jobs (node-cron). Each job skips a tick while its previous run is still going. */
export interface CronJobDeps {
  logger: Logger;
  domains: DomainService;
  emails: Pick<EmailService, 'purgeExpiredIdempotencyKeys'>;
  queue?: Pick<QueueService, 'prune'>;
  /** Mail content past retention.contentDays; the job exists only when that is set. */
  contentRetention?: Pick<ContentRetentionService, 'purge'>;
  config: Config;
  /** TLS reporting (RFC 8460): the daily reports, and retries of their deliveries; absent when turned off. */
  tlsReports?: { daily: JobFn; retries: JobFn };
  /** Records each run's outcome for /admin/v1/health. */
  jobs?: JobMonitor;
  /**
   * The runs (job, scheduled time): nodes sharing a store claim each once for the cluster (only
   * the node whose claim wins runs it), and a run not finished is carried on (takeUp).
   */
  runs?: CronRuns;
}

export function startCronJobs(deps: CronJobDeps): CronJobs {
  const tasks = new Map<string, ScheduledTask>();
  /** Each job's tick, by name. */
  const ticks = new Map<string, (scheduled: Date) => Promise<void>>();
  const stopping = new AbortController();
  /** The runs under way, by job name. */
  const running = new Map<string, Promise<void>>();
  const fns = new Map<string, JobFn>();
  /** Each job's expression's fields, for catchUp. */
  const fieldsOf = new Map<string, CronFields>();
  /** A run: `claim` says whether it is this node's; `since` when it began, for one taken over. */
  const runJob = async (name: string, period: string, claim: () => Promise<boolean>, since?: Date): Promise<void> => {
    let claimed = false;
    let ended: { result: unknown } | undefined;
    try {
      if (deps.runs && !(await claim())) return;
      claimed = true;
      const run = () => fns.get(name)!(stopping.signal, since);
      ended = { result: deps.jobs ? await deps.jobs.run(name, run) : await run() };
    } catch (err) {
      deps.logger.error({ err, job: name }, 'cron job failed');
    }
    // Ended (a failure too: the next tick tries again), unless stopped partway: then a live node
    // or this one's next start carries it on.
    if (claimed && deps.runs && !stopping.signal.aborted) {
      await deps.runs.finish(name, period).catch((err: unknown) => deps.logger.warn({ err, job: name }, 'could not record the cron run as finished'));
    }
    // After the record: whoever acts on the line finds the run ended in the store.
    if (ended) deps.logger.debug({ job: name, result: ended.result }, 'cron job finished');
  };
  const start = (name: string, period: string, claim: () => Promise<boolean>, since?: Date): Promise<void> => {
    const run = runJob(name, period, claim, since).finally(() => running.delete(name));
    running.set(name, run);
    return run;
  };
  const job = (name: string, expression: string, fn: JobFn) => {
    const tick = (scheduled: Date): Promise<void> => {
      if (running.has(name) || stopping.signal.aborted) return Promise.resolve();
      // The scheduled time names the run: every node's tick for it has the same name.
      const period = new Date(Math.floor(scheduled.getTime() / 1000) * 1000).toISOString();
      return start(name, period, () => deps.runs!.claim(name, period));
    };
    fns.set(name, fn);
    ticks.set(name, tick);
    const parsed = cron.parse(expression);
    fieldsOf.set(name, { seconds: [...parsed.second].sort((a, b) => b - a), minutes: new Set(parsed.minute), hours: new Set(parsed.hour) });
    tasks.set(name, cron.schedule(expression, (context) => tick(context.date), { name, timezone: CRON_TIME_ZONE }));
  };
  // Unverified domains often, so a newly published record is picked up soon; verified ones
  // daily, so a domain whose records disappear loses SUCCESS.
  job('recheck-unverified-domains', deps.config.domains.recheckUnverifiedCron, (signal, since) => deps.domains.recheck(false, signal, since));
  job('recheck-verified-domains', deps.config.domains.recheckVerifiedCron, (signal, since) => deps.domains.recheck(true, signal, since));
  // Expired keys already answer as unused (begin() checks the age); this only keeps the table
  // from growing. Hourly at a minute other jobs do not use.
  job('purge-idempotency-keys', '23 * * * *', () => deps.emails.purgeExpiredIdempotencyKeys());
  // Attempt traces past their retention and suspensions long ended, daily.
  const queue = deps.queue;
  if (queue) job('prune-queue-records', '41 4 * * *', (signal) => queue.prune(deps.config.outbound.traces.retentionDays * 86_400_000, signal));
  // Old mail's content, daily at a minute of its own; off (content kept forever) by default.
  const retention = deps.contentRetention;
  const contentDays = deps.config.retention.contentDays;
  if (retention && contentDays > 0) job('purge-old-content', '53 4 * * *', (signal) => retention.purge(contentDays, signal));
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
    async runNow(name, scheduled = new Date()) {
      const tick = ticks.get(name);
      if (!tick) return false;
      await tick(scheduled);
      return true;
    },
    nextRun(name) {
      return tasks.get(name)?.getNextRun() ?? null;
    },
    async takeUp() {
      const runs = deps.runs;
      if (!runs || stopping.signal.aborted) return;
      for (const r of await runs.unfinished([...ticks.keys()].filter((name) => !running.has(name)))) {
        if (running.has(r.job) || stopping.signal.aborted) continue;
        const takeOver = async () => {
          if (!(await runs.takeOver(r))) return false;
          deps.logger.info({ event: 'cron.taken_up', job: r.job, period: r.period, from: r.node }, `carrying on the run of ${r.job} (${r.period}) that ${r.node} left unfinished`);
          return true;
        };
        void start(r.job, r.period, takeOver, new Date(r.startedAt));
      }
    },
    async catchUp() {
      const runs = deps.runs;
      if (!runs || stopping.signal.aborted) return;
      const names = [...ticks.keys()].filter((name) => !running.has(name));
      const latest = await runs.latest(names);
      const now = runs.now().getTime();
      for (const name of names) {
        const last = latest.get(name);
        if (last === undefined || running.has(name) || stopping.signal.aborted) continue;
        const missed = latestMatch(tasks.get(name)!, fieldsOf.get(name)!, now, Date.parse(last));
        if (!missed) continue;
        const period = missed.toISOString();
        // Claimed like a tick: in a cluster, the first node to start after the downtime runs it.
        const claim = async () => {
          if (!(await runs.claim(name, period))) return false;
          deps.logger.info({ event: 'cron.caught_up', job: name, period, lastRun: last }, `running ${name} for ${period}, a time it missed while no server ran it (its latest run: ${last})`);
          return true;
        };
        void start(name, period, claim);
      }
    },
  };
}
