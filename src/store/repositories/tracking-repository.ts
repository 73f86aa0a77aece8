import type { Db } from '../db.js';

export function createTrackingRepository(db: Db) {
  return {
    /** Live domains that use this host as their tracking domain (normally zero or one). */
    async domainIdsForTrackingHost(host: string): Promise<number[]> {
      const rows = await db.selectFrom('domains').select('id').where('tracking_domain', '=', host).where('deleted_at', 'is', null).execute();
      return rows.map((r) => r.id);
    },

    /** When the email was last DELIVERED (to any recipient) at or before `nowIso`. */
    async lastDeliveredAt(emailId: string, nowIso: string): Promise<string | null> {
      const row = await db
        .selectFrom('email_events')
        .select((eb) => eb.fn.max('created_at').as('at'))
        .where('email_id', '=', emailId)
        .where('status', '=', 'DELIVERED')
        .where('created_at', '<=', nowIso)
        .executeTakeFirst();
      return (row?.at as string | null | undefined) ?? null;
    },

    /** The URLs of the email's clicks recorded in [sinceIso, nowIso]. */
    async clickedUrlsSince(emailId: string, sinceIso: string, nowIso: string): Promise<string[]> {
      const rows = await db
        .selectFrom('email_events')
        .select('data_json')
        .where('email_id', '=', emailId)
        .where('status', '=', 'CLICKED')
        .where('created_at', '>=', sinceIso)
        .where('created_at', '<=', nowIso)
        .execute();
      return rows.flatMap((r) => {
        const url = r.data_json ? (JSON.parse(r.data_json) as { url?: unknown }).url : undefined;
        return typeof url === 'string' ? [url] : [];
      });
    },
  };
}
export type TrackingRepository = ReturnType<typeof createTrackingRepository>;
