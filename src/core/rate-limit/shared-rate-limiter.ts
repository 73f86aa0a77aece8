import type { Clock } from '../../lib/clock.js';
import type { RateLimitsRepository } from '../../store/repositories/rate-limits-repository.js';
import { WINDOW_MS, type RateDecision, type RateLimiter } from './rate-limiter.js';

// The per-team rate limit of a cluster (architecture.md, Decisions: rate limit): the same fixed
// 1-second windows as the in-memory limiter, counted in the store that every node shares, so a
// burst spread over several nodes is refused exactly as on one. Clocks of the nodes name the
// window; keep them in sync (NTP), as any cluster must.

/** Windows this old are dropped now and then (they only keep the table from growing). */
const KEEP_WINDOWS_MS = 60_000;

export function createSharedRateLimiter(deps: { windows: RateLimitsRepository; clock: Clock; onPruneError?: (err: unknown) => void }): RateLimiter {
  /** Keys refused in the current window on this node: the first refusal of each is the one worth a log line. */
  let refused = { windowStart: 0, keys: new Set<number>() };
  let lastPrune = 0;
  return {
    async consume(teamId: number, limit: number, keyId = 0): Promise<RateDecision> {
      const now = deps.clock.nowMs();
      const windowStart = now - (now % WINDOW_MS);
      if (now - lastPrune > KEEP_WINDOWS_MS) {
        lastPrune = now;
        deps.windows.prune(now - KEEP_WINDOWS_MS).catch((err: unknown) => deps.onPruneError?.(err));
      }
      const count = await deps.windows.hit(teamId, windowStart, limit);
      const allowed = count !== null;
      const resetMs = windowStart + WINDOW_MS;
      let firstRefusal = false;
      if (!allowed) {
        if (refused.windowStart !== windowStart) refused = { windowStart, keys: new Set() };
        firstRefusal = !refused.keys.has(keyId);
        refused.keys.add(keyId);
      }
      return {
        allowed,
        limit,
        remaining: Math.max(0, limit - (count ?? limit)),
        resetEpochSeconds: Math.ceil(resetMs / 1000),
        retryAfterSeconds: Math.max(1, Math.ceil((resetMs - now) / 1000)),
        firstRefusal,
      };
    },
  };
}
