import type { Db } from '../db.js';

export interface MtaStsPolicyRow {
  domain: string;
  policyId: string;
  body: string;
  fetchedAtMs: number;
  expiresAtMs: number;
}

/** MTA-STS policies learnt from recipient domains (RFC 8461 §5.1), one per domain. */
export function createMtaStsPoliciesRepository(db: Db) {
  return {
    async get(domain: string): Promise<MtaStsPolicyRow | undefined> {
      const r = await db.selectFrom('mta_sts_policies').selectAll().where('domain', '=', domain).executeTakeFirst();
      return r && { domain: r.domain, policyId: r.policy_id, body: r.body, fetchedAtMs: r.fetched_at, expiresAtMs: r.expires_at };
    },
    async put(p: MtaStsPolicyRow): Promise<void> {
      const values = { domain: p.domain, policy_id: p.policyId, body: p.body, fetched_at: p.fetchedAtMs, expires_at: p.expiresAtMs };
      await db
        .insertInto('mta_sts_policies')
        .values(values)
        .onConflict((oc) => oc.column('domain').doUpdateSet({ policy_id: values.policy_id, body: values.body, fetched_at: values.fetched_at, expires_at: values.expires_at }))
        .execute();
    },
    /** Drops policies that expired before `beforeMs` (nobody may use them any more). */
    async deleteExpired(beforeMs: number): Promise<number> {
      const res = await db.deleteFrom('mta_sts_policies').where('expires_at', '<', beforeMs).executeTakeFirst();
      return Number(res.numDeletedRows);
    },
  };
}
export type MtaStsPoliciesRepository = ReturnType<typeof createMtaStsPoliciesRepository>;
