/**
 * What one SMTP session's transport security came to, in the vocabulary of TLS reporting
 * (RFC 8460 §4.3): the policy that applied to the recipient domain (MTA-STS, DANE TLSA, or none
 * found) and the session's result under it. The outbound engine produces verdicts; the delivery
 * events carry them and the TLS-RPT counter adds them up per policy domain and day.
 */

/** RFC 8460 §4.4 "policy-type". */
export type TlsPolicyType = 'sts' | 'tlsa' | 'no-policy-found';

/** RFC 8460 §4.3 result types: negotiation failures (§4.3.1) and policy failures (§4.3.2). */
export const TLS_FAILURE_TYPES = [
  'starttls-not-supported',
  'certificate-host-mismatch',
  'certificate-expired',
  'certificate-not-trusted',
  'validation-failure',
  'tlsa-invalid',
  'dnssec-invalid',
  'dane-required',
  'sts-policy-fetch-error',
  'sts-policy-invalid',
  'sts-webpki-invalid',
] as const;
export type TlsFailureType = (typeof TLS_FAILURE_TYPES)[number];

/** The policy a session was judged by, as a report names it (RFC 8460 §4.4 "policy"). */
export interface TlsPolicyRef {
  type: TlsPolicyType;
  /** The recipient domain the policy belongs to (A-labels). */
  domain: string;
  /** "policy-string": the MTA-STS policy's lines, or the TLSA records in presentation form; empty for no-policy-found. */
  strings: string[];
  /** "mx-host": the policy's mx patterns (MTA-STS), or the MX host the TLSA records belong to (DANE). */
  mxHosts: string[];
}

export interface TlsVerdict {
  policy: TlsPolicyRef;
  /**
   * enforce: the verdict decided whether the message went (MTA-STS enforce, DANE, a domain's
   * ENFORCED policy); testing: only observed and reported (MTA-STS testing, no policy).
   */
  mode: 'enforce' | 'testing' | 'none';
  result: 'success' | TlsFailureType;
  /** The MX host the session was (or would have been) with. */
  mxHost: string;
  receivingIp?: string;
  sendingIp?: string;
  /** A short machine-readable cause ("failure-reason-code"), e.g. an OpenSSL verify code. */
  reasonCode?: string;
  /** For people: what went wrong, when something did. */
  detail?: string;
  /** The session went on to MAIL FROM (false: it was refused or closed unused). */
  proceeded: boolean;
  /**
   * A reused connection already counted for this policy domain: not another session in the
   * report, which counts connections (RFC 8460 §4.4), not the messages they carried.
   */
  sessionCounted?: boolean;
}

/** The part of a verdict a delivery event carries (events are small and readable). */
export function verdictSummary(v: TlsVerdict): Record<string, unknown> {
  return {
    policy: v.policy.type,
    mode: v.mode,
    result: v.result,
    mxHost: v.mxHost,
    ...(v.detail ? { detail: v.detail } : {}),
  };
}
