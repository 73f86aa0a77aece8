import type { DomainRecord, DomainStatus } from '../../store/repositories/domains-repository.js';

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
