import type { Insertable } from 'kysely';
import type { Db } from '../db.js';
import { transact } from '../store-context.js';
import { storedBytes, withinBytes, type ChunkLimit } from './content-chunks.js';
import type { InboundReportsTable } from '../tables/database.js';
import { applyReportToDelivery, type ReportDeliveryUpdate, type StatusEventWrite } from './deliveries-repository.js';
import { insertEventAndBump } from './emails-repository.js';

export interface ReportEffects {
  deliveries: ReportDeliveryUpdate[];
  events: StatusEventWrite[];
  suppressions: { teamId: number; email: string; reason: 'HARD_BOUNCE' | 'COMPLAINT'; source: string; at: string }[];
}

export function createInboundReportsRepository(db: Db) {
  return {
    /**
     * Stores the report and everything it changes (delivery rows, status events that move
     * latestStatus forward only, suppressions) in one transaction, before the SMTP 250.
     * `inTransaction` runs synchronously inside the same transaction, after the effects (the
     * transactional outbox). A report whose dedupe key the team already has (the sender retried
     * the message) changes nothing: the stored report's id comes back with `duplicate`.
     */
    async record(report: Insertable<InboundReportsTable>, effects: ReportEffects, inTransaction?: () => void): Promise<{ id: number; duplicate: boolean }> {
      return transact(db, async (trx) => {
        // No conflict target: besides the generated id the one unique key is the dedupe index,
        // (coalesce(team_id, 0), dedupe_key), an expression a column list cannot name.
        const inserted = await trx.insertInto('inbound_reports').values(report).onConflict((oc) => oc.doNothing()).returning('id').executeTakeFirst();
        if (!inserted) {
          const teamId = report.team_id ?? null;
          const existing = await trx
            .selectFrom('inbound_reports')
            .select('id')
            .where('dedupe_key', '=', report.dedupe_key!)
            .where((eb) => (teamId === null ? eb('team_id', 'is', null) : eb('team_id', '=', teamId)))
            .executeTakeFirstOrThrow();
          return { id: existing.id, duplicate: true };
        }
        for (const d of effects.deliveries) await applyReportToDelivery(trx, d);
        for (const e of effects.events) await insertEventAndBump(trx, e);
        for (const s of effects.suppressions) {
          await trx
            .insertInto('suppressions')
            .values({ team_id: s.teamId, email: s.email, reason: s.reason, source: s.source, created_at: s.at })
            .onConflict((oc) => oc.columns(['team_id', 'email']).doNothing())
            .execute();
        }
        inTransaction?.();
        return { id: inserted.id, duplicate: false };
      });
    },

    /**
     * Content retention: empties the stored message (a DSN often quotes the whole original) of
     * reports after `afterId`, in id order, while they were stored before `beforeIso`; the
     * summary stays. `lastId` is the last one emptied (null: none left to empty).
     */
    async emptyRawBefore(afterId: number, beforeIso: string, limit: ChunkLimit): Promise<{ lastId: number | null; emptied: number }> {
      const rows = await db.selectFrom('inbound_reports').select(['id', 'created_at', storedBytes('raw').as('bytes')]).where('id', '>', afterId).orderBy('id').limit(limit.rows).execute();
      // Ids follow the time they were stored: the first young one ends what is old.
      const young = rows.findIndex((r) => r.created_at >= beforeIso);
      const old = withinBytes(young < 0 ? rows : rows.slice(0, young), limit.bytes).map((r) => Number(r.id));
      if (!old.length) return { lastId: null, emptied: 0 };
      await db.updateTable('inbound_reports').set({ raw: Buffer.alloc(0) }).where('id', 'in', old).execute();
      return { lastId: old[old.length - 1]!, emptied: old.length };
    },

    async listForEmail(emailId: string) {
      return db
        .selectFrom('inbound_reports')
        .select(['id', 'kind', 'team_id', 'email_id', 'linked_by', 'mail_from', 'rcpt_to_json', 'summary_json', 'created_at'])
        .where('email_id', '=', emailId)
        .orderBy('id')
        .execute();
    },

    async latest(limit: number) {
      return db
        .selectFrom('inbound_reports')
        .select(['id', 'kind', 'team_id', 'email_id', 'linked_by', 'mail_from', 'rcpt_to_json', 'summary_json', 'created_at'])
        .orderBy('id', 'desc')
        .limit(limit)
        .execute();
    },
  };
}
export type InboundReportsRepository = ReturnType<typeof createInboundReportsRepository>;
