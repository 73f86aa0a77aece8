/**
 * Errors raised by our stub resolver (dns-client.ts).
 *
 * The split between permanent and temporary matters to every caller: a
 * NOTFOUND/NODATA answer is an authoritative statement about the domain (RFC
 * 2308 negative answer) and may bounce mail or fail a check, while SERVFAIL,
 * timeouts and garbage say nothing about the domain and must only ever defer.
 */

export type DnsErrorCode = 'NOTFOUND' | 'NODATA' | 'SERVFAIL' | 'TIMEOUT' | 'REFUSED' | 'FORMERR' | 'BADRESPONSE';

/**
 * FORMERR is permanent when we raise it ourselves, for names that cannot be
 * encoded on the wire (empty label, label over 63 octets, name over 253 —
 * RFC 1035 §2.3.4): no such name can exist. A FORMERR answered by a server,
 * even after the plain RFC 1035 retry without EDNS, is temporary: it is what
 * a broken resolver or middlebox answers to every query, and it says nothing
 * about the name (treated as permanent, it bounced and suppressed every
 * recipient of every domain).
 */
const TEMPORARY_CODES: ReadonlySet<DnsErrorCode> = new Set<DnsErrorCode>(['SERVFAIL', 'TIMEOUT', 'REFUSED', 'BADRESPONSE']);

export function isTemporaryDnsErrorCode(code: DnsErrorCode): boolean {
  return TEMPORARY_CODES.has(code);
}

export interface DnsErrorOptions {
  cause?: unknown;
  temporary?: boolean;
  /** A denial (NOTFOUND, NODATA) the resolver validated with DNSSEC: it set the AD bit (RFC 4035 3.2.3). */
  authenticated?: boolean;
  /** A denial's negative-caching TTL from the SOA in its authority section (RFC 2308 5), when there was one. */
  negativeTtlSeconds?: number;
}

export class DnsError extends Error {
  readonly code: DnsErrorCode;
  readonly temporary: boolean;
  readonly hostname: string;
  readonly rrtype: string;
  readonly authenticated: boolean;
  readonly negativeTtlSeconds: number | undefined;

  constructor(code: DnsErrorCode, hostname: string, rrtype: string, detail?: string, options?: DnsErrorOptions) {
    super(`DNS ${rrtype} ${hostname}: ${code}${detail ? ` (${detail})` : ''}`, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'DnsError';
    this.code = code;
    this.temporary = options?.temporary ?? isTemporaryDnsErrorCode(code);
    this.hostname = hostname;
    this.rrtype = rrtype;
    this.authenticated = options?.authenticated ?? false;
    this.negativeTtlSeconds = options?.negativeTtlSeconds;
  }
}

/**
 * The err.code strings node:dns (c-ares) uses, which mailauth and other
 * node-style consumers switch on.
 */
export const NODE_DNS_ERROR_CODES: Readonly<Record<DnsErrorCode, string>> = {
  NOTFOUND: 'ENOTFOUND',
  NODATA: 'ENODATA',
  SERVFAIL: 'ESERVFAIL',
  TIMEOUT: 'ETIMEOUT',
  REFUSED: 'EREFUSED',
  FORMERR: 'EFORMERR',
  BADRESPONSE: 'EBADRESP',
};
