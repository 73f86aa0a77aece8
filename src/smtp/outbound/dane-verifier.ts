/**
 * DANE for SMTP (RFC 7672): which TLSA records apply to an MX host, and whether the chain a
 * server presented matches one of them.
 *
 * Lookup (§2.2): TLSA records are looked up only for an MX host whose MX RRset and address
 * records the resolver validated (MxHost.dnssec; we trust its AD bit, dns-client.ts). Then
 *
 *   _25._tcp.<mx> answer, validated         -> DANE applies: TLS is mandatory, the chain must match
 *   validated NXDOMAIN / NODATA             -> no DANE for this host (other policies apply)
 *   answer or denial not validated          -> no DANE either: behind a validating resolver a
 *                                              missing AD bit means "insecure" (a CNAME into or a
 *                                              delegation to an unsigned zone), and §2.2 says
 *                                              insecure TLSA records are not used; a bogus answer
 *                                              comes back as SERVFAIL instead
 *   SERVFAIL, timeout                       -> "dnssec-invalid": indeterminate, the host is not
 *                                              used now (§2.1.1)
 *
 * Matching (§3.1): only DANE-TA(2) and DANE-EE(3) are usable for SMTP; PKIX-TA(0)/PKIX-EE(1) and
 * unknown usages, selectors (0 full certificate, 1 SubjectPublicKeyInfo) and matching types
 * (0 exact, 1 SHA-256, 2 SHA-512) are ignored. With records but none usable, TLS is still
 * mandatory but cannot be authenticated ("tlsa-invalid").
 *
 *   DANE-EE(3)  the leaf matches; its names and validity period are not checked (§3.1.1)
 *   DANE-TA(2)  a certificate in the presented chain matches; every certificate below it is
 *               issued and signed by the next one, within its validity period, and the leaf
 *               is valid for the MX host name or the next-hop (recipient) domain (§3.1.2, §3.2)
 */
import { createHash, X509Certificate } from 'node:crypto';
import { DnsError, type DnsResolver, type TlsaRecord } from '../../lib/dns/dns-client.js';
import type { Clock } from '../../lib/clock.js';
import type { TlsFailureType } from '../../core/tls-reports/tls-verdict.js';
import { TtlCache } from './ttl-cache.js';

export type { TlsaRecord } from '../../lib/dns/dns-client.js';

export const DANE_TA = 2;
export const DANE_EE = 3;

export type DaneState =
  /** DANE does not apply to this host. */
  | { kind: 'none' }
  /** Validated TLSA records: TLS is mandatory; `usable` may be empty (then unauthenticated). */
  | { kind: 'tlsa'; records: TlsaRecord[]; usable: TlsaRecord[] }
  /** The lookup could not be trusted: do not deliver to this host now. */
  | { kind: 'indeterminate'; detail: string };

export type DaneMatch = { ok: true; usage: number } | { ok: false; result: TlsFailureType; reasonCode: string; detail: string };

const SMTP_PORT_LABEL = '_25._tcp';
const MAX_CACHE_ENTRIES = 10_000;
/** When a denial carries no SOA TTL (RFC 2308): a common SOA minimum. */
const DEFAULT_NEGATIVE_TTL_SECONDS = 300;
/** SERVFAIL and timeouts are remembered briefly, so a broken zone is not asked per message. */
const INDETERMINATE_TTL_SECONDS = 30;
const MAX_TTL_SECONDS = 24 * 3600;
const MS_PER_SECOND = 1000;

export function isUsableTlsa(r: TlsaRecord): boolean {
  return (r.usage === DANE_TA || r.usage === DANE_EE) && (r.selector === 0 || r.selector === 1) && [0, 1, 2].includes(r.matchingType);
}

/** RFC 6698 §2.2 presentation form, for reports and logs: "3 1 1 <hex>". */
export function tlsaPresentation(r: TlsaRecord): string {
  return `${r.usage} ${r.selector} ${r.matchingType} ${r.data.toString('hex').toUpperCase()}`;
}

function selected(cert: X509Certificate, selector: number): Buffer {
  return selector === 0 ? cert.raw : cert.publicKey.export({ type: 'spki', format: 'der' });
}

function matches(r: TlsaRecord, cert: X509Certificate): boolean {
  const data = selected(cert, r.selector);
  if (r.matchingType === 0) return data.equals(r.data);
  const digest = createHash(r.matchingType === 1 ? 'sha256' : 'sha512').update(data).digest();
  return digest.equals(r.data);
}

function withinValidity(cert: X509Certificate, nowMs: number): boolean {
  return Date.parse(cert.validFrom) <= nowMs && nowMs <= Date.parse(cert.validTo);
}

/**
 * Whether a presented chain (leaf first) matches the usable records, for the reference names
 * (MX host, next-hop domain). nowMs is wall-clock time: certificates are dated in it, and the
 * TLS stack checks PKIX validity against it too.
 */
export function matchChain(usable: TlsaRecord[], chain: X509Certificate[], names: string[], nowMs: number): DaneMatch {
  const leaf = chain[0];
  if (!leaf) return { ok: false, result: 'validation-failure', reasonCode: 'no-peer-certificate', detail: 'the server presented no certificate' };
  if (usable.some((r) => r.usage === DANE_EE && matches(r, leaf))) return { ok: true, usage: DANE_EE };
  let nameProblem: DaneMatch | undefined;
  for (const r of usable.filter((x) => x.usage === DANE_TA)) {
    const anchor = chain.findIndex((c) => matches(r, c));
    if (anchor < 0) continue;
    const path = chain.slice(0, anchor + 1);
    const linked = path.every((c, i) => i === anchor || (c.checkIssued(path[i + 1]!) && c.verify(path[i + 1]!.publicKey)));
    if (!linked) continue;
    if (!path.slice(0, Math.max(anchor, 1)).every((c) => withinValidity(c, nowMs))) {
      nameProblem ??= { ok: false, result: 'certificate-expired', reasonCode: 'dane-ta-chain-expired', detail: 'a certificate below the DANE-TA trust anchor is outside its validity period' };
      continue;
    }
    // §3.2.3: DNS-ID (subjectAltName), or the CN only when there is none; "*." for one label.
    if (names.some((n) => leaf.checkHost(n, { subject: 'default', wildcards: true, partialWildcards: false, multiLabelWildcards: false }) !== undefined)) {
      return { ok: true, usage: DANE_TA };
    }
    nameProblem ??= { ok: false, result: 'certificate-host-mismatch', reasonCode: 'dane-ta-name-mismatch', detail: `the certificate is not valid for ${names.join(' or ')}` };
  }
  return nameProblem ?? { ok: false, result: 'certificate-not-trusted', reasonCode: 'tlsa-mismatch', detail: 'no TLSA record matches the certificate chain the server presented' };
}

export interface TlsaLookup {
  /** The DANE state of an MX host whose MX and address records were DNSSEC-validated. */
  lookup(host: string): Promise<DaneState>;
}

/** TLSA lookups through Posthorn's resolver, cached for their TTL (denials and failures too). */
export function createTlsaLookup(resolver: DnsResolver, clock: Clock): TlsaLookup {
  const cache = new TtlCache<DaneState>(clock, MAX_CACHE_ENTRIES);
  const ttlMs = (seconds: number) => Math.min(Math.max(seconds, 0), MAX_TTL_SECONDS) * MS_PER_SECOND;

  async function query(host: string): Promise<{ value: DaneState; ttlMs: number }> {
    const name = `${SMTP_PORT_LABEL}.${host}`;
    if (!resolver.resolveTlsa) return { value: { kind: 'none' }, ttlMs: ttlMs(MAX_TTL_SECONDS) };
    try {
      const answer = await resolver.resolveTlsa(name);
      // §2.2: insecure TLSA records are not used (pre-DANE opportunistic TLS).
      if (!answer.authenticated) return { value: { kind: 'none' }, ttlMs: ttlMs(answer.ttlSeconds) };
      return { value: { kind: 'tlsa', records: answer.records, usable: answer.records.filter(isUsableTlsa) }, ttlMs: ttlMs(answer.ttlSeconds) };
    } catch (err) {
      if (err instanceof DnsError && (err.code === 'NOTFOUND' || err.code === 'NODATA')) {
        // Validated or insecure, a denial means no DANE for this host.
        return { value: { kind: 'none' }, ttlMs: ttlMs(err.negativeTtlSeconds ?? DEFAULT_NEGATIVE_TTL_SECONDS) };
      }
      const why = err instanceof Error ? err.message : String(err);
      return { value: { kind: 'indeterminate', detail: `TLSA lookup for ${name} failed: ${why}` }, ttlMs: ttlMs(INDETERMINATE_TTL_SECONDS) };
    }
  }

  return {
    lookup: (host) => cache.through(host.toLowerCase(), () => query(host.toLowerCase())),
  };
}
