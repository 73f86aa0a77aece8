/**
 * Which transport security each MX host of a recipient domain must get, decided once per
 * delivery attempt from the domain's published policies and the sending domain's own:
 *
 *   DANE (RFC 7672)     an MX host with DNSSEC-validated TLSA records: TLS is mandatory and the
 *                       chain must match a record. DANE wins over MTA-STS for that host, unless
 *                       none of its records is usable (then MTA-STS enforce applies).
 *   MTA-STS (RFC 8461)  enforce: only MX hosts matching an `mx:` pattern, over TLS with a
 *                       certificate valid for the MX name (PKIX); never plaintext.
 *                       testing: delivered as usual; what enforce would have refused is reported.
 *                       none (or no policy): nothing but the reporting of what the session saw.
 *   ENFORCED            the sending domain's own setting: STARTTLS and a certificate valid for
 *                       the MX name, on top of whatever the recipient published.
 *
 * Every judgement is also a TLS-RPT verdict (RFC 8460) for the recipient domain; the engine
 * records them in the delivery events and the daily counts.
 */
import type { TlsFailureType, TlsPolicyRef, TlsVerdict } from '../../core/tls-reports/tls-verdict.js';
import { matchChain, tlsaPresentation, type DaneState, type TlsaLookup } from './dane-verifier.js';
import { mxAllowed } from './mta-sts-policy.js';
import type { MtaStsResolver, StsLookup } from './mta-sts-resolver.js';
import type { MxHost } from './mx-resolver.js';
import type { TlsJudgement, TlsObservation, TlsPolicy, TransportRequirement } from './smtp-client-types.js';

/** One MX host of the plan: its requirement, or why it must not be used at all. */
export interface PlannedHost {
  host: MxHost;
  requirement: TransportRequirement;
  /** Not to be connected to (MTA-STS enforce without a matching mx, a TLSA lookup that failed). */
  refused?: { verdict: TlsVerdict; message: string };
}

export interface TransportPolicy {
  plan(domain: string, hosts: MxHost[], sendingPolicy: TlsPolicy): Promise<PlannedHost[]>;
  /** An attempt found no host because the domain's MTA-STS enforce policy refused some: the next plan looks for a new policy (mta-sts-resolver.ts). */
  stsRefused(domain: string): void;
}

export interface TransportPolicyOptions {
  /** Absent: MTA-STS is off (outbound.mtaSts.enabled = false). */
  mtaSts?: MtaStsResolver;
  /** Absent: DANE is off. */
  dane?: TlsaLookup;
}

/** OpenSSL's and Node's verify codes, as RFC 8460 result types (§4.3.1). */
export function pkixResult(code: string): TlsFailureType {
  if (/^CERT_(HAS_EXPIRED|NOT_YET_VALID)$/.test(code)) return 'certificate-expired';
  if (/ALTNAME|HOSTNAME/.test(code)) return 'certificate-host-mismatch';
  if (/SELF_SIGNED|UNABLE_TO_GET_ISSUER|UNABLE_TO_VERIFY|CERT_UNTRUSTED|CERT_REJECTED|CERT_CHAIN_TOO_LONG/.test(code)) return 'certificate-not-trusted';
  return 'validation-failure';
}

/** A session without TLS, in RFC 8460 terms. */
function noTlsResult(obs: TlsObservation): { result: TlsFailureType; detail: string; reasonCode?: string } {
  if (obs.tlsFailure === 'handshake-failed') return { result: 'validation-failure', detail: `the TLS handshake with ${obs.host} failed${obs.error ? `: ${obs.error}` : ''}`, reasonCode: 'handshake-failed' };
  return { result: 'starttls-not-supported', detail: `${obs.host} does not offer STARTTLS${obs.error ? ` (${obs.error})` : ''}` };
}

type Check = { ok: true } | { ok: false; result: TlsFailureType; detail: string; reasonCode?: string };

function pkixCheck(obs: TlsObservation): Check {
  if (!obs.secure) return { ok: false, ...noTlsResult(obs) };
  if (obs.pkixError === null || obs.pkixError === undefined) return { ok: true };
  return { ok: false, result: pkixResult(obs.pkixError), detail: `the certificate of ${obs.host} is not valid for it (${obs.pkixError})`, reasonCode: obs.pkixError };
}

function verdict(policy: TlsPolicyRef, mode: TlsVerdict['mode'], obs: TlsObservation, check: Check, proceeded: boolean): TlsVerdict {
  return {
    policy,
    mode,
    result: check.ok ? 'success' : check.result,
    mxHost: obs.host,
    ...(obs.remoteIp ? { receivingIp: obs.remoteIp } : {}),
    ...(obs.localIp ? { sendingIp: obs.localIp } : {}),
    ...(!check.ok && check.reasonCode ? { reasonCode: check.reasonCode } : {}),
    ...(!check.ok ? { detail: check.detail } : {}),
    proceeded,
  };
}

/**
 * A requirement from a policy check. `enforced`: the check decides whether the session may be
 * used; otherwise it is only reported. `sending` ENFORCED adds the PKIX check on top.
 */
function requirement(policy: TlsPolicyRef, mode: TlsVerdict['mode'], enforced: boolean, sending: TlsPolicy, check: (obs: TlsObservation) => Check): TransportRequirement {
  const ownEnforced = sending === 'ENFORCED';
  return {
    requireTls: enforced || ownEnforced,
    judge(obs: TlsObservation): TlsJudgement {
      let c = check(obs);
      let proceed = c.ok || !enforced;
      if (proceed && ownEnforced) {
        // The sending domain's own ENFORCED: a certificate valid for the MX name, whatever was published.
        const own = pkixCheck(obs);
        if (!own.ok) {
          proceed = false;
          if (c.ok) c = { ...own, detail: `${own.detail}; the sending domain's TLS policy is ENFORCED` };
        }
      }
      return { proceed, verdict: verdict(policy, ownEnforced ? 'enforce' : mode, obs, c, proceed) };
    },
  };
}

function refusedHost(host: MxHost, policy: TlsPolicyRef, result: TlsFailureType, reasonCode: string, detail: string, sending: TlsPolicy): PlannedHost {
  const v: TlsVerdict = { policy, mode: 'enforce', result, mxHost: host.host, reasonCode, detail, proceeded: false };
  return { host, requirement: requirement(policy, 'enforce', true, sending, () => ({ ok: false, result, detail, reasonCode })), refused: { verdict: v, message: `${host.host}: ${detail}; not delivering to it` } };
}

/**
 * The DANE state of a host whose MX and address records were validated. An MX target that is a
 * CNAME (RFC 7672 2.2.2): the records at the expanded name (the TLSA base domain) first, then,
 * when there are none, at the name the MX record gives.
 */
async function daneStateOf(dane: TlsaLookup, host: MxHost): Promise<DaneState> {
  if (host.canonical && host.canonical !== host.host) {
    const expanded = await dane.lookup(host.canonical);
    if (expanded.kind !== 'none') return expanded;
  }
  return dane.lookup(host.host);
}

function daneHost(domain: string, host: MxHost, state: Extract<DaneState, { kind: 'tlsa' }>, sending: TlsPolicy): PlannedHost {
  const policy: TlsPolicyRef = { type: 'tlsa', domain, strings: state.records.map(tlsaPresentation), mxHosts: [host.host] };
  // §3.2.2: the certificate may name the expanded name of an aliased MX host too.
  const names = [host.host, ...(host.canonical && host.canonical !== host.host ? [host.canonical] : []), domain];
  return {
    host,
    requirement: requirement(policy, 'enforce', true, sending, (obs) => {
      if (!obs.secure) return { ok: false, ...noTlsResult(obs) };
      // §2.2: TLSA records, none usable: TLS is still mandatory, it just cannot be authenticated.
      if (!state.usable.length) return { ok: true };
      const m = matchChain(state.usable, obs.peerChain?.() ?? [], names, Date.now());
      return m.ok ? { ok: true } : { ok: false, result: m.result, detail: `DANE: ${m.detail}`, reasonCode: m.reasonCode };
    }),
  };
}

/** The "tlsa-invalid" verdict of TLSA records none of which is usable: reported, while TLS still goes ahead. */
function withUnusableTlsa(planned: PlannedHost, state: Extract<DaneState, { kind: 'tlsa' }>): PlannedHost {
  if (state.usable.length) return planned;
  const inner = planned.requirement;
  return {
    ...planned,
    requirement: {
      requireTls: true,
      judge(obs) {
        const j = inner.judge(obs);
        if (j.verdict.result !== 'success') return j;
        return { proceed: j.proceed, verdict: { ...j.verdict, result: 'tlsa-invalid', reasonCode: 'no-usable-tlsa', detail: 'none of the TLSA records is usable for SMTP (RFC 7672 3.1): TLS without authentication' } };
      },
    },
  };
}

function stsHost(host: MxHost, sts: StsLookup, policy: TlsPolicyRef, sending: TlsPolicy): PlannedHost {
  const p = sts.policy!;
  const enforce = p.mode === 'enforce';
  if (enforce && !mxAllowed(host.host, p)) {
    return refusedHost(host, policy, 'validation-failure', 'mx-not-in-policy', `MTA-STS (enforce): ${host.host} matches none of the policy's mx patterns (${p.mx.join(', ')})`, sending);
  }
  const mode = enforce ? 'enforce' : 'testing';
  return {
    host,
    requirement: requirement(policy, mode, enforce, sending, (obs) => {
      if (!mxAllowed(obs.host, p)) return { ok: false, result: 'validation-failure', reasonCode: 'mx-not-in-policy', detail: `MTA-STS (testing): ${obs.host} matches none of the policy's mx patterns` };
      const c = pkixCheck(obs);
      return c.ok ? c : { ...c, detail: `MTA-STS (${mode}): ${c.detail}` };
    }),
  };
}

export function createTransportPolicy(opts: TransportPolicyOptions): TransportPolicy {
  return {
    async plan(rawDomain, hosts, sending) {
      const domain = rawDomain.toLowerCase();
      const sts: StsLookup = opts.mtaSts ? await opts.mtaSts.lookup(domain) : {};
      const active = sts.policy && sts.policy.mode !== 'none' ? sts.policy : undefined;
      let stsPolicy: TlsPolicyRef | undefined;
      if (active) stsPolicy = { type: 'sts', domain, strings: active.lines, mxHosts: active.mx };
      else if (sts.problem) stsPolicy = { type: 'sts', domain, strings: [], mxHosts: [] };
      const none: TlsPolicyRef = { type: 'no-policy-found', domain, strings: [], mxHosts: [] };

      return Promise.all(
        hosts.map(async (host): Promise<PlannedHost> => {
          const dane = opts.dane && host.dnssec ? await daneStateOf(opts.dane, host) : ({ kind: 'none' } as const);
          if (dane.kind === 'indeterminate') {
            const policy: TlsPolicyRef = { type: 'tlsa', domain, strings: [], mxHosts: [host.host] };
            return refusedHost(host, policy, 'dnssec-invalid', 'tlsa-lookup-failed', `DANE: ${dane.detail}`, sending);
          }
          if (dane.kind === 'tlsa') {
            // No usable record authenticates nothing, so there is no DANE validation for MTA-STS to
            // override (RFC 8461 §2): an enforce policy still holds (TLS is mandatory either way).
            if (!dane.usable.length && active?.mode === 'enforce') return stsHost(host, sts, stsPolicy!, sending);
            return withUnusableTlsa(daneHost(domain, host, dane, sending), dane);
          }
          if (active) return stsHost(host, sts, stsPolicy!, sending);
          if (sts.problem) {
            // No policy to apply, only a discovery failure to report (§5.1: deliver as without MTA-STS).
            const problem = sts.problem;
            return { host, requirement: requirement(stsPolicy!, 'testing', false, sending, () => ({ ok: false, result: problem.result, detail: problem.detail })) };
          }
          return {
            host,
            requirement: requirement(none, 'none', false, sending, (obs) => (obs.secure ? { ok: true } : { ok: false, ...noTlsResult(obs) })),
          };
        }),
      );
    },
    stsRefused(domain) {
      opts.mtaSts?.recheck(domain.toLowerCase());
    },
  };
}

