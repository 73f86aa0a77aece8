import type { Insertable, Selectable } from 'kysely';
import type { Db } from '../db.js';
import type { ReceivedTlsReportsTable } from '../tables/database.js';
import { boundedRead } from '../bounded-read.js';

export type ReceivedTlsReportRow = Selectable<ReceivedTlsReportsTable>;

/** TLS reports (RFC 8460) received for receiving domains, always read within a team. */
export function createReceivedTlsReportsRepository(db: Db) {
  return {
    /** false when this reporter's report id is already stored for the domain (a resend). */
    async insert(row: Insertable<ReceivedTlsReportsTable>): Promise<boolean> {
      const res = await db
        .insertInto('received_tls_reports')
        .values(row)
        .onConflict((oc) => oc.columns(['domain_id', 'organization_name', 'report_id']).doNothing())
        .executeTakeFirst();
      return Number(res.numInsertedOrUpdatedRows ?? 0n) > 0;
    },

    async list(teamId: number, opts: { domainIds: number[] | null; offset: number; limit: number }): Promise<{ rows: ReceivedTlsReportRow[]; total: number }> {
      return boundedRead(db, async (rdb) => {
        let q = rdb.selectFrom('received_tls_reports').where('team_id', '=', teamId);
        if (opts.domainIds) q = q.where('domain_id', 'in', opts.domainIds.length ? opts.domainIds : [-1]);
        const total = Number((await q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
        const rows = await q.selectAll().orderBy('created_at', 'desc').orderBy('id', 'desc').offset(opts.offset).limit(opts.limit).execute();
        return { rows, total };
      });
    },

    async get(teamId: number, id: string): Promise<ReceivedTlsReportRow | undefined> {
      return db.selectFrom('received_tls_reports').selectAll().where('team_id', '=', teamId).where('id', '=', id).executeTakeFirst();
    },
  };
}
export type ReceivedTlsReportsRepository = ReturnType<typeof createReceivedTlsReportsRepository>;
