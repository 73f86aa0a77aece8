/** How often a key's last-used time is written: not on every request. */
export const LAST_USED_WRITE_INTERVAL_MS = 60_000;

/** Entries kept before the stale ones are dropped. */
const PRUNE_AT = 10_000;

/**
 * Whether a key's last-used time is due to be written, at most once per interval per key.
 * An entry older than the interval answers as a missing one would, so dropping those (when the
 * map reaches PRUNE_AT) changes no answer: the map holds the keys used in the last minute, not
 * every key the process has seen, revoked and deleted ones included.
 */
export function createLastUsedThrottle(intervalMs = LAST_USED_WRITE_INTERVAL_MS) {
  const written = new Map<number, number>();
  return {
    due(keyId: number, nowMs: number): boolean {
      if (nowMs - (written.get(keyId) ?? -Infinity) <= intervalMs) return false;
      if (written.size >= PRUNE_AT) for (const [id, at] of written) if (nowMs - at > intervalMs) written.delete(id);
      written.set(keyId, nowMs);
      return true;
    },
    /** Entries held (tests). */
    get size(): number {
      return written.size;
    },
  };
}
