/**
 * Where to deliver mail for a domain (RFC 5321 §5.1), through our own stub
 * resolver so answers carry TTLs and tests can point a zone at loopback.
 *
 *   MX records      -> hosts in preference order, equal preferences shuffled
 *                      (RFC 5321 §5.1: "randomize them to spread the load")
 *   no MX (NODATA)  -> implicit MX: the domain itself, preference 0 (§5.1); when the domain is
 *                      an alias, the name its CNAME chain leads to ("processed as if it were the
 *                      initial name"), which MTA-STS mx patterns and certificate checks match
 *   null MX ("." )  -> permanent: the domain accepts no mail (RFC 7505 §3)
 *   NXDOMAIN        -> permanent: the domain does not exist
 *   SERVFAIL/timeout-> temporary
 *
 * Each MX host's A and AAAA records are looked up here too (IPv4 first, then
 * IPv6); a host that resolves to nothing is skipped, and when every host
 * fails the lookup is temporary (a half-migrated zone is a common and
 * short-lived mistake; the retry schedule's give-up age bounds it), unless
 * every host does not exist (NXDOMAIN for A and AAAA) or resolves only to
 * local addresses: that is an answer, not a failure, and Postfix bounces it
 * ("Host not found") as RFC 5321 §5.1 has an unusable MX reported as an error.
 *
 * Cache: per (name, type), for the answer's TTL by the injected clock, bounded
 * in size (least recently used out first). Failures are cached briefly so a
 * campaign to a broken domain does not hammer the resolver: temporary ones
 * for negativeTtlSeconds, authoritative negatives (NXDOMAIN/NODATA) a little
 * longer, as RFC 2308 allows. Concurrent lookups of one name share one query.
 *
 * An MX target must be a host name (RFC 5321 §2.3.5: letters, digits and hyphens; underscores
 * too, as Postfix allows). A label on the wire may hold any octet (RFC 2181 §11), so a hostile
 * or broken zone can name a "host" with a NUL, CRLF or 8-bit bytes in it: such a target is
 * skipped like one that does not resolve, and named JSON-escaped in the reason. Used, it would be
 * connected to and stored in the row and the events, and PostgreSQL cannot store a NUL: the
 * results write fails, the delivery stays leased, and the accepted message goes out again.
 *
 * Addresses where no remote mail server can be (loopback, "this host" 0.0.0.0/8, the unspecified
 * address, multicast, reserved) are dropped unless allowLoopback: the recipient's DNS chooses
 * them, a local MTA commonly relays anything from loopback, and "MX 0 localhost" is an old way to
 * say "no mail". A domain whose hosts all resolve only to such addresses fails permanently, as
 * Postfix bounces mail that "loops back to myself" (it would never reach a remote server).
 *
 * On top of that, the finished answer for a domain (hosts in preference order with their
 * addresses) is memoized for as long as every cached record it was built from is still
 * the same fresh cache entry: the delivery engine asks for every transaction, and
 * rebuilding the answer from three cached records through promises was measurable CPU.
 */
import type { DnsAnswer, DnsResolver } from '../../lib/dns/dns-client.js';
import { DnsError } from '../../lib/dns/dns-client.js';
import type { Clock } from '../../lib/clock.js';
import { rangeReason, type AddressRange } from '../../lib/ip-ranges.js';

export interface MxHost {
  host: string;
  priority: number;
  /** IPv4 first, then IPv6, as resolved through our resolver. */
  addresses: string[];
  /**
   * The resolver validated both the MX RRset (or, for an implicit MX, its denial) and this
   * host's address records with DNSSEC: the host name is trustworthy, so DANE TLSA records
   * may be looked up for it (RFC 7672 §2.2.1, §2.2.2).
   */
  dnssec: boolean;
  /**
   * The name the host's address records belong to, when the MX target is a CNAME (an alias):
   * DANE looks for TLSA records there first (RFC 7672 2.2.2).
   */
  canonical?: string;
}

export class MxLookupError extends Error {
  /** true: the domain cannot receive mail (bounce); false: try again later. */
  readonly permanent: boolean;
  readonly domain: string;
  constructor(domain: string, message: string, permanent: boolean, options?: { cause?: unknown }) {
    super(`${domain}: ${message}`, options);
    this.name = 'MxLookupError';
    this.domain = domain;
    this.permanent = permanent;
  }
}

export interface MxResolver {
  resolve(domain: string): Promise<MxHost[]>;
}

export interface MxResolverOptions {
  /** Per cache (answers are cached per name and type), default 10,000. */
  maxCacheEntries?: number;
  /** How long a temporary failure (SERVFAIL, timeout) is remembered, default 30 s. */
  negativeTtlSeconds?: number;
  /** For tests that want a fixed order of equal-preference hosts; default Math.random. */
  random?: () => number;
  /** Connect to MX addresses on this host (loopback, 0.0.0.0/8): tests and labs; default false. */
  allowLoopback?: boolean;
}

/** Where no remote mail server can be: connecting there reaches this host or nothing. */
const LOCAL_V4: readonly AddressRange[] = [
  ['0.0.0.0', 8, 'a "this host" address'], // RFC 1122; Linux connects 0.0.0.0 to the local host
  ['127.0.0.0', 8, 'a loopback address'],
  ['224.0.0.0', 4, 'a multicast address'],
  ['240.0.0.0', 4, 'a reserved or broadcast address'],
];
const LOCAL_V6: readonly AddressRange[] = [
  ['::', 128, 'the unspecified address'],
  ['::1', 128, 'a loopback address'],
  ['ff00::', 8, 'a multicast address'],
];

const DEFAULT_MAX_CACHE_ENTRIES = 10_000;
const DEFAULT_NEGATIVE_TTL_SECONDS = 30;
/**
 * NXDOMAIN/NODATA are authoritative (RFC 2308) but our resolver does not hand
 * us the SOA minimum; five minutes is a common SOA minimum and short enough
 * that a domain owner fixing their DNS is not kept waiting long.
 */
const AUTHORITATIVE_NEGATIVE_TTL_SECONDS = 300;
/** Upper bound on any cached TTL: a week-long TTL should not pin a stale answer in a long-running process. */
const MAX_TTL_SECONDS = 24 * 60 * 60;
/**
 * A hostile or broken zone may list hundreds of MX hosts; we resolve at most
 * this many (in preference order). Postfix tries 5 addresses, ZoneMTA 20.
 */
const MAX_MX_HOSTS = 10;
const MS_PER_SECOND = 1000;
/** RFC 1035 §2.3.4 sizes; a label of letters, digits, hyphens and underscores (RFC 5321 §2.3.5, plus the underscore). */
const MAX_HOST_OCTETS = 253;
const HOST_LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/;

/**
 * RFC 6761 §6.3: "localhost" and the names below it are the loopback addresses, and resolvers
 * should not be asked: one that knows no such name answers NXDOMAIN (a retry for days instead of
 * the bounce "MX 0 localhost" means), one that rewrites NXDOMAIN answers a public address.
 */
const LOCALHOST_ADDRESSES = ['127.0.0.1', '::1'];
function isLocalhostName(name: string): boolean {
  return name === 'localhost' || name.endsWith('.localhost');
}

/** A name an MX may point at: a host name as RFC 5321 §2.3.5 spells one (lowercase, no final dot). */
function isHostName(name: string): boolean {
  return name.length > 0 && name.length <= MAX_HOST_OCTETS && name.split('.').every((label) => HOST_LABEL.test(label));
}

type RecordType = 'MX' | 'A' | 'AAAA';
/** An MX host as resolved, before the per-call shuffle of equal preferences. */
type UsableHost = { host: string; priority: number; addresses: string[]; dnssec: boolean; canonical?: string };
interface ResolvedAnswer {
  usable: UsableHost[];
  /** The record cache entries it was built from (cache key, entry): valid while all are. */
  sources: [string, CacheEntry][];
}
type MxRecords = { exchange: string; priority: number }[];

interface CacheEntry {
  expiresAtMs: number;
  answer?: DnsAnswer<unknown>;
  error?: unknown;
}

/** Least-recently-used map: Map keeps insertion order, so re-inserting on read moves an entry to the back. */
class LruCache {
  private readonly entries = new Map<string, CacheEntry>();
  constructor(private readonly maxEntries: number) {}

  /** The entry as stored, expired or not, without touching its recency. */
  peek(key: string): CacheEntry | undefined {
    return this.entries.get(key);
  }

  get(key: string, nowMs: number): CacheEntry | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    this.entries.delete(key);
    if (entry.expiresAtMs <= nowMs) return undefined;
    this.entries.set(key, entry);
    return entry;
  }

  set(key: string, entry: CacheEntry): void {
    this.entries.delete(key);
    this.entries.set(key, entry);
    while (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
  }
}

function normalizeDomain(domain: string): string {
  const trimmed = domain.trim().toLowerCase();
  return trimmed.endsWith('.') ? trimmed.slice(0, -1) : trimmed;
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Fisher-Yates on a copy. */
function shuffled<T>(items: readonly T[], random: () => number): T[] {
  const out = items.slice();
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

function positiveInteger(value: number | undefined, fallback: number, what: string): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value <= 0) throw new RangeError(`createMxResolver: ${what} must be a positive integer, got ${value}`);
  return value;
}

interface HostAddresses {
  addresses: string[];
  /** Every address answer found was DNSSEC-validated. */
  authenticated: boolean;
  /** Where a CNAME chain led (the A answer's, else the AAAA answer's). */
  canonical?: string;
  /** Why there are none, for the error message. */
  failure?: string;
  /** A lookup failed in a way that may succeed later. */
  temporary: boolean;
  /** It resolved, but only to addresses in LOCAL_V4/LOCAL_V6: none left to use. */
  local: boolean;
  /** The name does not exist: both lookups answered NXDOMAIN (authoritative, RFC 2308). */
  nxdomain: boolean;
}

export function createMxResolver(
  resolver: DnsResolver,
  clock: Clock,
  opts: MxResolverOptions = {},
): MxResolver {
  const maxCacheEntries = positiveInteger(opts.maxCacheEntries, DEFAULT_MAX_CACHE_ENTRIES, 'maxCacheEntries');
  const cache = new LruCache(maxCacheEntries);
  /** Each memoized domain holds at least one record of the cache, so it never needs more. */
  const maxMemoEntries = maxCacheEntries;
  const negativeTtlSeconds = opts.negativeTtlSeconds ?? DEFAULT_NEGATIVE_TTL_SECONDS;
  if (!Number.isFinite(negativeTtlSeconds) || negativeTtlSeconds < 0) {
    throw new RangeError(`createMxResolver: negativeTtlSeconds must be >= 0, got ${negativeTtlSeconds}`);
  }
  const random = opts.random ?? Math.random;
  const allowLoopback = opts.allowLoopback === true;
  const inFlight = new Map<string, Promise<DnsAnswer<unknown>>>();

  function query(type: RecordType, name: string): Promise<DnsAnswer<unknown>> {
    switch (type) {
      case 'MX':
        return resolver.resolveMx(name);
      case 'A':
        return resolver.resolve4(name);
      case 'AAAA':
        return resolver.resolve6(name);
    }
  }

  function failureTtlSeconds(err: unknown): number {
    if (err instanceof DnsError && !err.temporary) return Math.max(negativeTtlSeconds, AUTHORITATIVE_NEGATIVE_TTL_SECONDS);
    return negativeTtlSeconds;
  }

  /** One cached, de-duplicated lookup; rejects with the (cached) DnsError. */
  async function lookup<T>(type: RecordType, name: string, used?: string[]): Promise<DnsAnswer<T>> {
    const key = `${type} ${name}`;
    used?.push(key);
    const hit = cache.get(key, clock.nowMs());
    if (hit) {
      if (hit.answer) return hit.answer as DnsAnswer<T>;
      throw hit.error;
    }
    let pending = inFlight.get(key);
    if (!pending) {
      pending = (async () => {
        try {
          const answer = await query(type, name);
          const ttl = Math.min(Math.max(answer.ttlSeconds, 0), MAX_TTL_SECONDS);
          // TTL 0 means "use once, do not cache" (RFC 1035 §3.2.1).
          if (ttl > 0) cache.set(key, { expiresAtMs: clock.nowMs() + ttl * MS_PER_SECOND, answer });
          return answer;
        } catch (err) {
          const ttl = failureTtlSeconds(err);
          if (ttl > 0) cache.set(key, { expiresAtMs: clock.nowMs() + ttl * MS_PER_SECOND, error: err });
          throw err;
        } finally {
          inFlight.delete(key);
        }
      })();
      inFlight.set(key, pending);
    }
    return (await pending) as DnsAnswer<T>;
  }

  async function addressesOf(host: string, used: string[]): Promise<HostAddresses> {
    if (isLocalhostName(host)) {
      const kept = allowLoopback ? LOCALHOST_ADDRESSES.slice() : [];
      return { addresses: kept, authenticated: false, temporary: false, local: kept.length === 0, nxdomain: false, ...(kept.length ? {} : { failure: `is localhost, the loopback addresses (127.0.0.1 is a loopback address, RFC 6761); mail there would loop back (outbound.allowLoopbackMx allows it)` }) };
    }
    const [v4, v6] = await Promise.allSettled([lookup<string>('A', host, used), lookup<string>('AAAA', host, used)]);
    const addresses = [...(v4.status === 'fulfilled' ? v4.value.records : []), ...(v6.status === 'fulfilled' ? v6.value.records : [])];
    const failures = [v4, v6].filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => r.reason as unknown);
    // NODATA/NXDOMAIN are answers; anything else (SERVFAIL, timeout, a server's FORMERR, a bug) may change.
    const temporary = failures.some((e) => !(e instanceof DnsError) || e.temporary);
    const answers = [v4, v6].filter((r): r is PromiseFulfilledResult<DnsAnswer<string>> => r.status === 'fulfilled');
    const authenticated = answers.length > 0 && answers.every((a) => a.value.authenticated === true);
    const unique = [...new Set(addresses)];
    const kept = allowLoopback ? unique : unique.filter((a) => rangeReason(a, LOCAL_V4, LOCAL_V6) === null);
    const canonical = answers.find((a) => a.value.canonicalName)?.value.canonicalName;
    const nxdomain = failures.length === 2 && failures.every((e) => e instanceof DnsError && e.code === 'NOTFOUND');
    const result: HostAddresses = { addresses: kept, authenticated, temporary, local: unique.length > 0 && kept.length === 0, nxdomain, ...(canonical ? { canonical } : {}) };
    if (result.local) {
      const first = unique[0]!;
      result.failure = `resolves only to loopback or unroutable addresses (${first} is ${rangeReason(first, LOCAL_V4, LOCAL_V6)}); mail there would loop back (outbound.allowLoopbackMx allows it)`;
    } else if (kept.length === 0) result.failure = failures.map(describe).join('; ') || 'no addresses';
    return result;
  }

  async function implicitMx(domain: string, used: string[], mxDenialAuthenticated: boolean): Promise<UsableHost[]> {
    const found = await addressesOf(domain, used);
    // RFC 5321 §5.1: a CNAME's target "is processed as if it were the initial name": the host is the real one.
    if (found.addresses.length > 0) return [{ host: found.canonical ?? domain, priority: 0, addresses: found.addresses, dnssec: mxDenialAuthenticated && found.authenticated }];
    // Permanent only when no lookup failed: a failed AAAA lookup may yet give a public address.
    if (found.local && !found.temporary) throw new MxLookupError(domain, `no MX records, and the domain ${found.failure}`, true);
    // RFC 5321 §5.1: an unusable implicit MX "MUST be reported as an error".
    if (found.temporary) throw new MxLookupError(domain, `no MX records and the address lookup failed: ${found.failure}`, false);
    throw new MxLookupError(domain, 'no MX records and no A/AAAA records: the domain has no mail server', true);
  }

  async function explicitMx(domain: string, records: MxRecords, used: string[], mxAuthenticated: boolean): Promise<UsableHost[]> {
    // RFC 7505 §3: "." is a null MX. It must stand alone; if a zone mixes it with
    // real MX records we ignore the null one rather than refuse mail the real ones take.
    const real = records.filter((r) => r.exchange !== '' && r.exchange !== '.');
    if (real.length === 0) throw new MxLookupError(domain, 'null MX (RFC 7505): the domain accepts no mail', true);

    const bestPriority = new Map<string, number>();
    for (const r of real) {
      const host = normalizeDomain(r.exchange);
      const known = bestPriority.get(host);
      if (known === undefined || r.priority < known) bestPriority.set(host, r.priority);
    }
    const ordered = [...bestPriority.entries()]
      .map(([host, priority]) => ({ host, priority }))
      .sort((a, b) => a.priority - b.priority);
    const notHosts = ordered.filter((mx) => !isHostName(mx.host));
    const hosts = ordered.filter((mx) => isHostName(mx.host)).slice(0, MAX_MX_HOSTS);

    const resolved = await Promise.all(hosts.map(async (mx) => ({ ...mx, found: await addressesOf(mx.host, used) })));
    const usable = resolved.filter((r) => r.found.addresses.length > 0);
    if (usable.length === 0) {
      const why = [...resolved.map((r) => `${r.host}: ${r.found.failure}`), ...notHosts.slice(0, MAX_MX_HOSTS).map((r) => `${JSON.stringify(r.host)}: not a host name (RFC 5321 2.3.5)`)].join('; ');
      // Every host named only this one: it will not change by waiting (a half-migrated zone fails on some host's lookup instead).
      if (notHosts.length === 0 && resolved.every((r) => r.found.local && !r.found.temporary)) throw new MxLookupError(domain, `every MX host resolves only to loopback or unroutable addresses (${why})`, true);
      // Hosts that do not exist (beside loopback-only ones): an answer, not a failure of the moment; Postfix bounces "Host not found".
      if (notHosts.length === 0 && resolved.every((r) => (r.found.nxdomain || r.found.local) && !r.found.temporary)) throw new MxLookupError(domain, `no MX host exists (${why})`, true);
      throw new MxLookupError(domain, `none of the MX hosts resolved (${why})`, false);
    }
    return usable.map((r) => ({ host: r.host, priority: r.priority, addresses: r.found.addresses, dnssec: mxAuthenticated && r.found.authenticated, ...(r.found.canonical ? { canonical: r.found.canonical } : {}) }));
  }

  /** Shuffles within each preference level, per call, so the load spreads even while cached; copies, the memo stays intact. */
  function arrange(usable: UsableHost[]): MxHost[] {
    const out: MxHost[] = [];
    let i = 0;
    while (i < usable.length) {
      let j = i;
      while (j < usable.length && usable[j]!.priority === usable[i]!.priority) j++;
      const level = j - i === 1 ? usable.slice(i, j) : shuffled(usable.slice(i, j), random);
      for (const r of level) out.push({ host: r.host, priority: r.priority, addresses: r.addresses.slice(), dnssec: r.dnssec, ...(r.canonical ? { canonical: r.canonical } : {}) });
      i = j;
    }
    return out;
  }

  const memo = new Map<string, ResolvedAnswer>();

  /** The memoized answer while each record it came from is still the same fresh cache entry. */
  function memoized(domain: string): UsableHost[] | undefined {
    const hit = memo.get(domain);
    if (!hit) return undefined;
    const now = clock.nowMs();
    // get() also refreshes the records' recency, as a full lookup would
    for (const [key, entry] of hit.sources) {
      if (cache.get(key, now) !== entry) {
        memo.delete(domain);
        return undefined;
      }
    }
    return hit.usable;
  }

  function remember(domain: string, usable: UsableHost[], used: string[]): void {
    const sources: [string, CacheEntry][] = [];
    for (const key of new Set(used)) {
      const entry = cache.peek(key);
      if (!entry) return; // a TTL-0 answer: used once, never remembered
      sources.push([key, entry]);
    }
    memo.delete(domain);
    memo.set(domain, { usable, sources });
    if (memo.size > maxMemoEntries) memo.delete(memo.keys().next().value as string);
  }

  async function resolveUsable(domain: string): Promise<UsableHost[]> {
    const used: string[] = [];
    let mx: DnsAnswer<{ exchange: string; priority: number }>;
    let usable: UsableHost[];
    try {
      mx = await lookup('MX', domain, used);
    } catch (err) {
      if (err instanceof DnsError) {
        if (err.code === 'NODATA') {
          usable = await implicitMx(domain, used, err.authenticated);
          remember(domain, usable, used);
          return usable;
        }
        if (err.code === 'NOTFOUND') throw new MxLookupError(domain, 'domain does not exist (NXDOMAIN)', true, { cause: err });
        throw new MxLookupError(domain, `MX lookup failed: ${err.message}`, !err.temporary, { cause: err });
      }
      throw new MxLookupError(domain, `MX lookup failed: ${describe(err)}`, false, { cause: err });
    }
    usable = mx.records.length === 0 ? await implicitMx(domain, used, mx.authenticated === true) : await explicitMx(domain, mx.records, used, mx.authenticated === true);
    remember(domain, usable, used);
    return usable;
  }

  return {
    async resolve(rawDomain: string): Promise<MxHost[]> {
      const domain = normalizeDomain(rawDomain);
      if (domain.length === 0) throw new MxLookupError(rawDomain, 'empty domain', true);
      return arrange(memoized(domain) ?? (await resolveUsable(domain)));
    },
  };
}
