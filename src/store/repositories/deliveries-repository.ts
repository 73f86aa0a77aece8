import type { Db } from '../db.js';
import type { DeliveryState } from '../tables/database.js';
import { insertEventAndBump, type DeliveryRow } from './emails-repository.js';

export type { DeliveryRow };

export interface DeliveryUpdate {
  id: number;
  state: DeliveryState;
  attempts: number;
  nextAttemptAt: number;
  code: number | null;
  response: string | null;
  mxHost: string | null;
}

export interface StatusEventWrite {
  emailId: string;
  status: string;
  rank: number;
  data: unknown;
  at: string;
}

export interface ResultsWrite {
  /** Emails whose first attempt this is: SENT is recorded once (sent_at is the guard). */
  sent?: { emailIds: string[]; at: string; rank: number };
  updates: DeliveryUpdate[];
  events: StatusEventWrite[];
  suppressions: { teamId: number; email: string; reason: 'HARD_BOUNCE' | 'COMPLAINT'; source: string; at: string }[];
}

export function createDeliveriesRepository(db: Db) {
  return {
    /**
     * Claims due deliveries with a lease in one UPDATE ... RETURNING (DESIGN 3.6), so two
     * workers (or two nodes sharing a database later) never take the same row; a lease
     * whose holder died expires and the row is claimed again.
     */
    async claimDue(owner: string, nowMs: number, leaseMs: number, limit: number): Promise<DeliveryRow[]> {
      return db
        .updateTable('deliveries')
        .set({ lease_owner: owner, lease_until: nowMs + leaseMs })
        .where('id', 'in', (eb) =>
          eb
            .selectFrom('deliveries')
            .select('id')
            .where('state', '=', 'queued')
            .where('next_attempt_at', '<=', nowMs)
            .where((w) => w.or([w('lease_until', 'is', null), w('lease_until', '<', nowMs)]))
            .orderBy('next_attempt_at')
            .limit(limit),
        )
        .returningAll()
        .execute();
    },

    /** Earliest due time among queued, unleased deliveries (to sleep until then). */
    async nextDueAt(): Promise<number | null> {
      const r = await db
        .selectFrom('deliveries')
        .select((eb) => eb.fn.min('next_attempt_at').as('due'))
        .where('state', '=', 'queued')
        .where('lease_until', 'is', null)
        .executeTakeFirst();
      return r?.due === null || r?.due === undefined ? null : Number(r.due);
    },

    /** On start with SQLite (one node per database file): every lease belonged to a dead process. */
    async releaseAllLeases(): Promise<number> {
      const res = await db.updateTable('deliveries').set({ lease_owner: null, lease_until: null }).where('lease_owner', 'is not', null).executeTakeFirst();
      return Number(res.numUpdatedRows);
    },

    async releaseLeases(ids: number[]): Promise<void> {
      if (!ids.length) return;
      await db.updateTable('deliveries').set({ lease_owner: null, lease_until: null }).where('id', 'in', ids).where('state', '=', 'queued').execute();
    },

    /** Writes one attempt's results, status events and suppressions in one transaction. */
    async applyResults(w: ResultsWrite, nowIso: string): Promise<string[]> {
      return db.transaction().execute(async (trx) => {
        let newlySent: string[] = [];
        if (w.sent && w.sent.emailIds.length) {
          const rows = await trx
            .updateTable('emails')
            .set({ sent_at: w.sent.at })
            .where('id', 'in', w.sent.emailIds)
            .where('sent_at', 'is', null)
            .returning('id')
            .execute();
          newlySent = rows.map((r) => r.id);
          for (const id of newlySent) await insertEventAndBump(trx, { emailId: id, status: 'SENT', rank: w.sent.rank, data: null, at: w.sent.at });
        }
        for (const u of w.updates) {
          await trx
            .updateTable('deliveries')
            .set({
              state: u.state,
              attempts: u.attempts,
              next_attempt_at: u.nextAttemptAt,
              last_code: u.code,
              last_response: u.response,
              mx_host: u.mxHost,
              lease_owner: null,
              lease_until: null,
              updated_at: nowIso,
            })
            .where('id', '=', u.id)
            .execute();
        }
        for (const e of w.events) await insertEventAndBump(trx, e);
        for (const s of w.suppressions) {
          await trx
            .insertInto('suppressions')
            .values({ team_id: s.teamId, email: s.email, reason: s.reason, source: s.source, created_at: s.at })
            .onConflict((oc) => oc.columns(['team_id', 'email']).doNothing())
            .execute();
        }
        return newlySent;
      });
    },

    async countsByState(): Promise<{ state: string; due: number; count: number }[]> {
      const rows = await db.selectFrom('deliveries').select(['state', (eb) => eb.fn.countAll<number>().as('count')]).groupBy('state').execute();
      return rows.map((r) => ({ state: r.state, due: 0, count: Number(r.count) }));
    },

    async listQueued(limit: number): Promise<DeliveryRow[]> {
      return db.selectFrom('deliveries').selectAll().where('state', '=', 'queued').orderBy('next_attempt_at').limit(limit).execute();
    },

    async findById(id: number): Promise<DeliveryRow | undefined> {
      return db.selectFrom('deliveries').selectAll().where('id', '=', id).executeTakeFirst();
    },

    async retryNow(id: number, nowMs: number, nowIso: string): Promise<boolean> {
      const res = await db.updateTable('deliveries').set({ next_attempt_at: nowMs, updated_at: nowIso }).where('id', '=', id).where('state', '=', 'queued').executeTakeFirst();
      return res.numUpdatedRows > 0n;
    },

    async listForEmail(emailId: string): Promise<DeliveryRow[]> {
      return db.selectFrom('deliveries').selectAll().where('email_id', '=', emailId).orderBy('id').execute();
    },
  };
}
export type DeliveriesRepository = ReturnType<typeof createDeliveriesRepository>;
