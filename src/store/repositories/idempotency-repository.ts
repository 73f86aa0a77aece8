import type { Db } from '../db.js';

export type IdempotencyBegin =
  | { kind: 'started' }
  | { kind: 'replay'; responseJson: string }
  | { kind: 'conflict'; reason: 'different_body' | 'in_flight' };

export function createIdempotencyRepository(db: Db) {
  return {
    /**
     * Claims a key for a request, atomically. An entry older than ttlMs is gone. An in-flight
     * entry stays until its request completes or abandons it, however long that takes: taking
     * it over after a while would let two requests send (spec rule 3 says 409). Entries of a
     * request that died with the process are released at startup (releaseInFlight).
     */
    async begin(teamId: number, key: string, bodyHash: string, nowMs: number, ttlMs: number): Promise<IdempotencyBegin> {
      return db.transaction().execute(async (trx) => {
        const row = await trx.selectFrom('idempotency_keys').selectAll().where('team_id', '=', teamId).where('key', '=', key).executeTakeFirst();
        const expired = row && row.state !== 'in_flight' && nowMs - row.created_at >= ttlMs;
        if (row && !expired) {
          if (row.state === 'in_flight') return { kind: 'conflict', reason: 'in_flight' };
          if (row.body_hash !== bodyHash) return { kind: 'conflict', reason: 'different_body' };
          return { kind: 'replay', responseJson: row.response_json ?? '{}' };
        }
        if (row) await trx.deleteFrom('idempotency_keys').where('team_id', '=', teamId).where('key', '=', key).execute();
        await trx.insertInto('idempotency_keys').values({ team_id: teamId, key, body_hash: bodyHash, state: 'in_flight', response_json: null, created_at: nowMs }).execute();
        return { kind: 'started' };
      });
    },
    /** A failed request is not remembered: the client may retry with the same key. */
    async abandon(teamId: number, key: string): Promise<void> {
      await db.deleteFrom('idempotency_keys').where('team_id', '=', teamId).where('key', '=', key).where('state', '=', 'in_flight').execute();
    },
    /**
     * Drops every in-flight entry. Only for startup: a request can not outlive the process
     * that was serving it, so an entry still in flight then belonged to a request that died
     * with the previous process (like the delivery leases released at startup).
     */
    async releaseInFlight(): Promise<number> {
      const res = await db.deleteFrom('idempotency_keys').where('state', '=', 'in_flight').executeTakeFirst();
      return Number(res.numDeletedRows);
    },
    /** Deletes completed entries older than ttlMs (the table would otherwise only grow). */
    async purgeExpired(nowMs: number, ttlMs: number): Promise<number> {
      const res = await db.deleteFrom('idempotency_keys').where('state', '!=', 'in_flight').where('created_at', '<=', nowMs - ttlMs).executeTakeFirst();
      return Number(res.numDeletedRows);
    },
  };
}
export type IdempotencyRepository = ReturnType<typeof createIdempotencyRepository>;
