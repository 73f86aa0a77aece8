import { createHash } from 'node:crypto';
import type { DomainRecord, DomainStatus, MtaStsMode } from '../../store/repositories/domains-repository.js';

/** The spec's DNS record resource: what the user must publish, and what we last saw. */
export interface DnsRecordView {
  type: 'MX' | 'TXT' | 'CNAME';
  name: string;
  value: string;
  ttl: string;
  priority: string | null;
  status: DomainStatus;
  recommended: boolean;
}

export const MX_PRIORITY = '10';
export const RECORD_TTL = 'Auto';

export function dkimHost(d: Pick<DomainRecord, 'dkimSelector' | 'name'>): string {
  return `${d.dkimSelector}._domainkey.${d.name}`;
}
export function bounceHost(d: Pick<DomainRecord, 'bounceLabel' | 'name'>): string {
  return `${d.bounceLabel}.${d.name}`;
}
export function dkimValue(publicKey: string): string {
  return `v=DKIM1; k=rsa; p=${publicKey}`;
}
/** SPF for the return-path host: authorises this server's address (its A/AAAA) to use it as MAIL FROM. */
export function spfValue(hostname: string): string {
  return `v=spf1 a:${hostname} ~all`;
}
export const DMARC_VALUE = 'v=DMARC1; p=none;';

/**
 * RFC 8461 §3.2 max_age of the policy we serve: a week once enforcing (senders keep it that
 * long, §10.2 suggests weeks), a day while testing or withdrawing so a change is seen soon.
 */
export const MTA_STS_MAX_AGE_SECONDS: Readonly<Record<MtaStsMode, number>> = { enforce: 604_800, testing: 86_400, none: 86_400 };

/** The MTA-STS policy file served for a receiving domain (its MX is this server). */
export function servedStsPolicy(mode: MtaStsMode, hostname: string): string {
  return `version: STSv1\r\nmode: ${mode}\r\nmx: ${hostname}\r\nmax_age: ${MTA_STS_MAX_AGE_SECONDS[mode]}\r\n`;
}

/** The TXT record's id (RFC 8461 §3.1: 1 to 32 alphanumerics): it changes exactly when the served policy does. */
export function stsPolicyId(policy: string): string {
  return createHash('sha256').update(policy).digest('hex').slice(0, 20);
}
export function mtaStsTxtHost(d: Pick<DomainRecord, 'name'>): string {
  return `_mta-sts.${d.name}`;
}
export function mtaStsTxtValue(d: Pick<DomainRecord, 'mtaStsMode'>, hostname: string): string {
  return `v=STSv1; id=${stsPolicyId(servedStsPolicy(d.mtaStsMode, hostname))}`;
}
/** The host senders fetch the policy from (https://mta-sts.<domain>/.well-known/mta-sts.txt). */
export function mtaStsPolicyHost(d: Pick<DomainRecord, 'name'>): string {
  return `mta-sts.${d.name}`;
}
export function tlsRptHost(d: Pick<DomainRecord, 'name'>): string {
  return `_smtp._tls.${d.name}`;
}
/** The Posthorn mailbox that takes the domain's TLS reports (the inbound router knows it). */
export function tlsRptAddress(d: Pick<DomainRecord, 'id'>, hostname: string): string {
  return `tlsrpt+${d.id}@${hostname}`;
}
export function tlsRptTxtValue(d: Pick<DomainRecord, 'id'>, hostname: string): string {
  return `v=TLSRPTv1; rua=mailto:${tlsRptAddress(d, hostname)}`;
}

export function buildDnsRecords(d: DomainRecord, hostname: string): DnsRecordView[] {
  const s = (v: DomainStatus | null): DomainStatus => v ?? 'NOT_STARTED';
  const records: DnsRecordView[] = [
    { type: 'TXT', name: dkimHost(d), value: dkimValue(d.publicKey), ttl: RECORD_TTL, priority: null, status: s(d.dkimStatus), recommended: false },
    { type: 'MX', name: bounceHost(d), value: hostname, ttl: RECORD_TTL, priority: MX_PRIORITY, status: s(d.mxStatus), recommended: false },
    { type: 'TXT', name: bounceHost(d), value: spfValue(hostname), ttl: RECORD_TTL, priority: null, status: s(d.spfStatus), recommended: false },
    { type: 'TXT', name: `_dmarc.${d.name}`, value: DMARC_VALUE, ttl: RECORD_TTL, priority: null, status: s(d.dmarcStatus), recommended: true },
  ];
  if (d.trackingDomain) {
    records.push({ type: 'CNAME', name: d.trackingDomain, value: hostname, ttl: RECORD_TTL, priority: null, status: s(d.trackingDomainStatus), recommended: false });
  }
  if (d.receiving) {
    records.push({ type: 'MX', name: d.name, value: hostname, ttl: RECORD_TTL, priority: MX_PRIORITY, status: s(d.receivingMxStatus), recommended: false });
    // Inbound transport security (RFC 8461, RFC 8460): recommended, never required.
    records.push(
      { type: 'TXT', name: mtaStsTxtHost(d), value: mtaStsTxtValue(d, hostname), ttl: RECORD_TTL, priority: null, status: s(d.mtaStsStatus), recommended: true },
      { type: 'CNAME', name: mtaStsPolicyHost(d), value: hostname, ttl: RECORD_TTL, priority: null, status: s(d.mtaStsHostStatus), recommended: true },
      { type: 'TXT', name: tlsRptHost(d), value: tlsRptTxtValue(d, hostname), ttl: RECORD_TTL, priority: null, status: s(d.tlsRptStatus), recommended: true },
    );
  }
  return records;
}

/**
 * Whether records pointing at this host name would point at the machine that reads them
 * (the default `localhost`): nobody else can deliver bounces to it or match its SPF.
 */
export function isLocalHostname(hostname: string): boolean {
  const h = hostname.trim().toLowerCase().replace(/\.$/, '');
  return h === 'localhost' || h.endsWith('.localhost') || h === 'localhost.localdomain' || h === '127.0.0.1' || h === '::1';
}

/** The warning for records that point at localhost: what is wrong and what to set. */
export function localHostnameWarning(hostname: string, sandbox = false): string {
  const instead = sandbox ? '' : ' (or use sandbox mode, POSTHORN_SANDBOX=true, to try sending without DNS)';
  return `hostname is ${hostname}: the MX and SPF records Posthorn asks you to publish point at it, so no other server can reach this one; set hostname (POSTHORN_HOSTNAME) to this server's public DNS name before you publish them${instead}`;
}
