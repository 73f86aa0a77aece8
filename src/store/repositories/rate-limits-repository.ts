import { sql } from 'kysely';
import type { Db } from '../db.js';

/*
 * Rate-limit windows shared by the nodes of a cluster (on SQLite the limiter counts in memory:
 * core/rate-limit/rate-limiter.ts). One statement per request: the window's counter moves only
 * while it is under the limit, so every node sees the same count and a burst spread over many
 * nodes gets the 429s one node would give.
 */
export function createRateLimitsRepository(db: Db) {
  return {
    /** Counts one request in the team's window; the count with it, or null when the window is full. */
    async hit(teamId: number, windowStart: number, limit: number): Promise<number | null> {
      const row = await db
        .insertInto('rate_limit_windows')
        .values({ team_id: teamId, window_start: windowStart, count: 1 })
        .onConflict((oc) =>
          oc
            .columns(['team_id', 'window_start'])
            .doUpdateSet({ count: sql`rate_limit_windows.count + 1` })
            .where('rate_limit_windows.count', '<', limit),
        )
        .returning('count')
        .executeTakeFirst();
      return row ? Number(row.count) : null;
    },

    /** Drops windows that ended before `beforeMs`. */
    async prune(beforeMs: number): Promise<number> {
      const res = await db.deleteFrom('rate_limit_windows').where('window_start', '<', beforeMs).executeTakeFirst();
      return Number(res.numDeletedRows);
    },
  };
}
export type RateLimitsRepository = ReturnType<typeof createRateLimitsRepository>;
