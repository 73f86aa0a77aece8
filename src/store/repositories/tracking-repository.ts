import type { Db } from '../db.js';

export function createTrackingRepository(db: Db) {
  return {
    /** Live domains that use this host as their tracking domain (normally zero or one). */
    async domainIdsForTrackingHost(host: string): Promise<number[]> {
      const rows = await db.selectFrom('domains').select('id').where('tracking_domain', '=', host).where('deleted_at', 'is', null).execute();
      return rows.map((r) => r.id);
    },
  };
}
export type TrackingRepository = ReturnType<typeof createTrackingRepository>;
