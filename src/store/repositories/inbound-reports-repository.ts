import type { Insertable } from 'kysely';
import type { Db } from '../db.js';
import { transact } from '../store-context.js';
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
     */
    /** `inTransaction` runs synchronously inside the same transaction, after the effects (the transactional outbox). */
    async record(report: Insertable<InboundReportsTable>, effects: ReportEffects, inTransaction?: () => void): Promise<number> {
      return transact(db, async (trx) => {
        const inserted = await trx.insertInto('inbound_reports').values(report).returning('id').executeTakeFirstOrThrow();
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
        return inserted.id;
      });
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
