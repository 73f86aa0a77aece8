import type { Insertable } from 'kysely';
import type { Db } from '../db.js';
import { isPostgres, transact } from '../store-context.js';
import { storedBytes, withinBytes, type ChunkLimit } from './content-chunks.js';
import type { InboundReportsTable } from '../tables/database.js';
import { applyReportToDelivery, type ReportDeliveryUpdate, type StatusEventWrite } from './deliveries-repository.js';
import { insertEventAndBump } from './emails-repository.js';

/**
 * One thing a report says about one delivery: its status event, what it changes on the row,
 * the suppression it adds. Written only when it is news: unless the email already has an event
 * of status `unless` for the delivery's recipient (an earlier report, or the delivery itself).
 */
export interface ReportStep {
  deliveryId: number;
  /** The delivery's recipient as its events name it. */
  recipient: string;
  unless: string;
  event: StatusEventWrite;
  /** Omitted: the row is left alone (a complaint). */
  delivery?: Omit<ReportDeliveryUpdate, 'id'>;
  suppression?: { teamId: number; email: string; reason: 'HARD_BOUNCE' | 'COMPLAINT'; source: string; at: string };
}

export interface ReportEffects {
  /** In the report's order: a later step sees what an earlier one wrote. */
  steps: ReportStep[];
}

export function createInboundReportsRepository(db: Db) {
  return {
    /**
     * Stores the report and everything it changes (delivery rows, status events that move
     * latestStatus forward only, suppressions) in one transaction, before the SMTP 250.
     * `inTransaction` runs synchronously inside the same transaction, after the effects (the
     * transactional outbox), with the indexes of the steps that were news and written. A report
     * whose dedupe key the team already has (the sender retried the message) changes nothing:
     * the stored report's id comes back with `duplicate`.
     */
    async record(report: Insertable<InboundReportsTable>, effects: ReportEffects, inTransaction?: (applied: number[]) => void): Promise<{ id: number; duplicate: boolean; applied: number[] }> {
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
          return { id: existing.id, duplicate: true, applied: [] };
        }
        const applied: number[] = [];
        // Two reports about one delivery at once: on PostgreSQL the second waits here for the
        // first's commit and then sees its events (SQLite runs one transaction at a time). The
        // rows are locked in id order, so two reports about the same deliveries never deadlock.
        const ids = [...new Set(effects.steps.map((step) => step.deliveryId))];
        if (ids.length && isPostgres(db)) await trx.selectFrom('deliveries').select('id').where('id', 'in', ids).orderBy('id').forUpdate().execute();
        for (const [i, step] of effects.steps.entries()) {
          const earlier = await trx.selectFrom('email_events').select('data_json').where('email_id', '=', step.event.emailId).where('status', '=', step.unless).execute();
          const recipient = step.recipient.toLowerCase();
          if (earlier.some((e) => recipientOf(e.data_json) === recipient)) continue;
          if (step.delivery) await applyReportToDelivery(trx, { id: step.deliveryId, ...step.delivery });
          await insertEventAndBump(trx, step.event);
          const s = step.suppression;
          if (s) {
            // A recipient already suppressed keeps the reason and source it was suppressed for.
            await trx
              .insertInto('suppressions')
              .values({ team_id: s.teamId, email: s.email, reason: s.reason, source: s.source, created_at: s.at })
              .onConflict((oc) => oc.columns(['team_id', 'email']).doNothing())
              .execute();
          }
          applied.push(i);
        }
        inTransaction?.(applied);
        return { id: inserted.id, duplicate: false, applied };
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
/** The recipient a status event's data names, lower-cased ('' for none). */
function recipientOf(dataJson: string | null): string {
  if (!dataJson) return '';
  try {
    const data = JSON.parse(dataJson) as { recipient?: unknown } | null;
    return typeof data?.recipient === 'string' ? data.recipient.toLowerCase() : '';
  } catch {
    return '';
  }
}
export type InboundReportsRepository = ReturnType<typeof createInboundReportsRepository>;
