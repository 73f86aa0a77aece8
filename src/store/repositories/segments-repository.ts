import { sql, type Selectable, type Updateable } from 'kysely';
import type { Db } from '../db.js';
import type { SegmentsTable } from '../tables/database.js';

export type SegmentRow = Selectable<SegmentsTable>;
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
      let q = db.selectFrom('segments').where('team_id', '=', teamId);
      if (f.contactBookId) q = q.where('contact_book_id', '=', f.contactBookId);
      const rows = await q.selectAll().orderBy(sql`created_at desc, rowid desc`).limit(f.limit).offset(f.offset).execute();
      const total = await q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
      return { rows, total: Number(total.n) };
    },

    async update(teamId: number, id: string, changes: SegmentChanges): Promise<SegmentRow | undefined> {
      return db.updateTable('segments').set(changes).where('team_id', '=', teamId).where('id', '=', id).returningAll().executeTakeFirst();
    },

    /** True when a segment was deleted; contacts are never touched. */
    async delete(teamId: number, id: string): Promise<boolean> {
      const res = await db.deleteFrom('segments').where('team_id', '=', teamId).where('id', '=', id).executeTakeFirst();
      return Number(res.numDeletedRows) > 0;
    },
  };
}
export type SegmentsRepository = ReturnType<typeof createSegmentsRepository>;
