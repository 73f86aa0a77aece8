import type { Db } from '../db.js';

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
    /** Up to `limit` kept ids after `afterId`, in order. */
    async keptAfter(afterId: string, limit: number): Promise<string[]> {
      const rows = await db.selectFrom('retention_kept').select('email_id').where('email_id', '>', afterId).orderBy('email_id').limit(limit).execute();
      return rows.map((r) => r.email_id);
    },
    async forget(emailIds: string[]): Promise<void> {
      if (!emailIds.length) return;
      await db.deleteFrom('retention_kept').where('email_id', 'in', emailIds).execute();
    },
  };
}
export type RetentionRepository = ReturnType<typeof createRetentionRepository>;
