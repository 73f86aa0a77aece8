import { sql, type Kysely } from 'kysely';
import type { Database } from '../tables/database.js';
import { COUNTED_STATUSES, HARD_BOUNCED, RECOUNTED_EVENT_STATUSES, type CampaignsRepository, type CountedStatus } from '../repositories/campaigns-repository.js';
import { pgPoolOf } from './pg-context.js';
import { clientExec } from './pg-exec.js';
import { transact } from '../store-context.js';

/*
 * Campaign counters on PostgreSQL. Several nodes may count the same email's statuses at once
 * (live counting on one, the start-up recount on another): every counter moves only with the
 * conditional update of the recipient's `counted` list in the same statement, and a second
 * counter of the same status finds it already listed once the first commits.
 */

function checkStatus(status: string): CountedStatus {
  // The column name is spliced into the statement: only the closed list is ever accepted.
  if (!(COUNTED_STATUSES as readonly string[]).includes(status)) throw new Error(`not a counted status: ${status}`);
  return status as CountedStatus;
}


export function pgCampaigns(db: Kysely<Database>): Partial<CampaignsRepository> {
  const exec = clientExec(pgPoolOf(db));
  return {
    async countStatus(emailId: string, status: CountedStatus): Promise<boolean> {
      const col = checkStatus(status);
      const [r] = await exec.query<{ n: number }>(
        `with rec as (update campaign_recipients set counted = case when counted = '' then $2 else counted || ',' || $2 end
                      where email_id = $1 and not ($2 = any(string_to_array(counted, ','))) returning campaign_id),
              c as (update campaigns set ${col} = ${col} + 1 where id in (select campaign_id from rec))
         select count(*) as n from rec`,
        [emailId, col],
      );
      return (r?.n ?? 0) > 0;
    },

    async countUnsubscribe(campaignId: string, contactId: string): Promise<boolean> {
      const [r] = await exec.query<{ n: number }>(
        `with rec as (update campaign_recipients set unsubscribed = 1 where campaign_id = $1 and contact_id = $2 and unsubscribed = 0 returning campaign_id),
              c as (update campaigns set unsubscribed = unsubscribed + 1 where id in (select campaign_id from rec))
         select count(*) as n from rec`,
        [campaignId, contactId],
      );
      return (r?.n ?? 0) > 0;
    },

    async recountMissed(after: number, limit: number): Promise<{ last: number | null; added: number }> {
      const reachable = [...RECOUNTED_EVENT_STATUSES];
      const rows = await exec.query<{ rid: number; campaign_id: string; contact_id: string; counted: string; reached: string[]; hard: boolean }>(
        `select cr.rowid as rid, cr.campaign_id, cr.contact_id, cr.counted,
           array(select distinct case when e.status in ('OPENED', 'CLICKED') and (e.data_json::jsonb ->> 'machine') = 'true' then 'MACHINE_' || e.status else e.status end
                 from email_events e where e.email_id = cr.email_id and e.status = any($2::text[])) as reached,
           exists (select 1 from email_events e where e.email_id = cr.email_id and e.status = 'BOUNCED' and (e.data_json::jsonb -> 'bounce' ->> 'type') = 'Permanent') as hard
         from campaign_recipients cr where cr.rowid > $1 order by cr.rowid limit $3`,
        [after, reachable, limit],
      );
      let added = 0;
      for (const r of rows) {
        const counted = r.counted ? r.counted.split(',') : [];
        const reached = [...r.reached, ...(r.hard ? [HARD_BOUNCED] : [])];
        const missing = reached.map((s) => s.toLowerCase() as CountedStatus).filter((s) => COUNTED_STATUSES.includes(s) && !counted.includes(s));
        if (!missing.length) continue;
        added += await transact(db, async (trx) => {
          // Compare-and-set: a live counter that moved the list meanwhile wins, and this row is left to it.
          const moved = await trx
            .updateTable('campaign_recipients')
            .set({ counted: [...counted, ...missing].join(',') })
            .where('campaign_id', '=', r.campaign_id)
            .where('contact_id', '=', r.contact_id)
            .where('counted', '=', r.counted)
            .executeTakeFirst();
          if (moved.numUpdatedRows === 0n) return 0;
          for (const s of missing) {
            const col = checkStatus(s);
            await sql`update campaigns set ${sql.ref(col)} = ${sql.ref(col)} + 1 where id = ${r.campaign_id}`.execute(trx);
          }
          return missing.length;
        });
      }
      const lastRow = rows[rows.length - 1];
      return { last: rows.length < limit || !lastRow ? null : lastRow.rid, added };
    },
  };
}
