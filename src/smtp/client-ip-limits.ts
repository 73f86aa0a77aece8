import { isIPv6 } from 'node:net';
import type { Clock } from '../lib/clock.js';

// Per-client-address limits of the SMTP listeners, as Postfix's anvil and Haraka's limit plugin
// keep them: connections open at once from one address, and (submission) failed AUTHs from one
// address within a window. The state is this process's memory: on several nodes each node counts
// its own clients (docs/operations.md, SMTP client limits). IPv6 clients are counted per /64,
// the block one subscriber gets, so walking through its addresses does not escape the limits.

/** The address a limit counts: IPv4-mapped IPv6 as IPv4, IPv6 by its /64. */
export function clientKey(remoteAddress: string | undefined): string {
  const ip = remoteAddress ?? '';
  if (ip.startsWith('::ffff:') && ip.includes('.')) return ip.slice(7);
  if (!isIPv6(ip)) return ip;
  const [head = '', tail] = ip.toLowerCase().split('::');
  const left = head ? head.split(':') : [];
  // The first four groups: a group past '::' can only be among them when '::' comes early.
  const right = tail === undefined ? [] : tail ? tail.split(':') : [];
  const groupsOfTail = right.reduce((n, g) => n + (g.includes('.') ? 2 : 1), 0);
  const groups = tail === undefined ? left : [...left, ...Array<string>(8 - left.length - groupsOfTail).fill('0'), ...right];
  return `${groups.slice(0, 4).map((g) => g.replace(/^0+(?=.)/, '')).join(':')}::/64`;
}

/** Connections open now from each client address, capped per address; 0 is no cap. */
export class ConnectionsPerIp {
  /** Open connections by client address; an address leaves the map at zero, so it holds at most maxConnections entries. */
  private readonly open = new Map<string, number>();
  /** The connections counted, by smtp-server session id, so each one is released once. */
  private readonly counted = new Map<string, string>();

  constructor(private readonly cap: number) {}

  /** Counts a new connection; false (not counted) when its address is at the cap already. */
  admit(sessionId: string, remoteAddress: string | undefined): boolean {
    const ip = clientKey(remoteAddress);
    const n = this.open.get(ip) ?? 0;
    if (this.cap > 0 && n >= this.cap) return false;
    this.open.set(ip, n + 1);
    this.counted.set(sessionId, ip);
    return true;
  }

  /** A connection closed (smtp-server calls onClose for every one, refused ones too). */
  release(sessionId: string): void {
    const ip = this.counted.get(sessionId);
    if (ip === undefined) return;
    this.counted.delete(sessionId);
    const n = (this.open.get(ip) ?? 1) - 1;
    if (n > 0) this.open.set(ip, n);
    else this.open.delete(ip);
  }
}

interface FailureEntry {
  /** When each failure in the window happened (epoch ms), oldest first; at most `limit` kept. */
  failures: number[];
  /** While set and in the future the address is refused. */
  lockedUntilMs?: number;
}

/** Addresses remembered at most, so a flood from many addresses cannot grow the table without bound. */
export const MAX_TRACKED_CLIENTS = 10_000;

/**
 * Failed AUTHs by client address: `limit` failures within `windowMs` lock the address out for
 * `windowMs` from the last of them. A successful AUTH does not wipe the count: behind one NAT a
 * working client would otherwise shield a guessing one; the failures age out with the window.
 * `limit` 0 turns the lockout off.
 */
export class AuthFailureLockout {
  /** Entries by client address, least recently touched first (Map keeps insertion order). */
  private readonly entries = new Map<string, FailureEntry>();

  constructor(
    private readonly clock: Clock,
    private readonly limit: number,
    private readonly windowMs: number,
    private readonly maxEntries = MAX_TRACKED_CLIENTS,
  ) {}

  /** Milliseconds the address stays locked out; 0 when it is not. */
  lockedFor(remoteAddress: string | undefined): number {
    if (this.limit <= 0) return 0;
    const ip = clientKey(remoteAddress);
    const entry = this.entries.get(ip);
    if (entry?.lockedUntilMs === undefined) return 0;
    const left = entry.lockedUntilMs - this.clock.nowMs();
    if (left > 0) return left;
    // The lockout is over: the address starts again from nothing.
    this.entries.delete(ip);
    return 0;
  }

  /**
   * Records a failed AUTH: how long the address is locked out now (0: it is not), and whether
   * this failure started the lockout (one finishing after another locked it only meets it).
   */
  fail(remoteAddress: string | undefined): { lockedForMs: number; started: boolean } {
    if (this.limit <= 0) return { lockedForMs: 0, started: false };
    const ip = clientKey(remoteAddress);
    const now = this.clock.nowMs();
    const entry = this.entries.get(ip) ?? { failures: [] };
    if (entry.lockedUntilMs !== undefined && entry.lockedUntilMs > now) return { lockedForMs: entry.lockedUntilMs - now, started: false };
    entry.lockedUntilMs = undefined;
    entry.failures = entry.failures.filter((at) => now - at < this.windowMs);
    entry.failures.push(now);
    if (entry.failures.length > this.limit) entry.failures.shift();
    const started = entry.failures.length >= this.limit;
    if (started) entry.lockedUntilMs = now + this.windowMs;
    this.touch(ip, entry, now);
    return { lockedForMs: started ? this.windowMs : 0, started };
  }

  /** Entries tracked now (tests, metrics). */
  get size(): number {
    return this.entries.size;
  }

  /**
   * Moves the entry to the newest end, then drops from the oldest end what has expired and what
   * is beyond the cap. Entries are in the order of their last failure, and a lockout ends one
   * window after it, so the expired ones are a prefix: the sweep stops at the first live one.
   * A flood from many addresses can push a locked one out; each of them still meets the
   * per-connection limit.
   */
  private touch(ip: string, entry: FailureEntry, now: number): void {
    this.entries.delete(ip);
    this.entries.set(ip, entry);
    for (const [other, e] of this.entries) {
      const last = e.failures[e.failures.length - 1] ?? 0;
      if (this.entries.size <= this.maxEntries && now - last < this.windowMs) return;
      this.entries.delete(other);
    }
  }
}
