import { createHash } from 'node:crypto';
import type { Clock } from '../../lib/clock.js';
import type { LoginFailuresRepository } from '../../store/repositories/login-failures-repository.js';
import { addressKey as canonicalAddress } from '../emails/addresses.js';

// Failed console sign-ins are limited per account and per client address, so a password
// cannot be guessed online: the account limit stops a slow, distributed guesser of one
// account; the address limit stops one client trying many accounts. The failures are rows in
// the store, so the limits hold for all the nodes of a cluster together and across restarts.
//
// Key       failures   within     then
// account   5          15 min     refused until the oldest failure that counts is 15 min old
// address   20         15 min     the same
export const LOGIN_LIMITS = {
  account: { failures: 5, windowMs: 15 * 60_000 },
  address: { failures: 20, windowMs: 15 * 60_000 },
} as const;
type Limit = { failures: number; windowMs: number };

/** The longest window: older rows count for nothing and are deleted. */
const KEEP_MS = Math.max(LOGIN_LIMITS.account.windowMs, LOGIN_LIMITS.address.windowMs);
/** How often a node deletes the rows past the window (on a write, so an idle store is left alone). */
const PRUNE_EVERY_MS = 60_000;

/** A sign-in attempt that passed the limits; it counts as a failure until it is known to be right. */
export interface LoginAttempt {
  /** The password was right: the account's failures are forgotten and this attempt no longer counts against the address. */
  succeeded(): Promise<void>;
}

export type LoginDecision =
  | { allowed: true; retryAfterSeconds: 0; attempt: LoginAttempt }
  | {
      allowed: false;
      /** Seconds until a new attempt is allowed. */
      retryAfterSeconds: number;
      /** What was exhausted, for the message. */
      reason: 'account' | 'address';
    };

/**
 * Keys are hashed: the table holds no typed addresses or client IPs, and a row has the same
 * size whatever a client sends.
 */
function keyOf(kind: 'a' | 'i', value: string): string {
  return `${kind}:${createHash('sha256').update(value).digest('base64url')}`;
}
/** The account as sign-in looks it up (addressKey): every spelling of one address is one key. */
const accountKey = (email: string) => keyOf('a', canonicalAddress(email));
const addressKey = (address: string) => keyOf('i', address);

/*
 * An attempt is recorded as a failure before its password is checked (the check takes a
 * scrypt), and taken back when the password was right. So parallel attempts, on one node or
 * spread over many, see each other: of attempts made at once, only as many as the limit has
 * room for get through. An attempt whose request dies before the answer stays a failure.
 *
 * Growth: an attempt is only written when it passes the limits, so each key has at most its
 * limit of rows in the window, a refused flood costs reads only, and every row costs the
 * attacker a scrypt on some node; rows past the window are deleted every minute.
 */
export function createLoginThrottle(deps: { failures: LoginFailuresRepository; clock: Clock; onPruneError?: (err: unknown) => void }) {
  const { failures, clock } = deps;
  let lastPrune = Number.NEGATIVE_INFINITY;

  /** Seconds to wait for a key (0: under its limit). `belowId` counts only the failures recorded before that row. */
  async function wait(key: string, limit: Limit, now: number, belowId?: number): Promise<number> {
    const list = await failures.recent(key, now - limit.windowMs, limit.failures, belowId);
    if (list.length < limit.failures) return 0;
    const oldestThatCounts = list[limit.failures - 1]!;
    return Math.max(1, Math.ceil((oldestThatCounts + limit.windowMs - now) / 1000));
  }

  async function refusal(account: string, address: string, now: number, ids?: Map<string, number>): Promise<LoginDecision | undefined> {
    const [a, i] = await Promise.all([wait(account, LOGIN_LIMITS.account, now, ids?.get(account)), wait(address, LOGIN_LIMITS.address, now, ids?.get(address))]);
    if (a > 0) return { allowed: false, retryAfterSeconds: a, reason: 'account' };
    if (i > 0) return { allowed: false, retryAfterSeconds: i, reason: 'address' };
    return undefined;
  }

  async function pruneNow(now: number): Promise<void> {
    if (now - lastPrune < PRUNE_EVERY_MS) return;
    lastPrune = now;
    try {
      await failures.prune(now - KEEP_MS);
    } catch (err) {
      deps.onPruneError?.(err);
    }
  }

  return {
    /**
     * Whether a sign-in for this account from this address may be tried now. When it may, the
     * attempt already counts as a failure: call `attempt.succeeded()` if the password was right.
     */
    async begin(email: string, address: string): Promise<LoginDecision> {
      const account = accountKey(email);
      const addr = addressKey(address);
      const now = clock.nowMs();
      const refused = await refusal(account, addr, now);
      if (refused) return refused;
      await pruneNow(now);
      const ids = await failures.add([account, addr], now);
      // Attempts recorded at the same time by other requests or nodes may have used up the room.
      const late = await refusal(account, addr, now, ids);
      if (late) {
        await failures.remove({ ids: [...ids.values()] });
        return late;
      }
      const addressRow = ids.get(addr)!;
      return {
        allowed: true,
        retryAfterSeconds: 0,
        attempt: { succeeded: () => failures.remove({ ids: [addressRow], keys: [account] }) },
      };
    },

    /** Forgets an account's failures (its password was reset by an operator). */
    async forgetAccount(email: string): Promise<void> {
      await failures.remove({ keys: [accountKey(email)] });
    },
  };
}
export type LoginThrottle = ReturnType<typeof createLoginThrottle>;
