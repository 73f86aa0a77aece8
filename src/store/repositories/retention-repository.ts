import type { Db } from '../db.js';
import { storedBytes, withinBytes, type ChunkLimit } from './content-chunks.js';

/** Content retention's emails that were past the age but had to keep their content (core/retention). */
export function createRetentionRepository(db: Db) {
  return {
    async keep(emailIds: string[]): Promise<void> {
      if (!emailIds.length) return;
      await db
        .insertInto('retention_kept')
        .values(emailIds.map((email_id) => ({ email_id })))
        .onConflict((oc) => oc.column('email_id').doNothing())
        .execute();
    },
    /** The kept ids after `afterId` that `limit` allows (by their emails' content), in order. */
    async keptAfter(afterId: string, limit: ChunkLimit): Promise<string[]> {
      const rows = await db
        .selectFrom('retention_kept as k')
        .leftJoin('emails as e', 'e.id', 'k.email_id')
        .select(['k.email_id', storedBytes('e.text_body', 'e.html_body', 'e.attachments_json').as('bytes')])
        .where('k.email_id', '>', afterId)
        .orderBy('k.email_id')
        .limit(limit.rows)
        .execute();
      return withinBytes(rows, limit.bytes).map((r) => r.email_id);
    },
    async forget(emailIds: string[]): Promise<void> {
      if (!emailIds.length) return;
      await db.deleteFrom('retention_kept').where('email_id', 'in', emailIds).execute();
    },
  };
}
export type RetentionRepository = ReturnType<typeof createRetentionRepository>;
