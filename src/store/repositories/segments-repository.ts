import { sql, type Selectable, type Updateable } from 'kysely';
import type { Db } from '../db.js';
import { isPostgres, transact } from '../store-context.js';
import type { CampaignStatus, SegmentsTable } from '../tables/database.js';
import { boundedRead } from '../bounded-read.js';

export type SegmentRow = Selectable<SegmentsTable>;
/** A campaign that keeps a segment or contact book from being deleted, as the refusal names it. */
export interface CampaignRef {
  id: string;
  name: string;
  status: CampaignStatus;
}
/** How many blocking campaigns a refusal names at most. */
export const BLOCKERS_NAMED = 10;
export type SegmentChanges = Omit<Updateable<SegmentsTable>, 'id' | 'team_id' | 'contact_book_id' | 'created_at'>;

export function createSegmentsRepository(db: Db) {
  return {
    async insert(row: SegmentsTable): Promise<SegmentRow> {
      await db.insertInto('segments').values(row).execute();
      return row;
    },

    async findById(teamId: number, id: string): Promise<SegmentRow | undefined> {
      return db.selectFrom('segments').selectAll().where('team_id', '=', teamId).where('id', '=', id).executeTakeFirst();
    },

    /** Newest first; rowid orders segments created in the same millisecond. */
    async list(teamId: number, f: { contactBookId?: string; offset: number; limit: number }): Promise<{ rows: SegmentRow[]; total: number }> {
      return boundedRead(db, async (rdb) => {
        let q = rdb.selectFrom('segments').where('team_id', '=', teamId);
        if (f.contactBookId) q = q.where('contact_book_id', '=', f.contactBookId);
        const rows = await q.selectAll().orderBy(sql`created_at desc, rowid desc`).limit(f.limit).offset(f.offset).execute();
        const total = await q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
        return { rows, total: Number(total.n) };
      });
    },

    async update(teamId: number, id: string, changes: SegmentChanges): Promise<SegmentRow | undefined> {
      return db.updateTable('segments').set(changes).where('team_id', '=', teamId).where('id', '=', id).returningAll().executeTakeFirst();
    },

    /**
     * Deletes the segment unless a campaign not yet started still reads it (one started keeps
     * the filter it started with); contacts are never touched. `blockedBy` names those
     * campaigns; `deleted` is false then, and when the segment is not there.
     */
    async delete(teamId: number, id: string): Promise<{ deleted: boolean; blockedBy: CampaignRef[] }> {
      return transact(db, async (trx) => {
        // On PostgreSQL the row is locked first: a schedule that holds it (campaigns-repository,
        // update withAudience) commits before this reads the campaigns, or finds it gone.
        const seg = await trx.selectFrom('segments').select('id').where('team_id', '=', teamId).where('id', '=', id).$if(isPostgres(db), (q) => q.forUpdate()).executeTakeFirst();
        if (!seg) return { deleted: false, blockedBy: [] };
        const blockedBy = await trx
          .selectFrom('campaigns')
          .select(['id', 'name', 'status'])
          .where('team_id', '=', teamId)
          .where('segment_id', '=', id)
          .where('deleted_at', 'is', null)
          .where('status', 'in', ['SCHEDULED', 'RUNNING', 'PAUSED'])
          .where('segment_filters_json', 'is', null)
          .orderBy('created_at')
          .orderBy('id')
          .limit(BLOCKERS_NAMED)
          .execute();
        if (blockedBy.length) return { deleted: false, blockedBy };
        await trx.deleteFrom('segments').where('team_id', '=', teamId).where('id', '=', id).execute();
        return { deleted: true, blockedBy: [] };
      });
    },
  };
}
export type SegmentsRepository = ReturnType<typeof createSegmentsRepository>;
