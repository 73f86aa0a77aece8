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
}

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
}

/** Counts are reported for days up to this old (a server that was down catches up); older ones are dropped. */
const MAX_DAYS_BACK = 7;
/** Reports are kept this long after their day (for `posthorn` diagnostics), then deleted. */
const KEEP_REPORTS_DAYS = 30;
/** Minutes after each failed attempt; past the last step the delivery is given up. */
const RETRY_MINUTES = [5, 30, 120, 360, 720];
const LEASE_MS = 10 * 60_000;
const DAY_MS = 24 * 3_600_000;
const MAX_ERROR_CHARS = 500;
/** `_smtp._tls` lookups in flight at once: a sender to thousands of domains makes as many per day. */
const LOOKUP_CONCURRENCY = 8;

export function createTlsReportService(deps: TlsReportServiceDeps) {
  const log = deps.logger.child({ component: 'tls-reports' });

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

  return {
    /** Makes the reports of every finished day not reported yet. Returns how many were queued. */
    async generateDue(): Promise<{ queued: number; withoutRua: number }> {
      await deps.counter.flush();
      const nowMs = deps.clock.nowMs();
      const today = utcDay(nowMs);
      const dropped = await deps.repo.deleteCountsBefore(utcDay(nowMs - MAX_DAYS_BACK * DAY_MS));
      if (dropped) log.info({ dropped }, 'TLS session counts older than a week were dropped unreported');
      let queued = 0;
      let withoutRua = 0;
      const due = await deps.repo.unreportedDays(today);
      const domains = [...new Set(due.map((d) => d.policy_domain))];
      const targetsOfDomain = new Map<string, string[] | null>();
      for (let i = 0; i < domains.length; i += LOOKUP_CONCURRENCY) {
        const batch = domains.slice(i, i + LOOKUP_CONCURRENCY);
        const found = await Promise.all(batch.map((d) => targetsOf(d)));
        batch.forEach((d, j) => targetsOfDomain.set(d, found[j]!));
      }
      for (const { policy_domain: domain, day } of due) {
        const targets = targetsOfDomain.get(domain);
        if (targets === null || targets === undefined) continue;
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
      const purged = await deps.repo.deleteReportsBefore(utcDay(nowMs - KEEP_REPORTS_DAYS * DAY_MS));
      if (purged) log.debug({ purged }, 'old TLS reports deleted');
      return { queued, withoutRua };
    },

    async claimDue(limit: number): Promise<TlsReportJob[]> {
      const rows = await deps.repo.claimDue(deps.clock.nowMs(), LEASE_MS, limit);
      return rows
        .filter((r) => r.report_json !== null)
        .map((r) => ({ id: r.id, policyDomain: r.policy_domain, day: r.day, target: r.target, reportId: r.report_id, reportJson: r.report_json!, attempts: r.attempts }));
    },

    async recordAttempt(job: TlsReportJob, outcome: TlsReportOutcome): Promise<'sent' | 'retry' | 'failed'> {
      const attempts = job.attempts + 1;
      const at = deps.clock.now().toISOString();
      if (outcome.ok) {
        await deps.repo.finishDelivery(job.id, { state: 'sent', attempts, nextAttemptAt: deps.clock.nowMs(), lastError: null, at });
        log.info({ domain: job.policyDomain, day: job.day, target: job.target }, 'TLS report delivered');
        return 'sent';
      }
      const error = outcome.error.slice(0, MAX_ERROR_CHARS);
      const delay = RETRY_MINUTES[attempts - 1];
      if (outcome.permanent || delay === undefined) {
        await deps.repo.finishDelivery(job.id, { state: 'failed', attempts, nextAttemptAt: deps.clock.nowMs(), lastError: error, at });
        log.warn({ domain: job.policyDomain, day: job.day, target: job.target, error }, 'TLS report delivery given up');
        return 'failed';
      }
      await deps.repo.finishDelivery(job.id, { state: 'pending', attempts, nextAttemptAt: deps.clock.nowMs() + delay * 60_000, lastError: error, at });
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
