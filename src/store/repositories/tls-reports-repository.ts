import { sql, type Selectable } from 'kysely';
import type { Db } from '../db.js';
import { isPostgres, transact } from '../store-context.js';
import type { TlsReportDeliveriesTable, TlsSessionCountsTable } from '../tables/database.js';

export type TlsSessionCountRow = Selectable<TlsSessionCountsTable>;
export type TlsReportDeliveryRow = Selectable<TlsReportDeliveriesTable> & { report_id: string; report_json: string | null };

export interface NewTlsReport {
  policyDomain: string;
  day: string;
  reportId: string;
  state: 'no-rua' | 'queued';
  rua: string[];
  reportJson: string | null;
  createdAt: string;
  /** One delivery per rua target, due at once. */
  targets: string[];
  dueMs: number;
}

/** Outgoing TLS reporting (RFC 8460): session counts, the reports made of them, their deliveries. */
export function createTlsReportsRepository(db: Db) {
  return {
    /**
     * Adds counts (one transaction for the whole batch). Rows are written in key order: nodes
     * flushing the same rows at once then lock them in the same order and never deadlock.
     */
    async addCounts(rows: TlsSessionCountRow[]): Promise<void> {
      if (!rows.length) return;
      const keyOf = (r: TlsSessionCountRow) => [r.policy_domain, r.day, r.policy_key, r.result, r.sending_ip, r.mx_host, r.receiving_ip, r.reason_code].join('\u0000');
      const sorted = rows.map((r) => [keyOf(r), r] as const).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      await transact(db, async (trx) => {
        for (const [, r] of sorted) {
          await trx
            .insertInto('tls_session_counts')
            .values(r)
            .onConflict((oc) =>
              oc
                .columns(['policy_domain', 'day', 'policy_key', 'result', 'sending_ip', 'mx_host', 'receiving_ip', 'reason_code'])
                .doUpdateSet({ count: sql`tls_session_counts.count + excluded.count` }),
            )
            .execute();
        }
      });
    },

    /** (policy domain, day) pairs with counts before `beforeDay` and no report yet. */
    async unreportedDays(beforeDay: string): Promise<{ policy_domain: string; day: string }[]> {
      return db
        .selectFrom('tls_session_counts as c')
        .select(['c.policy_domain', 'c.day'])
        .distinct()
        .where('c.day', '<', beforeDay)
        .where(({ not, exists, selectFrom }) =>
          not(exists(selectFrom('tls_reports_out as r').select('r.day').whereRef('r.policy_domain', '=', 'c.policy_domain').whereRef('r.day', '=', 'c.day'))),
        )
        .orderBy('c.day')
        .orderBy('c.policy_domain')
        .execute();
    },

    async countsFor(policyDomain: string, day: string): Promise<TlsSessionCountRow[]> {
      return db.selectFrom('tls_session_counts').selectAll().where('policy_domain', '=', policyDomain).where('day', '=', day).execute();
    },

    /**
     * Records the report of one (domain, day) with its deliveries and drops the counts it was
     * made of, in one transaction. False when that day was already reported (the primary key).
     */
    async insertReport(r: NewTlsReport): Promise<boolean> {
      return transact(db, async (trx) => {
        const inserted = await trx
          .insertInto('tls_reports_out')
          .values({ policy_domain: r.policyDomain, day: r.day, report_id: r.reportId, state: r.state, rua_json: JSON.stringify(r.rua), report_json: r.reportJson, created_at: r.createdAt })
          .onConflict((oc) => oc.columns(['policy_domain', 'day']).doNothing())
          .executeTakeFirst();
        if (Number(inserted.numInsertedOrUpdatedRows ?? 0n) === 0) return false;
        for (const target of r.targets) {
          await trx
            .insertInto('tls_report_deliveries')
            .values({ policy_domain: r.policyDomain, day: r.day, target, state: 'pending', attempts: 0, next_attempt_at: r.dueMs, lease_until: null, last_error: null, created_at: r.createdAt, updated_at: r.createdAt })
            .execute();
        }
        await trx.deleteFrom('tls_session_counts').where('policy_domain', '=', r.policyDomain).where('day', '=', r.day).execute();
        return true;
      });
    },

    /** Counts of days too old to report: dropped unreported. */
    async deleteCountsBefore(day: string): Promise<number> {
      const res = await db.deleteFrom('tls_session_counts').where('day', '<', day).executeTakeFirst();
      return Number(res.numDeletedRows);
    },

    /** Claims due deliveries with a lease (one UPDATE ... RETURNING), with their report. */
    async claimDue(nowMs: number, leaseMs: number, limit: number): Promise<TlsReportDeliveryRow[]> {
      const claimed = await db
        .updateTable('tls_report_deliveries')
        .set({ lease_until: nowMs + leaseMs })
        .where('id', 'in', (qb) =>
          qb
            .selectFrom('tls_report_deliveries')
            .select('id')
            .where('state', '=', 'pending')
            .where('next_attempt_at', '<=', nowMs)
            .where((eb) => eb.or([eb('lease_until', 'is', null), eb('lease_until', '<', nowMs)]))
            .orderBy('next_attempt_at')
            .limit(limit)
            // Nodes sharing a PostgreSQL store: without the row locks, two claims that read the
            // same due rows would both lease them (the update only waits, then leases again).
            .$if(isPostgres(db), (q) => q.forUpdate().skipLocked()),
        )
        .returningAll()
        .execute();
      if (!claimed.length) return [];
      const reports = await db
        .selectFrom('tls_reports_out')
        .select(['policy_domain', 'day', 'report_id', 'report_json'])
        .where('policy_domain', 'in', [...new Set(claimed.map((c) => c.policy_domain))])
        .execute();
      const byKey = new Map(reports.map((r) => [`${r.policy_domain} ${r.day}`, r]));
      return claimed.map((c) => {
        const r = byKey.get(`${c.policy_domain} ${c.day}`);
        return { ...c, report_id: r?.report_id ?? '', report_json: r?.report_json ?? null };
      });
    },

    /** Extends a claim's lease while its attempt goes on; false when the delivery is no longer that claim's. */
    async renewLease(id: number, leaseUntil: number, untilMs: number): Promise<boolean> {
      const res = await db
        .updateTable('tls_report_deliveries')
        .set({ lease_until: untilMs })
        .where('id', '=', id)
        .where('state', '=', 'pending')
        .where('lease_until', '=', leaseUntil)
        .executeTakeFirst();
      return res.numUpdatedRows > 0n;
    },

    /**
     * Records an attempt, only while the delivery is still the claim's whose lease ran until
     * `leaseUntil` (a claim after it set another); false when another claim took it meanwhile.
     */
    async finishDelivery(id: number, leaseUntil: number, change: { state: 'pending' | 'sent' | 'failed'; attempts: number; nextAttemptAt: number; lastError: string | null; at: string }): Promise<boolean> {
      const res = await db
        .updateTable('tls_report_deliveries')
        .set({ state: change.state, attempts: change.attempts, next_attempt_at: change.nextAttemptAt, last_error: change.lastError, lease_until: null, updated_at: change.at })
        .where('id', '=', id)
        .where('lease_until', '=', leaseUntil)
        .executeTakeFirst();
      return res.numUpdatedRows > 0n;
    },

    async listReports() {
      return db.selectFrom('tls_reports_out').selectAll().orderBy('day').orderBy('policy_domain').execute();
    },

    async listDeliveries() {
      return db.selectFrom('tls_report_deliveries').selectAll().orderBy('id').execute();
    },

    /** Reports older than `beforeDay` whose deliveries are all finished: only history. */
    async deleteReportsBefore(beforeDay: string): Promise<number> {
      const res = await db
        .deleteFrom('tls_reports_out')
        .where('day', '<', beforeDay)
        .where(({ not, exists, selectFrom }) =>
          not(
            exists(
              selectFrom('tls_report_deliveries as d')
                .select('d.id')
                .whereRef('d.policy_domain', '=', 'tls_reports_out.policy_domain')
                .whereRef('d.day', '=', 'tls_reports_out.day')
                .where('d.state', '=', 'pending'),
            ),
          ),
        )
        .executeTakeFirst();
      return Number(res.numDeletedRows);
    },
  };
}
export type TlsReportsRepository = ReturnType<typeof createTlsReportsRepository>;
