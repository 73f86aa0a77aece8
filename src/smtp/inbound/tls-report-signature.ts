import type { DKIMResult, DNSResolver } from 'mailauth';

// RFC 8460 §3: a TLS report sent by mail MUST carry a valid DKIM signature (RFC 6376) of the
// reporting domain, without l=; one lacking it MUST be ignored. The reporting domain is taken
// as the From domain with DMARC's relaxed alignment (the same organizational domain, mailauth's
// `aligned`, RFC 7489 3.1.1), or exactly the domain the TLS-Report-Submitter field names (§5.3):
// a reporter may send from its mail provider's domain while signing as itself.

/** Upper bound on the key look-ups for one message (as for inbound authentication). */
const VERIFY_TIMEOUT_MS = 60_000;
const DOMAIN = /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

export type ReporterSignature = { ok: true; domain: string } | { ok: false; temporary: boolean; reason: string };

type Signature = Pick<DKIMResult, 'signingDomain'> & {
  status?: { result?: string; comment?: string | boolean; aligned?: string | boolean };
  /** Set by mailauth when the signature has l= (RFC 6376 3.5). */
  canonBodyLengthLimited?: boolean;
};

/** The TLS-Report-Submitter value when it is a domain name, lowercased. */
export function submitterDomain(value: unknown): string | null {
  if (typeof value !== 'string') return null;
  const name = value.trim().toLowerCase().replace(/\.$/, '');
  return DOMAIN.test(name) ? name : null;
}

/** Whether one of `signatures` is the reporting domain's, and if not, why (the first reason that applies). */
export function judgeReporterSignatures(signatures: Signature[], fromDomain: string | null, submitter: string | null): ReporterSignature {
  const signed = signatures.filter((s) => s.signingDomain);
  const d = (s: Signature) => s.signingDomain.toLowerCase();
  const ofReporter = (s: Signature) => !!s.status?.aligned || (submitter !== null && d(s) === submitter);
  const passing = signed.filter((s) => s.status?.result === 'pass');
  const good = passing.find((s) => ofReporter(s) && !s.canonBodyLengthLimited);
  if (good) return { ok: true, domain: d(good) };
  const refuse = (reason: string) => ({ ok: false, temporary: false, reason }) as const;
  if (!signed.length) return refuse('the message is not DKIM-signed');
  const partial = passing.find((s) => ofReporter(s));
  if (partial) return refuse(`the signature of d=${d(partial)} signs only part of the body (l=), which RFC 8460 forbids`);
  // The reporter's key could not be looked up: it may verify later, so the reporter retries.
  const lookup = signed.find((s) => s.status?.result === 'temperror' && ofReporter(s));
  if (lookup) return { ok: false, temporary: true, reason: `the DKIM key of d=${d(lookup)} could not be looked up; try again later` };
  const other = passing[0];
  if (other) return refuse(`d=${d(other)} is neither the From domain (${fromDomain ?? 'none'}) nor in its organizational domain, nor the TLS-Report-Submitter (${submitter ?? 'none'})`);
  const why = (s: Signature) => `d=${d(s)}: ${s.status?.result ?? 'none'}${typeof s.status?.comment === 'string' ? ` (${s.status.comment})` : ''}`;
  return refuse(`no signature verifies (${signed.slice(0, 3).map(why).join('; ')})`);
}

/** Verifies the DKIM signatures of a report mail through Posthorn's resolver and judges them. */
export async function verifyReporterSignature(raw: Buffer, opts: { resolver: DNSResolver; submitter: unknown; now: Date }): Promise<ReporterSignature> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), VERIFY_TIMEOUT_MS);
    timer.unref();
  });
  try {
    // Loaded with the first report: most servers never receive one.
    const { dkimVerify } = await import('mailauth/lib/dkim/verify.js');
    const res = await Promise.race([dkimVerify(raw, { resolver: opts.resolver, curTime: opts.now }), timedOut]);
    if (!res) return { ok: false, temporary: true, reason: 'the DKIM check timed out; try again later' };
    const fromDomain = res.headerFrom?.[0]?.split('@').pop()?.toLowerCase() || null;
    return judgeReporterSignatures(res.results as Signature[], fromDomain, submitterDomain(opts.submitter));
  } catch {
    return { ok: false, temporary: true, reason: 'the DKIM check failed; try again later' };
  } finally {
    clearTimeout(timer);
  }
}
