import type { Db } from '../db.js';

export type IdempotencyBegin =
  | { kind: 'started' }
  | { kind: 'replay'; responseJson: string }
  | { kind: 'conflict'; reason: 'different_body' | 'in_flight' };

/** How often begin() goes round when the entry it met vanished or expired under it (then: in flight). */
const BEGIN_ROUNDS = 3;

/** owner: the node whose requests these are (a cluster frees a dead node's in-flight keys). */
export function createIdempotencyRepository(db: Db, opts: { owner?: string } = {}) {
  return {
    /**
     * Claims a key for a request, atomically: the insert decides, so requests racing for one
     * key (on one node or several) start once. An entry older than ttlMs is gone. An in-flight
     * entry stays until its request completes or abandons it, however long that takes: taking
     * it over after a while would let two requests send (spec rule 3 says 409). Entries of a
     * request that died with the process are released at startup (releaseInFlight), or, in a
     * cluster, when its node is found dead.
     */
    async begin(teamId: number, key: string, bodyHash: string, nowMs: number, ttlMs: number, token?: string): Promise<IdempotencyBegin> {
      for (let round = 0; round < BEGIN_ROUNDS; round++) {
        const inserted = await db
          .insertInto('idempotency_keys')
          .values({ team_id: teamId, key, body_hash: bodyHash, state: 'in_flight', response_json: null, created_at: nowMs, owner: opts.owner ?? null, token: token ?? null })
          .onConflict((oc) => oc.columns(['team_id', 'key']).doNothing())
          .executeTakeFirst();
        if (Number(inserted.numInsertedOrUpdatedRows ?? 0n) > 0) return { kind: 'started' };
        const row = await db.selectFrom('idempotency_keys').selectAll().where('team_id', '=', teamId).where('key', '=', key).executeTakeFirst();
        if (!row) continue; // abandoned meanwhile: claim it again
        const expired = row.state !== 'in_flight' && nowMs - row.created_at >= ttlMs;
        if (!expired) {
          if (row.state === 'in_flight') return { kind: 'conflict', reason: 'in_flight' };
          if (row.body_hash !== bodyHash) return { kind: 'conflict', reason: 'different_body' };
          return { kind: 'replay', responseJson: row.response_json ?? '{}' };
        }
        // Expired: remove exactly that entry (another request may be replacing it too), then claim.
        await db.deleteFrom('idempotency_keys').where('team_id', '=', teamId).where('key', '=', key).where('state', '!=', 'in_flight').where('created_at', '=', row.created_at).execute();
      }
      return { kind: 'conflict', reason: 'in_flight' };
    },
    /**
     * A failed request is not remembered: the client may retry with the same key. With its
     * token, only the request's own claim goes (it may not know whether its claim was stored:
     * the claim of another request with the key stays).
     */
    async abandon(teamId: number, key: string, token?: string): Promise<void> {
      let q = db.deleteFrom('idempotency_keys').where('team_id', '=', teamId).where('key', '=', key).where('state', '=', 'in_flight');
      if (token !== undefined) q = q.where('token', '=', token);
      await q.execute();
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
