import type { Db } from '../db.js';

/*
 * Failed console sign-ins, one row per failure and key, shared by every node using the store
 * (core/users/login-throttle.ts decides with them). Each statement stands alone: an attempt is
 * inserted before its password is checked, so concurrent attempts see each other.
 */
export function createLoginFailuresRepository(db: Db) {
  return {
    /**
     * The times (epoch ms) of the newest `limit` failures of `key` after `sinceMs`, newest first;
     * with `belowId`, only those recorded before that row.
     */
    async recent(key: string, sinceMs: number, limit: number, belowId?: number): Promise<number[]> {
      let q = db.selectFrom('login_failures').select('at_ms').where('key', '=', key).where('at_ms', '>', sinceMs);
      if (belowId !== undefined) q = q.where('id', '<', belowId);
      const rows = await q.orderBy('at_ms', 'desc').limit(limit).execute();
      return rows.map((r) => Number(r.at_ms));
    },

    /** Records one failure for each key at `atMs`; the new rows' ids by key. */
    async add(keys: string[], atMs: number): Promise<Map<string, number>> {
      const rows = await db
        .insertInto('login_failures')
        .values(keys.map((key) => ({ key, at_ms: atMs })))
        .returning(['id', 'key'])
        .execute();
      return new Map(rows.map((r) => [r.key, Number(r.id)]));
    },

    /** Deletes these rows (ids) and every row of these keys. */
    async remove(o: { ids?: number[]; keys?: string[] }): Promise<void> {
      const ids = o.ids ?? [];
      const keys = o.keys ?? [];
      if (!ids.length && !keys.length) return;
      await db
        .deleteFrom('login_failures')
        .where((eb) => eb.or([...(ids.length ? [eb('id', 'in', ids)] : []), ...(keys.length ? [eb('key', 'in', keys)] : [])]))
        .execute();
    },

    /** Drops failures at or before `beforeMs` (they no longer count); how many. */
    async prune(beforeMs: number): Promise<number> {
      const res = await db.deleteFrom('login_failures').where('at_ms', '<=', beforeMs).executeTakeFirst();
      return Number(res.numDeletedRows);
    },

    /** How many rows there are (for tests and health). */
    async count(): Promise<number> {
      const r = await db.selectFrom('login_failures').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
      return Number(r.n);
    },
  };
}
export type LoginFailuresRepository = ReturnType<typeof createLoginFailuresRepository>;
