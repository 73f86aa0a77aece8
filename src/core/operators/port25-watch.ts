import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../lib/logger.js';

/*
 * Whether this node's outbound SMTP port looks blocked (docs/outbound.md, "When port 25 is
 * blocked"). Many cloud providers drop or refuse outbound connections to port 25: every delivery
 * then waits for its connect timeout or is refused, mail piles up deferred, and nothing says why.
 *
 * The SMTP client reports each new direct connection's outcome at the TCP level: reached (any
 * reply, a 5xx greeting or none at all: port 25 got through) or not (connect timeout, refused,
 * unreachable). Suspected blocked when, within the window, connections failed to at least
 * MIN_HOSTS MX hosts of at least MIN_DOMAINS recipient domains and none succeeded: one broken MX,
 * or one domain's, is that destination's problem. Cleared by the first connection that succeeds.
 * In memory, per node: each node has its own network.
 */

export const PORT25_WINDOW_MS = 15 * 60_000;
const MIN_HOSTS = 3;
const MIN_DOMAINS = 2;
/** Failures kept for the window: enough to count hosts and domains, bounded when everything fails. */
const MAX_FAILURES = 1000;
/** Hosts counted while it is on. */
const MAX_HOSTS = 10_000;

export type ConnectOutcome =
  | { reached: true; host: string; address: string }
  /** domain: the recipient domain; absent, the address's /24 (IPv6: /48) stands for it. */
  | { reached: false; host: string; address: string; domain?: string; error: string };

export interface Port25State {
  state: 'ok' | 'suspected-blocked';
  /** When it turned on (ISO); null while ok. */
  since: string | null;
  /** Connections that failed to connect: since it turned on, or in the window while ok. */
  attempts: number;
  /** Distinct MX hosts among them. */
  failedHosts: number;
  /** The latest of them, `host[address]: why`. */
  lastError: string | null;
  /** The outbound port watched (outbound.port: 25 but in tests). */
  port: number;
}

interface Failure {
  atMs: number;
  host: string;
  group: string;
  text: string;
}

/** What stands for the recipient domain when it is not known: the network the address is in. */
function groupOf(domain: string | undefined, address: string): string {
  if (domain) return `d:${domain.toLowerCase()}`;
  if (address.includes(':')) return `n:${address.split(':').slice(0, 3).join(':')}`;
  return `n:${address.split('.').slice(0, 3).join('.')}`;
}

export function createPort25Watch(deps: { clock: Clock; logger: Logger; port: number; windowMs?: number }) {
  const { clock, port } = deps;
  const log = deps.logger.child({ component: 'port25-watch' });
  const windowMs = deps.windowMs ?? PORT25_WINDOW_MS;
  const minutes = Math.round(windowMs / 60_000);
  let failures: Failure[] = [];
  let lastReachedMs: number | undefined;
  let blocked: { sinceMs: number; attempts: number; hosts: Set<string>; last: string } | undefined;

  function prune(now: number): void {
    const from = now - windowMs;
    let i = 0;
    while (i < failures.length && failures[i]!.atMs < from) i++;
    if (i > 0) failures = failures.slice(i);
  }

  function reached(o: { host: string; address: string }): void {
    const now = clock.nowMs();
    lastReachedMs = now;
    failures = [];
    if (!blocked) return;
    const was = blocked;
    blocked = undefined;
    log.info(
      { event: 'outbound.port25_cleared', host: o.host, address: o.address, attempts: was.attempts, since: new Date(was.sinceMs).toISOString() },
      `outbound port ${port} works again: connected to ${o.host}[${o.address}] after ${was.attempts} attempts failed to connect since ${new Date(was.sinceMs).toISOString()}`,
    );
  }

  function failed(o: { host: string; address: string; domain?: string; error: string }): void {
    const now = clock.nowMs();
    const text = `${o.host}[${o.address}]: ${o.error}`;
    if (blocked) {
      blocked.attempts++;
      if (blocked.hosts.size < MAX_HOSTS) blocked.hosts.add(o.host);
      blocked.last = text;
      return;
    }
    prune(now);
    failures.push({ atMs: now, host: o.host, group: groupOf(o.domain, o.address), text });
    if (failures.length > MAX_FAILURES) failures = failures.slice(-MAX_FAILURES);
    if (lastReachedMs !== undefined && lastReachedMs >= now - windowMs) return;
    const hosts = new Set(failures.map((f) => f.host));
    const groups = new Set(failures.map((f) => f.group));
    if (hosts.size < MIN_HOSTS || groups.size < MIN_DOMAINS) return;
    blocked = { sinceMs: now, attempts: failures.length, hosts, last: text };
    log.warn(
      { event: 'outbound.port25_blocked', attempts: failures.length, failedHosts: hosts.size, domains: groups.size, lastError: text, port },
      `outbound port ${port} looks blocked: no connection to any MX succeeded in ${minutes} minutes (${failures.length} attempts to ${hosts.size} hosts failed to connect, such as ${text}). ` +
        'Many cloud providers block port 25; ask yours to open it, or send through a relay ([outbound.relay], docs/outbound.md)',
    );
  }

  return {
    record(o: ConnectOutcome): void {
      if (o.reached) reached(o);
      else failed(o);
    },

    blocked(): boolean {
      return blocked !== undefined;
    },

    state(): Port25State {
      if (blocked) {
        return { state: 'suspected-blocked', since: new Date(blocked.sinceMs).toISOString(), attempts: blocked.attempts, failedHosts: blocked.hosts.size, lastError: blocked.last, port };
      }
      prune(clock.nowMs());
      return { state: 'ok', since: null, attempts: failures.length, failedHosts: new Set(failures.map((f) => f.host)).size, lastError: failures.at(-1)?.text ?? null, port };
    },
  };
}
export type Port25Watch = ReturnType<typeof createPort25Watch>;
