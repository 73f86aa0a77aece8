import { z } from 'zod';
import type { Clock } from '../../lib/clock.js';
import { newId } from '../../lib/ids.js';
import { replaceUnstorable } from '../../lib/nul-text.js';
import type { DomainRecord } from '../../store/repositories/domains-repository.js';
import type { ReceivedTlsReportRow, ReceivedTlsReportsRepository } from '../../store/repositories/received-tls-reports-repository.js';
import { badRequest, notFound } from '../errors.js';
import { orTooSlow } from '../query-too-slow.js';

/**
 * TLS reports (RFC 8460) that other senders mail about a receiving domain of ours, to the
 * address its `_smtp._tls` record names. Each is checked against the report format (§4.4),
 * stored once per reporter and report id, and read through the API within the team (a key
 * bound to a domain sees that domain's reports only).
 */

const count = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const text = (max: number) => z.string().max(max);
/**
 * The organization and the report id are the report's key (with the domain: a unique index,
 * so a resent report is stored once), and an index entry holds about 2.7 KB on PostgreSQL: 500
 * characters of three UTF-8 bytes each made the two of them too large, and the reporter got a
 * 451 on every retry. 1000 bytes each leave room; more than any reporter writes.
 */
const MAX_REPORT_KEY_BYTES = 1000;
const keyText = text(500)
  .min(1)
  .refine((s) => Buffer.byteLength(s, 'utf8') <= MAX_REPORT_KEY_BYTES, `at most ${MAX_REPORT_KEY_BYTES} bytes in UTF-8`);
const failureDetail = z.looseObject({
  'result-type': text(100),
  'sending-mta-ip': text(100).optional(),
  'receiving-mx-hostname': text(255).optional(),
  'receiving-mx-helo': text(255).optional(),
  'receiving-ip': text(100).optional(),
  'failed-session-count': count,
  'additional-information': text(2000).optional(),
  'failure-reason-code': text(500).optional(),
});
const reportSchema = z.looseObject({
  'organization-name': keyText,
  'date-range': z.looseObject({ 'start-datetime': z.iso.datetime({ offset: true }), 'end-datetime': z.iso.datetime({ offset: true }) }),
  'contact-info': text(500).optional(),
  'report-id': keyText,
  policies: z
    .array(
      z.looseObject({
        policy: z.looseObject({
          'policy-type': z.enum(['tlsa', 'sts', 'no-policy-found']),
          'policy-string': z.array(text(2000)).max(1000).optional(),
          'policy-domain': text(255).min(1),
          'mx-host': z.array(text(255)).max(1000).optional(),
        }),
        summary: z.looseObject({ 'total-successful-session-count': count, 'total-failure-session-count': count }),
        'failure-details': z.array(failureDetail).max(10_000).optional(),
      }),
    )
    .max(1000),
});

export type ReceivedTlsReportJson = z.infer<typeof reportSchema>;

export interface ReceivedTlsReportScope {
  teamId: number;
  domainId: number | null;
}

export interface TlsReportPolicyView {
  policyType: 'tlsa' | 'sts' | 'no-policy-found';
  policyDomain: string;
  policyString: string[];
  mxHost: string[];
  successfulSessions: number;
  failureSessions: number;
  failureDetails: {
    resultType: string;
    sendingMtaIp: string | null;
    receivingMxHostname: string | null;
    receivingMxHelo: string | null;
    receivingIp: string | null;
    failedSessions: number;
    additionalInformation: string | null;
    failureReasonCode: string | null;
  }[];
}

/** Parses a report's JSON text; BAD_REQUEST naming what is wrong. */
export function parseTlsReport(json: string): ReceivedTlsReportJson {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    throw badRequest('the TLS report is not JSON');
  }
  const parsed = reportSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw badRequest(`the TLS report does not follow RFC 8460: ${issue.path.join('.') || 'report'}: ${issue.message}`);
  }
  // Another server's text: NUL or an unpaired surrogate, which no store keeps alike, shows as U+FFFD (lib/nul-text.ts).
  return replaceUnstorable(parsed.data);
}

function policiesOf(report: ReceivedTlsReportJson): TlsReportPolicyView[] {
  return report.policies.map((p) => ({
    policyType: p.policy['policy-type'],
    policyDomain: p.policy['policy-domain'],
    policyString: p.policy['policy-string'] ?? [],
    mxHost: p.policy['mx-host'] ?? [],
    successfulSessions: p.summary['total-successful-session-count'],
    failureSessions: p.summary['total-failure-session-count'],
    failureDetails: (p['failure-details'] ?? []).map((d) => ({
      resultType: d['result-type'],
      sendingMtaIp: d['sending-mta-ip'] ?? null,
      receivingMxHostname: d['receiving-mx-hostname'] ?? null,
      receivingMxHelo: d['receiving-mx-helo'] ?? null,
      receivingIp: d['receiving-ip'] ?? null,
      failedSessions: d['failed-session-count'],
      additionalInformation: d['additional-information'] ?? null,
      failureReasonCode: d['failure-reason-code'] ?? null,
    })),
  }));
}

export function createReceivedTlsReportService(deps: { repo: ReceivedTlsReportsRepository; clock: Clock }) {
  function listItem(r: ReceivedTlsReportRow) {
    return {
      id: r.id,
      domainId: r.domain_id,
      organizationName: r.organization_name,
      reportId: r.report_id,
      contactInfo: r.contact_info,
      dateRange: { start: r.start_datetime, end: r.end_datetime },
      totalSuccessfulSessions: r.total_successful,
      totalFailureSessions: r.total_failure,
      mailFrom: r.mail_from,
      createdAt: r.created_at,
    };
  }

  return {
    /** Parses (BAD_REQUEST if it is no RFC 8460 report) and stores a report's JSON text. */
    async receive(domain: DomainRecord, json: string, envelope: { mailFrom: string; remoteIp: string | null }): Promise<string | null> {
      return this.store(domain, parseTlsReport(json), envelope);
    },

    /** Stores a parsed report for the domain its address named. Returns its id, or null for a resend already stored. */
    async store(domain: DomainRecord, report: ReceivedTlsReportJson, envelope: { mailFrom: string; remoteIp: string | null }): Promise<string | null> {
      const policies = policiesOf(report);
      const id = newId('tlsr');
      const inserted = await deps.repo.insert({
        id,
        team_id: domain.teamId,
        domain_id: domain.id,
        organization_name: report['organization-name'],
        report_id: report['report-id'],
        contact_info: report['contact-info'] ?? null,
        start_datetime: new Date(report['date-range']['start-datetime']).toISOString(),
        end_datetime: new Date(report['date-range']['end-datetime']).toISOString(),
        total_successful: policies.reduce((n, p) => n + p.successfulSessions, 0),
        total_failure: policies.reduce((n, p) => n + p.failureSessions, 0),
        policies_json: JSON.stringify(policies),
        mail_from: envelope.mailFrom,
        remote_ip: envelope.remoteIp,
        created_at: deps.clock.now().toISOString(),
      });
      return inserted ? id : null;
    },

    /** Newest first; `domainIds` absent means every domain the scope sees, and empty none. */
    async list(scope: ReceivedTlsReportScope, opts: { offset: number; limit: number; domainIds?: number[] }) {
      if (opts.domainIds?.length === 0) return { items: [], total: 0 };
      let domainIds: number[] | null = opts.domainIds ?? null;
      if (scope.domainId !== null) {
        if (domainIds && !domainIds.includes(scope.domainId)) return { items: [], total: 0 };
        domainIds = [scope.domainId];
      }
      const { rows, total } = await orTooSlow(deps.repo.list(scope.teamId, { domainIds, offset: opts.offset, limit: opts.limit }));
      return { items: rows.map(listItem), total };
    },

    async get(scope: ReceivedTlsReportScope, id: string) {
      if (id.length < 3 || id.length > 100) throw badRequest('id: must be 3 to 100 characters');
      const row = await deps.repo.get(scope.teamId, id);
      if (!row || (scope.domainId !== null && row.domain_id !== scope.domainId)) throw notFound(`TLS report ${id} not found`);
      return { ...listItem(row), policies: JSON.parse(row.policies_json) as TlsReportPolicyView[] };
    },
  };
}
export type ReceivedTlsReportService = ReturnType<typeof createReceivedTlsReportService>;
