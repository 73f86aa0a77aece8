import type { Clock } from '../../lib/clock.js';

// Per-team fixed 1-second window (spec, Limits; architecture.md, Decisions: rate limit). Counters live in memory: they
// guard the API, they are not accepted work, so losing them on restart is harmless.

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Epoch seconds at which the current window ends. */
  resetEpochSeconds: number;
  retryAfterSeconds: number;
  /** Refused, and the first refusal of this key in this window: the one worth a log line. */
  firstRefusal: boolean;
}

export const WINDOW_MS = 1000;

/** What the edges ask before serving a request: in memory (one node) or shared through the store (a cluster). */
export interface RateLimiter {
  consume(teamId: number, limit: number, keyId?: number): RateDecision | Promise<RateDecision>;
}

export function createRateLimiter(clock: Clock): RateLimiter {
  const windows = new Map<number, { windowStart: number; count: number; refusedKeys?: Set<number> }>();

  return {
    /** Counts one request for the team against `limit` requests per second; `keyId` names the key for the refusal log. */
    consume(teamId: number, limit: number, keyId = 0): RateDecision {
      const now = clock.nowMs();
      const windowStart = now - (now % WINDOW_MS);
      let w = windows.get(teamId);
      if (!w || w.windowStart !== windowStart) {
        w = { windowStart, count: 0 };
        windows.set(teamId, w);
        // Keep the map small: drop windows that ended long ago.
        if (windows.size > 10_000) for (const [k, v] of windows) if (v.windowStart < windowStart) windows.delete(k);
      }
      const resetMs = windowStart + WINDOW_MS;
      const allowed = w.count < limit;
      if (allowed) w.count += 1;
      let firstRefusal = false;
      if (!allowed) {
        w.refusedKeys ??= new Set();
        firstRefusal = !w.refusedKeys.has(keyId);
        w.refusedKeys.add(keyId);
      }
      return {
        allowed,
        limit,
        remaining: Math.max(0, limit - w.count),
        resetEpochSeconds: Math.ceil(resetMs / 1000),
        retryAfterSeconds: Math.max(1, Math.ceil((resetMs - now) / 1000)),
        firstRefusal,
      };
    },
  };
}
