import type { Clock } from '../../lib/clock.js';

// Failed console sign-ins are limited per account and per client address, so a password
// cannot be guessed online: the account limit stops a slow, distributed guesser of one
// account; the address limit stops one client trying many accounts. Counters live in memory
// (like the API rate limit): a restart resets them, which gives a guesser a handful of extra
// tries at most, while a stored counter would cost a write per failure.
//
// Key       failures   within     then
// account   5          15 min     refused until the oldest failure is 15 min old
// address   20         15 min     the same
export const LOGIN_LIMITS = {
  account: { failures: 5, windowMs: 15 * 60_000 },
  address: { failures: 20, windowMs: 15 * 60_000 },
} as const;

const MAX_TRACKED_KEYS = 10_000;

export interface LoginDecision {
  allowed: boolean;
  /** Seconds until a new attempt is allowed (when refused). */
  retryAfterSeconds: number;
  /** What was exhausted, for the message. */
  reason?: 'account' | 'address';
}

export function createLoginThrottle(clock: Clock) {
  const failures = new Map<string, number[]>();

  function recent(key: string, windowMs: number): number[] {
    const now = clock.nowMs();
    const list = (failures.get(key) ?? []).filter((t) => now - t < windowMs && t <= now);
    if (list.length) failures.set(key, list);
    else failures.delete(key);
    return list;
  }

  function check(key: string, limit: { failures: number; windowMs: number }): number {
    const list = recent(key, limit.windowMs);
    if (list.length < limit.failures) return 0;
    const oldestThatCounts = list[list.length - limit.failures]!;
    return Math.max(1, Math.ceil((oldestThatCounts + limit.windowMs - clock.nowMs()) / 1000));
  }

  return {
    /** Whether a sign-in for this account from this address may be tried now. */
    check(email: string, address: string): LoginDecision {
      const account = check(`a:${email.trim().toLowerCase()}`, LOGIN_LIMITS.account);
      if (account > 0) return { allowed: false, retryAfterSeconds: account, reason: 'account' };
      const addr = check(`i:${address}`, LOGIN_LIMITS.address);
      if (addr > 0) return { allowed: false, retryAfterSeconds: addr, reason: 'address' };
      return { allowed: true, retryAfterSeconds: 0 };
    },
    recordFailure(email: string, address: string): void {
      if (failures.size > MAX_TRACKED_KEYS) {
        for (const key of failures.keys()) recent(key, LOGIN_LIMITS.address.windowMs);
      }
      const now = clock.nowMs();
      for (const key of [`a:${email.trim().toLowerCase()}`, `i:${address}`]) failures.set(key, [...(failures.get(key) ?? []), now].slice(-50));
    },
    /** A successful sign-in forgets the account's failures (not the address's). */
    recordSuccess(email: string): void {
      failures.delete(`a:${email.trim().toLowerCase()}`);
    },
  };
}
export type LoginThrottle = ReturnType<typeof createLoginThrottle>;
