/**
 * Policy discovery for MTA-STS (RFC 8461 §3, §5.1) as the delivery engine needs it, once per
 * attempt and cheaply:
 *
 * - `_mta-sts.<domain>` TXT through Posthorn's resolver, cached for its TTL; a denial for its
 *   SOA negative TTL (RFC 2308), a failure briefly. A domain without MTA-STS costs one query
 *   per TTL, not one per message.
 * - The policy itself, fetched over HTTPS (https-client.ts) when the TXT id differs from the
 *   cached policy's, or the cached one expired; cached for max_age in memory and in the store
 *   (a restart keeps it). A policy fetched more than a day ago (or half its max_age, when
 *   shorter) is fetched again in the background while the cached one answers (§3.3: "SHOULD
 *   proactively refresh"), so its max_age starts again and one failed fetch at its expiry
 *   cannot drop it.
 * - A fetched policy answers for at least MIN_POLICY_REUSE_MS, whatever its max_age: with
 *   max_age 0 (or a few seconds) a domain would otherwise make us fetch over HTTPS once per
 *   message, on the one thread every tenant shares. max_age is an upper bound on caching
 *   (§3.2: "SHOULD cache a policy for up to this value"), so reuse within a minute of the fetch
 *   is the fetch's own use stretched across the messages queued at that moment; a changed
 *   policy still comes with a new TXT id, which is fetched at once.
 * - A failed fetch keeps the last good policy while it is valid (§5.1: "MUST continue to use
 *   the previously cached policy"), is reported, and is not tried again for a few minutes.
 * - Without a usable TXT record a cached policy still in force is used (§5.1), else none.
 * - A delivery an enforce policy refused calls recheck(): the next lookup asks for the TXT record
 *   afresh, whatever its TTL, so a new id (a fixed policy) is found before the mail is failed
 *   (§5.1: "MUST NOT be permanently failed until the sender has first checked for the presence
 *   of a new policy"). Once per domain per few minutes: a backlog costs one query, not thousands.
 */
import type { Clock } from '../../lib/clock.js';
import { DnsError, type DnsResolver } from '../../lib/dns/dns-client.js';
import type { Logger } from '../../lib/logger.js';
import { replaceUnstorable } from '../../lib/nul-text.js';
import type { StoredStsPolicy } from '../../core/tls-reports/sts-policy-cache.js';
import { resolveWebhookTarget, WebhookUrlError } from '../../core/webhooks/url-policy.js';
import { HttpsRequestError, httpsRequest } from './https-client.js';
import { parseStsPolicy, parseStsTxt, StsPolicyError, type StsPolicy } from './mta-sts-policy.js';
import { TtlCache } from './ttl-cache.js';

export interface ActiveStsPolicy extends StsPolicy {
  /** The TXT id the policy was fetched under. */
  id: string;
  fetchedAtMs: number;
  expiresAtMs: number;
}

export type StsProblem = { result: 'sts-policy-fetch-error' | 'sts-policy-invalid' | 'sts-webpki-invalid'; detail: string };

export interface StsLookup {
  /** The policy in force (any mode), if there is one. */
  policy?: ActiveStsPolicy;
  /** What went wrong discovering it: reported (TLS-RPT) only when no valid cached policy covers for it. */
  problem?: StsProblem;
}

export interface MtaStsResolver {
  lookup(domain: string): Promise<StsLookup>;
  /** A delivery to `domain` was refused under its enforce policy: look for a new TXT id at the next lookup. */
  recheck(domain: string): void;
}

export interface MtaStsResolverOptions {
  resolver: DnsResolver;
  clock: Clock;
  logger: Logger;
  /** Where policies live across restarts (core/tls-reports/sts-policy-cache.ts). */
  store: { get(domain: string): Promise<StoredStsPolicy | undefined>; put(policy: StoredStsPolicy): Promise<void> };
  /** Port of the policy host's HTTPS server: 443 (tests use their own). */
  httpsPort: number;
  /** From httpsCaList(): the system CAs plus outbound.caFile. */
  ca?: (string | Buffer)[];
  fetchTimeoutMs: number;
  /** Fetch from policy hosts on private, loopback or link-local addresses (tests; local networks). */
  allowPrivate: boolean;
}

/** §3.3 suggests bounding the body; a real policy is a few hundred bytes. */
const MAX_POLICY_BYTES = 64 * 1024;
const WELL_KNOWN_PATH = '/.well-known/mta-sts.txt';
const MAX_ENTRIES = 10_000;
const DEFAULT_NEGATIVE_TTL_SECONDS = 300;
const TEMPORARY_FAILURE_TTL_SECONDS = 60;
const MAX_TXT_TTL_SECONDS = 24 * 3600;
/** A failed fetch is not tried again before this (per domain and TXT id). */
const FETCH_RETRY_MS = 5 * 60_000;
/** A TXT record is asked for afresh after a refusal at most this often (per domain). */
const RECHECK_MS = 5 * 60_000;
/** A fetched policy is used this long at least, however short its max_age (see above). */
const MIN_POLICY_REUSE_MS = 60_000;
/** §3.3: "a suggested refresh frequency is once per day". */
const PROACTIVE_REFRESH_MS = 24 * 3_600_000;
const MS_PER_SECOND = 1000;
const STS_REFUSAL = { what: 'MTA-STS policy hosts', allowedBy: 'outbound.mtaSts.allowPrivate' };

type TxtState = { id: string } | 'none' | 'temporary';

export function createMtaStsResolver(opts: MtaStsResolverOptions): MtaStsResolver {
  const log = opts.logger.child({ component: 'mta-sts' });
  const txtCache = new TtlCache<TxtState>(opts.clock, MAX_ENTRIES);
  /** Policies known in memory; null = the store has none for the domain. */
  const policies = new TtlCache<ActiveStsPolicy | null>(opts.clock, MAX_ENTRIES);
  const failures = new TtlCache<{ id: string; problem: StsProblem }>(opts.clock, MAX_ENTRIES);
  const fetching = new Map<string, Promise<StsLookup>>();
  /** Domains whose next lookup asks for the TXT record afresh (recheck()). */
  const stale = new Set<string>();
  /** Domains whose TXT record was asked for afresh in the last RECHECK_MS. */
  const rechecked = new TtlCache<true>(opts.clock, MAX_ENTRIES);

  async function txtOf(domain: string): Promise<TxtState> {
    // Marked stale and not checked afresh lately: the cached answer is not used this once. The
    // mark stays until a check happens, so the next lookup after the window still makes it.
    if (stale.has(domain) && !rechecked.get(domain)) {
      stale.delete(domain);
      rechecked.set(domain, true, RECHECK_MS);
      txtCache.delete(domain);
    }
    return txtCache.through(domain, async () => {
      try {
        const answer = await opts.resolver.resolveTxt(`_mta-sts.${domain}`);
        const ttl = Math.min(answer.ttlSeconds, MAX_TXT_TTL_SECONDS) * MS_PER_SECOND;
        return { value: parseStsTxt(answer.records) ?? 'none', ttlMs: ttl };
      } catch (err) {
        if (err instanceof DnsError && !err.temporary) {
          return { value: 'none', ttlMs: Math.min(err.negativeTtlSeconds ?? DEFAULT_NEGATIVE_TTL_SECONDS, MAX_TXT_TTL_SECONDS) * MS_PER_SECOND };
        }
        return { value: 'temporary', ttlMs: TEMPORARY_FAILURE_TTL_SECONDS * MS_PER_SECOND };
      }
    });
  }

  function fromStored(p: StoredStsPolicy): ActiveStsPolicy | null {
    try {
      return { ...parseStsPolicy(p.body), id: p.policyId, fetchedAtMs: p.fetchedAtMs, expiresAtMs: p.expiresAtMs };
    } catch {
      return null; // stored by an older parser that was laxer: as good as none
    }
  }

  async function cachedPolicy(domain: string): Promise<ActiveStsPolicy | null> {
    // Kept in memory until it expires; a day at most between store reads.
    const p = await policies.through(domain, async () => {
      const stored = await opts.store.get(domain);
      const value = stored ? fromStored(stored) : null;
      return { value, ttlMs: MAX_TXT_TTL_SECONDS * MS_PER_SECOND };
    });
    return p && usableUntilMs(p) > opts.clock.nowMs() ? p : null;
  }

  /** Its max_age, or the floor when that is shorter. */
  function usableUntilMs(p: ActiveStsPolicy): number {
    return Math.max(p.expiresAtMs, p.fetchedAtMs + MIN_POLICY_REUSE_MS);
  }

  /** Fetches and parses the policy: the policy, or the problem (RFC 8460 result types). */
  async function fetchPolicy(domain: string): Promise<StsPolicy | StsProblem> {
    const host = `mta-sts.${domain}`;
    const url = new URL(`https://${host}${opts.httpsPort === 443 ? '' : `:${opts.httpsPort}`}${WELL_KNOWN_PATH}`);
    try {
      // The recipient domain chooses where mta-sts.<domain> points: every address is checked like
      // a webhook's (no loopback, private or link-local, so no SSRF) and the connection pinned to it.
      const { address } = await resolveWebhookTarget(url.href, opts.resolver, opts.allowPrivate, STS_REFUSAL);
      const res = await httpsRequest({ method: 'GET', url, address, timeoutMs: opts.fetchTimeoutMs, maxBodyBytes: MAX_POLICY_BYTES, ...(opts.ca ? { ca: opts.ca } : {}) });
      // §3.3: redirects are not followed; anything but 200 is a failed fetch.
      if (res.status !== 200) return { result: 'sts-policy-fetch-error', detail: `${url.href} answered HTTP ${res.status}` };
      if (!/^text\/plain\s*(;|$)/i.test(res.contentType)) return { result: 'sts-policy-invalid', detail: `${url.href} is served as "${res.contentType}", not text/plain` };
      return parseStsPolicy(res.body.toString('utf8'));
    } catch (err) {
      if (err instanceof StsPolicyError) return { result: 'sts-policy-invalid', detail: `the policy of ${domain} is invalid: ${err.message}` };
      if (err instanceof WebhookUrlError && err.problem === 'private') {
        // §5.1 treats an unreachable policy host as no fresh policy: a fetch error like any other.
        log.warn({ domain, host, detail: err.message }, 'MTA-STS policy host is on a private address: not fetched');
        return { result: 'sts-policy-fetch-error', detail: `the policy host of ${domain} was refused: ${err.message}` };
      }
      if (err instanceof HttpsRequestError && err.kind === 'tls') return { result: 'sts-webpki-invalid', detail: `the certificate of ${host} is not valid: ${err.message}` };
      return { result: 'sts-policy-fetch-error', detail: `fetching the policy of ${domain} failed: ${(err as Error).message}` };
    }
  }

  async function refresh(domain: string, id: string, cached: ActiveStsPolicy | null): Promise<StsLookup> {
    const recent = failures.get(domain);
    if (recent && recent.id === id) return { ...(cached ? { policy: cached } : {}), problem: recent.problem };
    const fetched = await fetchPolicy(domain);
    if ('result' in fetched) {
      failures.set(domain, { id, problem: fetched }, FETCH_RETRY_MS);
      log.info({ domain, problem: fetched.result, detail: fetched.detail, keptCachedPolicy: !!cached }, 'MTA-STS policy fetch failed');
      return { ...(cached ? { policy: cached } : {}), problem: fetched };
    }
    const nowMs = opts.clock.nowMs();
    const policy: ActiveStsPolicy = { ...fetched, id, fetchedAtMs: nowMs, expiresAtMs: nowMs + fetched.maxAgeSeconds * MS_PER_SECOND };
    try {
      // A field it does not define may hold a NUL, which PostgreSQL cannot store (lib/nul-text.ts).
      await opts.store.put({ domain, policyId: id, body: replaceUnstorable(fetched.lines.join('\r\n') + '\r\n'), fetchedAtMs: nowMs, expiresAtMs: policy.expiresAtMs });
    } catch (err) {
      log.warn({ domain, err }, 'storing an MTA-STS policy failed; it is kept in memory');
    }
    policies.set(domain, policy, MAX_TXT_TTL_SECONDS * MS_PER_SECOND);
    log.info({ domain, id, mode: policy.mode, mx: policy.mx, maxAge: policy.maxAgeSeconds }, 'MTA-STS policy fetched');
    return { policy };
  }

  /** One fetch at a time per domain: lookups meanwhile share it. */
  function start(domain: string, id: string, cached: ActiveStsPolicy | null): Promise<StsLookup> {
    let pending = fetching.get(domain);
    if (!pending) {
      pending = refresh(domain, id, cached).finally(() => fetching.delete(domain));
      fetching.set(domain, pending);
    }
    return pending;
  }

  return {
    async lookup(rawDomain: string): Promise<StsLookup> {
      const domain = rawDomain.toLowerCase().replace(/\.$/, '');
      const txt = await txtOf(domain);
      const cached = await cachedPolicy(domain);
      if (txt === 'none' || txt === 'temporary') return cached ? { policy: cached } : {};
      if (cached && cached.id === txt.id) {
        // Once a day, or at half its max_age when that is shorter (gmail.com's is a day): always before it
        // expires. Never sooner than the floor, so a short max_age cannot bring a fetch per message.
        const refreshAfterMs = Math.max(MIN_POLICY_REUSE_MS, Math.min(PROACTIVE_REFRESH_MS, (cached.expiresAtMs - cached.fetchedAtMs) / 2));
        if (opts.clock.nowMs() - cached.fetchedAtMs >= refreshAfterMs) {
          // Nobody waits for it: a failure keeps the cached policy (refresh() says so).
          start(domain, txt.id, cached).catch((err: unknown) => log.warn({ domain, err }, 'refreshing an MTA-STS policy failed'));
        }
        return { policy: cached };
      }
      return start(domain, txt.id, cached);
    },
    recheck(rawDomain: string): void {
      const domain = rawDomain.toLowerCase().replace(/\.$/, '');
      if (stale.size >= MAX_ENTRIES) stale.clear(); // bounded like the caches; a lost mark costs a TTL's wait
      stale.add(domain);
    },
  };
}
