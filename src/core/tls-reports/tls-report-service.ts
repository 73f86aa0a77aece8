import { randomUUID } from 'node:crypto';
import type { Clock } from '../../lib/clock.js';
import { DnsError, type DnsResolver } from '../../lib/dns/dns-client.js';
import type { Logger } from '../../lib/logger.js';
import type { TlsReportsRepository } from '../../store/repositories/tls-reports-repository.js';
import { buildTlsReport, parseTlsRptTxt } from './tls-report-document.js';
import { utcDay, type TlsSessionCounter } from './tls-session-counter.js';

/**
 * The daily TLS-RPT run (RFC 8460): every finished UTC day with counted sessions becomes, per
 * policy domain that publishes `_smtp._tls` with a rua, one aggregate report and one delivery
 * per target. The (domain, day) row is what makes a report go out once: it is written with its
 * deliveries and the removal of the counts in one transaction, and a later run finds it there.
 * Deliveries are claimed with a lease and retried on a schedule; the sender (an edge) does the
 * SMTP or HTTPS and reports back.
 */

export interface TlsReportJob {
  id: number;
  policyDomain: string;
  day: string;
  target: string;
  reportId: string;
  /** The report JSON, the same bytes on every attempt and for every target. */
  reportJson: string;
  attempts: number;
  /** When this claim's lease runs out: it names the claim (keepLease moves it on). */
  leaseUntil: number;
}

/** What became of an attempt's outcome: recorded, or dropped because another claim took the delivery. */
export type TlsReportRecord = 'sent' | 'retry' | 'failed' | 'taken';

export type TlsReportOutcome = { ok: true } | { ok: false; permanent: boolean; error: string };

export interface TlsReportServiceDeps {
  repo: TlsReportsRepository;
  counter: TlsSessionCounter;
  resolver: DnsResolver;
  clock: Clock;
  logger: Logger;
  /** organization-name of our reports. */
  organizationName: string;
  /** contact-info of our reports. */
  contactInfo: string;
  /** Right-hand side of report ids. */
  hostname: string;
  /** How long a claimed delivery stays leased (outbound.leaseMs); kept while it is attempted. */
  leaseMs?: number;
}

/** Counts are reported for days up to this old (a server that was down catches up); older ones are dropped. */
const MAX_DAYS_BACK = 7;
/** Reports are kept this long after their day (for `posthorn` diagnostics), then deleted. */
const KEEP_REPORTS_DAYS = 30;
/** Minutes after each failed attempt; past the last step the delivery is given up. */
const RETRY_MINUTES = [5, 30, 120, 360, 720];
const DEFAULT_LEASE_MS = 10 * 60_000;
const DAY_MS = 24 * 3_600_000;
const MAX_ERROR_CHARS = 500;
/** `_smtp._tls` lookups in flight at once: a sender to thousands of domains makes as many per day. */
const LOOKUP_CONCURRENCY = 8;

export function createTlsReportService(deps: TlsReportServiceDeps) {
  const log = deps.logger.child({ component: 'tls-reports' });
  const leaseMs = deps.leaseMs ?? DEFAULT_LEASE_MS;

  /** The domain's report targets; null when DNS could not say (try again next run). */
  async function targetsOf(domain: string): Promise<string[] | null> {
    try {
      return parseTlsRptTxt((await deps.resolver.resolveTxt(`_smtp._tls.${domain}`)).records);
    } catch (err) {
      if (err instanceof DnsError && !err.temporary) return [];
      log.warn({ domain, err: (err as Error).message }, 'TLS-RPT record lookup failed; the report waits for the next run');
      return null;
    }
  }

  /**
   * Claims due deliveries with a lease. Claim only what is attempted at once: a delivery
   * claimed while another is attempted sits leased unattempted, and once its lease ran out
   * another node's run would send it too.
   */
  async function claimDue(limit: number): Promise<TlsReportJob[]> {
    const rows = await deps.repo.claimDue(deps.clock.nowMs(), leaseMs, limit);
    // A delivery without its report has nothing to send: closed, so a claim of one is never empty-handed while others are due.
    for (const r of rows.filter((r) => r.report_json === null)) {
      await deps.repo.finishDelivery(r.id, r.lease_until!, { state: 'failed', attempts: r.attempts, nextAttemptAt: deps.clock.nowMs(), lastError: 'the report is gone', at: deps.clock.now().toISOString() });
    }
    const jobs = rows
      .filter((r) => r.report_json !== null)
      .map((r) => ({ id: r.id, policyDomain: r.policy_domain, day: r.day, target: r.target, reportId: r.report_id, reportJson: r.report_json!, attempts: r.attempts, leaseUntil: r.lease_until! }));
    return jobs.length || !rows.length ? jobs : claimDue(limit);
  }

  return {
    /**
     * Makes the reports of every finished day not reported yet. Returns how many were queued.
     * Goes a batch of domains at a time (their lookups, then their reports); once `signal`
     * aborts (a graceful stop) no further batch is started, and the next run makes the rest.
     */
    async generateDue(signal?: AbortSignal): Promise<{ queued: number; withoutRua: number }> {
      await deps.counter.flush();
      const nowMs = deps.clock.nowMs();
      const today = utcDay(nowMs);
      const dropped = await deps.repo.deleteCountsBefore(utcDay(nowMs - MAX_DAYS_BACK * DAY_MS));
      if (dropped) log.info({ dropped }, 'TLS session counts older than a week were dropped unreported');
      let queued = 0;
      let withoutRua = 0;
      const daysOf = new Map<string, string[]>();
      for (const { policy_domain: domain, day } of await deps.repo.unreportedDays(today)) {
        const days = daysOf.get(domain);
        if (days) days.push(day);
        else daysOf.set(domain, [day]);
      }
      const domains = [...daysOf.keys()];
      for (let i = 0; i < domains.length && !signal?.aborted; i += LOOKUP_CONCURRENCY) {
        const batch = domains.slice(i, i + LOOKUP_CONCURRENCY);
        const found = await Promise.all(batch.map((d) => targetsOf(d)));
        const work = batch.flatMap((domain, j) => (found[j] === null ? [] : daysOf.get(domain)!.map((day) => ({ domain, day, targets: found[j]! }))));
        for (const { domain, day, targets } of work) {
          const reportId = `${randomUUID()}@${deps.hostname}`;
          const createdAt = deps.clock.now().toISOString();
          if (!targets.length) {
            // Recorded so the counts go and the day is not looked at again.
            await deps.repo.insertReport({ policyDomain: domain, day, reportId, state: 'no-rua', rua: [], reportJson: null, createdAt, targets: [], dueMs: nowMs });
            withoutRua++;
            continue;
          }
          const rows = await deps.repo.countsFor(domain, day);
          const report = buildTlsReport({ organizationName: deps.organizationName, contactInfo: deps.contactInfo, reportId, day, rows });
          const inserted = await deps.repo.insertReport({
            policyDomain: domain,
            day,
            reportId,
            state: 'queued',
            rua: targets,
            reportJson: JSON.stringify(report),
            createdAt,
            targets,
            dueMs: nowMs,
          });
          if (inserted) {
            queued++;
            log.info({ domain, day, reportId, targets }, 'TLS report queued');
          }
        }
      }
      const purged = await deps.repo.deleteReportsBefore(utcDay(nowMs - KEEP_REPORTS_DAYS * DAY_MS));
      if (purged) log.debug({ purged }, 'old TLS reports deleted');
      return { queued, withoutRua };
    },

    claimDue,

    /**
     * The attempt is still under way: its lease is extended (every third of a lease), so a
     * report mail that takes longer than one (a slow MX, several tried in turn) is not taken by
     * another node's run and sent twice. False when the claim was lost (another node took it).
     */
    async keepLease(job: TlsReportJob): Promise<boolean> {
      const until = deps.clock.nowMs() + leaseMs;
      if (!(await deps.repo.renewLease(job.id, job.leaseUntil, until))) return false;
      job.leaseUntil = until;
      return true;
    },

    /** Every how many ms keepLease should be called while an attempt is under way. */
    renewEveryMs: Math.max(1, Math.floor(leaseMs / 3)),

    /**
     * Records the attempt's outcome, only while the delivery is still this claim's: an attempt
     * that outlived its lease (the process stalled, the store was away for its renewals) and was
     * taken by another node's claim leaves that node's result alone ('taken'); a retry recorded
     * over its "sent" would send the report once more.
     */
    async recordAttempt(job: TlsReportJob, outcome: TlsReportOutcome): Promise<TlsReportRecord> {
      const attempts = job.attempts + 1;
      const at = deps.clock.now().toISOString();
      const finish = async (change: Parameters<TlsReportsRepository['finishDelivery']>[2]): Promise<boolean> => {
        if (await deps.repo.finishDelivery(job.id, job.leaseUntil, change)) return true;
        log.warn({ domain: job.policyDomain, day: job.day, target: job.target, outcome: outcome.ok ? 'sent' : outcome.error }, 'TLS report delivery was taken over by another claim while attempted; its outcome is not recorded');
        return false;
      };
      if (outcome.ok) {
        if (!(await finish({ state: 'sent', attempts, nextAttemptAt: deps.clock.nowMs(), lastError: null, at }))) return 'taken';
        log.info({ domain: job.policyDomain, day: job.day, target: job.target }, 'TLS report delivered');
        return 'sent';
      }
      const error = outcome.error.slice(0, MAX_ERROR_CHARS);
      const delay = RETRY_MINUTES[attempts - 1];
      if (outcome.permanent || delay === undefined) {
        if (!(await finish({ state: 'failed', attempts, nextAttemptAt: deps.clock.nowMs(), lastError: error, at }))) return 'taken';
        log.warn({ domain: job.policyDomain, day: job.day, target: job.target, error }, 'TLS report delivery given up');
        return 'failed';
      }
      if (!(await finish({ state: 'pending', attempts, nextAttemptAt: deps.clock.nowMs() + delay * 60_000, lastError: error, at }))) return 'taken';
      log.info({ domain: job.policyDomain, day: job.day, target: job.target, error, retryInMinutes: delay }, 'TLS report delivery failed; will retry');
      return 'retry';
    },

    /** For diagnostics and tests: what was reported, and where it went. */
    async history() {
      return { reports: await deps.repo.listReports(), deliveries: await deps.repo.listDeliveries() };
    },
  };
}
export type TlsReportService = ReturnType<typeof createTlsReportService>;
