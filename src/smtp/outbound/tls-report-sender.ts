/**
 * Delivers the queued TLS reports (RFC 8460 §3, §5): to a mailto: target as a DKIM-signed
 * multipart/report mail through Posthorn's own MX lookup and connection pool, to an https:
 * target as a POST. Report mail is sent with opportunistic TLS and no transport requirement:
 * §3 says reports are delivered "despite any TLS-related failures" and their sessions are not
 * reported, so sending one never feeds another.
 */
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import { dayBounds } from '../../core/tls-reports/tls-report-document.js';
import type { TlsReportJob, TlsReportOutcome, TlsReportService } from '../../core/tls-reports/tls-report-service.js';
import { resolveWebhookTarget, WebhookUrlError } from '../../core/webhooks/url-policy.js';
import type { Clock } from '../../lib/clock.js';
import type { DnsResolver } from '../../lib/dns/dns-client.js';
import type { Logger } from '../../lib/logger.js';
import { httpsRequest } from './https-client.js';
import type { OwnMailSender } from './own-mail-sender.js';

export interface TlsReportSenderOptions {
  reports: Pick<TlsReportService, 'claimDue' | 'recordAttempt' | 'keepLease' | 'renewEveryMs'>;
  /** Signs with the server's key (d= the hostname) and sends through the pool. */
  ownMail: OwnMailSender;
  /** Our host name: the From domain, the Submitter. */
  hostname: string;
  resolver: DnsResolver;
  https: { ca?: (string | Buffer)[]; timeoutMs: number; allowPrivate: boolean };
  clock: Clock;
  logger: Logger;
}

const gzipAsync = promisify(gzip);
const MAX_RESPONSE_BYTES = 4096;
const BASE64_LINE = 76;

/** The report mail (RFC 8460 §5.3): multipart/report; report-type="tlsrpt", the gzipped JSON attached. */
export function composeReportMail(input: { job: TlsReportJob; to: string; from: string; submitter: string; gz: Buffer; date: Date; messageId: string }): Buffer {
  const { job } = input;
  const boundary = `tlsrpt-${randomBytes(12).toString('hex')}`;
  const { startSeconds, endSeconds } = dayBounds(job.day);
  const filename = `${input.submitter}!${job.policyDomain}!${startSeconds}!${endSeconds}.json.gz`;
  const base64 = input.gz.toString('base64').replace(new RegExp(`.{1,${BASE64_LINE}}`, 'g'), '$&\r\n');
  const lines = [
    `From: TLS reports <${input.from}>`,
    `To: <${input.to}>`,
    `Subject: Report Domain: ${job.policyDomain} Submitter: ${input.submitter} Report-ID: <${job.reportId}>`,
    `Date: ${input.date.toUTCString().replace('GMT', '+0000')}`,
    `Message-ID: <${input.messageId}>`,
    'MIME-Version: 1.0',
    `TLS-Report-Domain: ${job.policyDomain}`,
    `TLS-Report-Submitter: ${input.submitter}`,
    // RFC 3834: nobody should auto-reply to a report.
    'Auto-Submitted: auto-generated',
    `Content-Type: multipart/report; report-type="tlsrpt"; boundary="${boundary}"`,
    '',
    `--${boundary}`,
    'Content-Type: text/plain; charset=us-ascii',
    'Content-Transfer-Encoding: 7bit',
    '',
    `This is an aggregate TLS report (RFC 8460) from ${input.submitter} for ${job.policyDomain},`,
    `covering ${job.day} (UTC). The report is attached as gzipped JSON.`,
    '',
    `--${boundary}`,
    'Content-Type: application/tlsrpt+gzip',
    'Content-Transfer-Encoding: base64',
    `Content-Disposition: attachment; filename="${filename}"`,
    '',
    base64.trimEnd(),
    `--${boundary}--`,
    '',
  ];
  return Buffer.from(lines.join('\r\n'), 'utf8');
}

export function createTlsReportSender(opts: TlsReportSenderOptions) {
  const log = opts.logger.child({ component: 'tls-report-sender' });
  const from = `tlsrpt-noreply@${opts.hostname}`;

  async function mail(job: TlsReportJob, address: string, gz: Buffer): Promise<TlsReportOutcome> {
    const raw = composeReportMail({ job, to: address, from, submitter: opts.hostname, gz, date: opts.clock.now(), messageId: `tlsrpt.${randomBytes(8).toString('hex')}@${opts.hostname}` });
    return opts.ownMail.send({ mailFrom: from, to: address, raw });
  }

  async function post(target: string, gz: Buffer): Promise<TlsReportOutcome> {
    try {
      const pinned = await resolveWebhookTarget(target, opts.resolver, opts.https.allowPrivate, {
        what: 'TLS report targets',
        allowedBy: 'outbound.tlsReports.allowPrivate',
      });
      const res = await httpsRequest({
        method: 'POST',
        url: pinned.url,
        address: pinned.address,
        headers: { 'Content-Type': 'application/tlsrpt+gzip', 'User-Agent': 'Posthorn TLS reporting' },
        body: gz,
        timeoutMs: opts.https.timeoutMs,
        maxBodyBytes: MAX_RESPONSE_BYTES,
        // The status is the answer: a collector that took the report and says so
        // at length has still taken it, and must not get it again.
        overflow: 'cut',
        ...(opts.https.ca ? { ca: opts.https.ca } : {}),
      });
      if (res.status >= 200 && res.status < 300) return { ok: true };
      return { ok: false, permanent: false, error: `${pinned.url.href} answered HTTP ${res.status}` };
    } catch (err) {
      const permanent = err instanceof WebhookUrlError && (err.problem === 'private' || err.problem === 'invalid');
      return { ok: false, permanent, error: (err as Error).message };
    }
  }

  /** Attempts one delivery, keeping its lease while the attempt goes on (a report mail can take minutes). */
  async function attempt(job: TlsReportJob): Promise<TlsReportOutcome> {
    let renewing: Promise<unknown> = Promise.resolve();
    const timer = setInterval(() => {
      renewing = renewing
        .then(() => opts.reports.keepLease(job))
        .then(
          (kept) => kept || log.warn({ domain: job.policyDomain, target: job.target }, 'the lease of a TLS report delivery in progress was taken by another claim'),
          (err: unknown) => log.warn({ err, domain: job.policyDomain, target: job.target }, 'renewing the lease of a TLS report delivery failed'),
        );
    }, opts.reports.renewEveryMs);
    timer.unref();
    try {
      const gz = await gzipAsync(Buffer.from(job.reportJson, 'utf8'));
      return job.target.startsWith('mailto:') ? await mail(job, job.target.slice('mailto:'.length), gz) : await post(job.target, gz);
    } catch (err) {
      log.error({ err, target: job.target }, 'sending a TLS report failed unexpectedly');
      return { ok: false, permanent: false, error: (err as Error).message };
    } finally {
      clearInterval(timer);
      // The outcome is recorded against the lease as it stands after the last renewal.
      await renewing;
    }
  }

  return {
    /** Sends every due report delivery; returns what happened to them. */
    async runDue(signal?: AbortSignal): Promise<{ sent: number; retry: number; failed: number; taken: number }> {
      const tally = { sent: 0, retry: 0, failed: 0, taken: 0 };
      // After a graceful stop, what is still due waits for the next run.
      while (!signal?.aborted) {
        // One at a time, claimed as it is attempted: deliveries claimed together wait leased
        // behind each other's attempts, and another node's run takes those whose lease ran out.
        const [job] = await opts.reports.claimDue(1);
        if (!job) return tally;
        tally[await opts.reports.recordAttempt(job, await attempt(job))]++;
      }
      return tally;
    },
  };
}
