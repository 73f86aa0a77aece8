/**
 * The TLS-RPT documents (RFC 8460): the `_smtp._tls` TXT record that says where a domain wants
 * its reports (§3), and the aggregate JSON report (§4) made of a day's session counts.
 */
import { domainToASCII } from 'node:url';
import type { TlsSessionCountRow } from '../../store/repositories/tls-reports-repository.js';

/** RFC 8460 §4.4, as we write it. */
export interface TlsReportJson {
  'organization-name': string;
  'date-range': { 'start-datetime': string; 'end-datetime': string };
  'contact-info': string;
  'report-id': string;
  policies: {
    policy: { 'policy-type': string; 'policy-string'?: string[]; 'policy-domain': string; 'mx-host'?: string[] };
    summary: { 'total-successful-session-count': number; 'total-failure-session-count': number };
    'failure-details'?: {
      'result-type': string;
      'sending-mta-ip'?: string;
      'receiving-mx-hostname'?: string;
      'receiving-ip'?: string;
      'failed-session-count': number;
      'failure-reason-code'?: string;
    }[];
  }[];
}

const RUA_LIMIT = 10;
const HOST_LABEL = /^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$/;

/**
 * The report targets of a `_smtp._tls` TXT RRset (each record as its character-strings):
 * mailto: addresses and https: URLs. Records not starting with "v=TLSRPTv1" are discarded, and
 * unless exactly one is left the domain does not want reports (§3). Other URI schemes are
 * ignored; at most ten targets are used.
 */
export function parseTlsRptTxt(records: string[][]): string[] {
  const candidates = records.map((chunks) => chunks.join('')).filter((r) => /^v=TLSRPTv1\s*(;|$)/.test(r));
  if (candidates.length !== 1) return [];
  const targets: string[] = [];
  for (const field of candidates[0]!.split(';').slice(1)) {
    const eq = field.indexOf('=');
    if (eq < 0 || field.slice(0, eq).trim() !== 'rua') continue;
    for (const raw of field.slice(eq + 1).split(',')) {
      const uri = normalizeTarget(raw.trim());
      if (uri && !targets.includes(uri)) targets.push(uri);
    }
    break; // the first rua counts
  }
  return targets.slice(0, RUA_LIMIT);
}

/** A usable rua URI in canonical form, or null. mailto: keeps the address only (no query). */
function normalizeTarget(raw: string): string | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return null;
  }
  if (url.protocol === 'https:') return url.username || url.password ? null : url.href;
  if (url.protocol !== 'mailto:') return null;
  let address: string;
  try {
    address = decodeURIComponent(url.pathname);
  } catch {
    return null;
  }
  // RFC 6068 §2: an internationalised domain comes in UTF-8 (raw or percent-encoded); mail goes to its A-labels.
  const at = address.lastIndexOf('@');
  const rawDomain = address.slice(at + 1);
  const domain = /^[\x00-\x7f]*$/.test(rawDomain) ? rawDomain : domainToASCII(rawDomain);
  const labels = domain.split('.');
  if (at < 1 || !/^[^\s@<>,;"]+$/.test(address.slice(0, at)) || labels.length < 2 || !labels.every((l) => HOST_LABEL.test(l))) return null;
  return `mailto:${address.slice(0, at)}@${domain}`;
}

/** Epoch seconds of the start and end of a UTC day (the file name uses them, §5.3). */
export function dayBounds(day: string): { start: string; end: string; startSeconds: number; endSeconds: number } {
  const start = `${day}T00:00:00Z`;
  const end = `${day}T23:59:59Z`;
  return { start, end, startSeconds: Date.parse(start) / 1000, endSeconds: Date.parse(end) / 1000 };
}

/** The aggregate report of one policy domain and day (§4.4): one policy entry per policy seen. */
export function buildTlsReport(input: {
  organizationName: string;
  contactInfo: string;
  reportId: string;
  day: string;
  rows: TlsSessionCountRow[];
}): TlsReportJson {
  const byPolicy = new Map<string, TlsSessionCountRow[]>();
  for (const r of input.rows) {
    const list = byPolicy.get(r.policy_key) ?? [];
    list.push(r);
    byPolicy.set(r.policy_key, list);
  }
  const policies: TlsReportJson['policies'] = [];
  for (const rows of byPolicy.values()) {
    const first = rows[0]!;
    const { strings, mxHosts } = JSON.parse(first.policy_json) as { strings: string[]; mxHosts: string[] };
    const failures = rows.filter((r) => r.result !== 'success');
    const details = failures
      .slice()
      .sort((a, b) => b.count - a.count || a.result.localeCompare(b.result))
      .map((r) => ({
        'result-type': r.result,
        ...(r.sending_ip ? { 'sending-mta-ip': r.sending_ip } : {}),
        ...(r.mx_host ? { 'receiving-mx-hostname': r.mx_host } : {}),
        ...(r.receiving_ip ? { 'receiving-ip': r.receiving_ip } : {}),
        'failed-session-count': r.count,
        ...(r.reason_code ? { 'failure-reason-code': r.reason_code } : {}),
      }));
    policies.push({
      policy: {
        'policy-type': first.policy_type,
        ...(strings.length ? { 'policy-string': strings } : {}),
        'policy-domain': first.policy_domain,
        ...(mxHosts.length ? { 'mx-host': mxHosts } : {}),
      },
      summary: {
        'total-successful-session-count': rows.filter((r) => r.result === 'success').reduce((n, r) => n + r.count, 0),
        'total-failure-session-count': failures.reduce((n, r) => n + r.count, 0),
      },
      ...(details.length ? { 'failure-details': details } : {}),
    });
  }
  const { start, end } = dayBounds(input.day);
  return {
    'organization-name': input.organizationName,
    'date-range': { 'start-datetime': start, 'end-datetime': end },
    'contact-info': input.contactInfo,
    'report-id': input.reportId,
    policies,
  };
}
