import { sql, type ExpressionBuilder, type Selectable, type Transaction, type Updateable } from 'kysely';
import type { Db } from '../db.js';
import { groupCommitOf } from '../group-commit.js';
import { containsIgnoringCase } from './text-search-sql.js';
import { isPostgres, transact, withDialect } from '../store-context.js';
import type { CampaignsTable, CampaignStatus, ContactsTable, Database } from '../tables/database.js';
import type { FilterNode } from './contact-filter-sql.js';
import { contactsInBook } from './contacts-scope.js';
import { boundedRead } from '../bounded-read.js';

export type CampaignRow = Selectable<CampaignsTable>;
export type CampaignChanges = Omit<Updateable<CampaignsTable>, 'id' | 'team_id' | 'created_at'>;

/**
 * Counters a recipient's email moves once each (campaign_recipients.counted remembers which).
 * opened and clicked are a person's; a machine's hit (core/tracking/machine-hits.ts, its event
 * data flagged `machine`) moves machine_opened or machine_clicked instead.
 */
export const COUNTED_STATUSES = ['sent', 'delivered', 'opened', 'clicked', 'bounced', 'hard_bounced', 'complained', 'machine_opened', 'machine_clicked'] as const;
export type CountedStatus = (typeof COUNTED_STATUSES)[number];
/** No email status of its own: a BOUNCED event whose bounce is Permanent (what live counting reads). */
export const HARD_BOUNCED = 'HARD_BOUNCED';
/** The email statuses the recount reads (an OPENED or CLICKED event flagged `machine` reads as MACHINE_OPENED or MACHINE_CLICKED). */
export const RECOUNTED_EVENT_STATUSES = ['SENT', 'DELIVERED', 'OPENED', 'CLICKED', 'BOUNCED', 'COMPLAINED'] as const;

/** Whose campaigns a query reaches: the team's, or only those from one domain of it (a key bound to that domain). */
export interface CampaignScope {
  teamId: number;
  domainId: number | null;
}

export function createCampaignsRepository(db: Db) {
  const sync = groupCommitOf(db);
  const live = () => db.selectFrom('campaigns').selectAll().where('deleted_at', 'is', null);
  /** The scope's live campaigns: a bound scope's query carries its domain, so no other domain's row is ever read. */
  const inScope = (scope: CampaignScope) => (eb: ExpressionBuilder<Database, 'campaigns'>) =>
    eb.and([
      eb('team_id', '=', scope.teamId),
      eb('deleted_at', 'is', null),
      ...(scope.domainId === null ? [] : [eb('domain_id', '=', scope.domainId)]),
    ]);

  /** Contacts that may receive the campaign: subscribed, not suppressed, not yet reached. */
  function eligible(c: CampaignRow, filter: FilterNode | null) {
    return contactsInBook(db, { teamId: c.team_id, bookId: c.contact_book_id }, filter)
      .where('contacts.subscribed', '=', 1)
      // Contacts added after the start are not in this campaign's audience.
      .$if(c.started_at !== null, (q) => q.where('contacts.created_at', '<=', c.started_at!))
      .where((eb) =>
        eb.not(
          eb.exists(
            eb.selectFrom('suppressions').select(sql`1`.as('x')).whereRef('suppressions.email', '=', 'contacts.email').where('suppressions.team_id', '=', c.team_id),
          ),
        ),
      );
  }

  /**
   * The campaign's book is there and not being deleted, and its segment unless it has none or
   * started with its filter; both of its team.
   */
  const audienceThere = (eb: ExpressionBuilder<Database, 'campaigns'>) =>
    eb.and([
      eb.exists(
        eb
          .selectFrom('contact_books')
          .select(sql`1`.as('x'))
          .whereRef('contact_books.id', '=', 'campaigns.contact_book_id')
          .whereRef('contact_books.team_id', '=', 'campaigns.team_id')
          .where('contact_books.deleting_since', 'is', null),
      ),
      eb.or([
        eb('campaigns.segment_id', 'is', null),
        eb('campaigns.segment_filters_json', 'is not', null),
        eb.exists(
          eb
            .selectFrom('segments')
            .select(sql`1`.as('x'))
            .whereRef('segments.id', '=', 'campaigns.segment_id')
            .whereRef('segments.team_id', '=', 'campaigns.team_id')
            .whereRef('segments.contact_book_id', '=', 'campaigns.contact_book_id'),
        ),
      ]),
    ]);

  return withDialect(db, 'campaigns', {
    /**
     * withAudience (a campaign created to send): stored only while its book is there and not
     * being deleted, and its segment (if any) is there in that book; false otherwise. Checked
     * in the inserting transaction: on SQLite that holds the one connection, so nothing commits
     * between the check and the insert; on PostgreSQL the two rows are held (FOR SHARE) until
     * the commit, so a delete (which locks its row first, then looks for campaigns that need
     * it) either finds this campaign or has committed before the check sees its row gone.
     */
    async insert(row: CampaignsTable, opts: { withAudience?: boolean } = {}): Promise<boolean> {
      if (!opts.withAudience) {
        await db.insertInto('campaigns').values(row).execute();
        return true;
      }
      return transact(db, async (trx) => {
        const pg = isPostgres(db);
        const book = await trx
          .selectFrom('contact_books')
          .select('deleting_since')
          .where('team_id', '=', row.team_id)
          .where('id', '=', row.contact_book_id)
          .$if(pg, (q) => q.forShare())
          .executeTakeFirst();
        if (!book || book.deleting_since !== null) return false;
        if (row.segment_id !== null && row.segment_filters_json === null) {
          const seg = await trx
            .selectFrom('segments')
            .select('contact_book_id')
            .where('team_id', '=', row.team_id)
            .where('id', '=', row.segment_id)
            .$if(pg, (q) => q.forShare())
            .executeTakeFirst();
          if (seg?.contact_book_id !== row.contact_book_id) return false;
        }
        await trx.insertInto('campaigns').values(row).execute();
        return true;
      });
    },
    async findById(scope: CampaignScope, id: string): Promise<CampaignRow | undefined> {
      return db.selectFrom('campaigns').selectAll().where(inScope(scope)).where('id', '=', id).executeTakeFirst();
    },
    /** For unsubscribe tokens only: a deleted campaign too, since its links sit in inboxes and must keep working. */
    async findByIdAnyTeam(id: string): Promise<CampaignRow | undefined> {
      return db.selectFrom('campaigns').selectAll().where('id', '=', id).executeTakeFirst();
    },
    async list(scope: CampaignScope, f: { status?: CampaignStatus; search?: string; offset: number; limit: number }): Promise<{ rows: CampaignRow[]; total: number }> {
      return boundedRead(db, async (rdb) => {
        let q = rdb.selectFrom('campaigns').where(inScope(scope));
        if (f.status) q = q.where('status', '=', f.status);
        if (f.search) q = q.where(containsIgnoringCase(rdb, ['name', 'subject'], f.search));
        // One after the other: they share the read's connection.
        const rows = await q.selectAll().orderBy('created_at', 'desc').orderBy('id', 'desc').limit(f.limit).offset(f.offset).execute();
        const total = await q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
        return { rows, total: Number(total.n) };
      });
    },
    /** Updates only when the campaign is in one of `fromStatuses` (checked in the statement). */
    /** withBody: only while the campaign has a body (a draft may lose it by an update meanwhile). */
    /**
     * withAudience: only while what it sends to is there: its contact book, and its segment
     * when it has not started (a started one keeps the segment's filter). On PostgreSQL the two
     * rows are held until the commit, so a delete of either (which locks its row first and then
     * looks for campaigns that need it) either finds this one scheduled or happens before it.
     */
    async update(id: string, changes: CampaignChanges, fromStatuses?: CampaignStatus[], opts: { withBody?: boolean; withAudience?: boolean } = {}): Promise<CampaignRow | undefined> {
      const write = (q: Db | Transaction<Database>) => {
        let u = q.updateTable('campaigns').set(changes).where('id', '=', id).where('deleted_at', 'is', null);
        if (fromStatuses) u = u.where('status', 'in', fromStatuses);
        if (opts.withBody) u = u.where('html', 'is not', null);
        if (opts.withAudience) u = u.where(audienceThere);
        return u.returningAll().executeTakeFirst();
      };
      if (!opts.withAudience || !isPostgres(db)) return write(db);
      return transact(db, async (trx) => {
        const c = await trx.selectFrom('campaigns').select(['team_id', 'contact_book_id', 'segment_id']).where('id', '=', id).executeTakeFirst();
        if (!c) return undefined;
        await trx.selectFrom('contact_books').select('id').where('team_id', '=', c.team_id).where('id', '=', c.contact_book_id).forShare().execute();
        if (c.segment_id) await trx.selectFrom('segments').select('id').where('team_id', '=', c.team_id).where('id', '=', c.segment_id).forShare().execute();
        return write(trx);
      });
    },
    /** SCHEDULED -> RUNNING, only while its time has come: a schedule request may have just moved it on. */
    async start(id: string, changes: CampaignChanges, nowIso: string): Promise<CampaignRow | undefined> {
      return db
        .updateTable('campaigns')
        .set({ ...changes, status: 'RUNNING' })
        .where('id', '=', id)
        .where('deleted_at', 'is', null)
        .where('status', '=', 'SCHEDULED')
        .where('scheduled_at', '<=', nowIso)
        .returningAll()
        .executeTakeFirst();
    },
    async softDelete(scope: CampaignScope, id: string, nowIso: string): Promise<CampaignRow | undefined> {
      return db.updateTable('campaigns').set({ deleted_at: nowIso, updated_at: nowIso }).where(inScope(scope)).where('id', '=', id).returningAll().executeTakeFirst();
    },
    /** Campaigns with work due: scheduled ones whose time came, running ones whose batch window passed. */
    async due(nowIso: string, nowMs: number): Promise<CampaignRow[]> {
      return live()
        .where((eb) =>
          eb.or([
            eb.and([eb('status', '=', 'SCHEDULED'), eb('scheduled_at', '<=', nowIso)]),
            eb.and([eb('status', '=', 'RUNNING'), eb.or([eb('next_batch_at', 'is', null), eb('next_batch_at', '<=', nowMs)])]),
          ]),
        )
        .orderBy('created_at')
        .execute();
    },
    /**
     * A next batch due later than one window from now was timed by a clock since set back (NTP
     * correcting a fast clock): it would wait out the jump too. It is due one window from now.
     */
    async clampNextBatches(nowMs: number, windowMs: number): Promise<number> {
      // Read first: the scheduler asks every second, and a write would lock SQLite each time.
      const any = await db
        .selectFrom('campaigns')
        .select('id')
        .where('deleted_at', 'is', null)
        .where('status', 'in', ['RUNNING', 'PAUSED'])
        .where('next_batch_at', '>', nowMs + windowMs)
        .limit(1)
        .executeTakeFirst();
      if (!any) return 0;
      const res = await db
        .updateTable('campaigns')
        .set({ next_batch_at: nowMs + windowMs })
        .where('deleted_at', 'is', null)
        .where('status', 'in', ['RUNNING', 'PAUSED'])
        .where('next_batch_at', '>', nowMs + windowMs)
        .executeTakeFirst();
      return Number(res.numUpdatedRows);
    },
    /**
     * Takes the campaign's next batch for `owner` until `untilMs`: only while it is still due
     * (checked again here: another node may have just sent it) and no live lease holds it. Nodes
     * that share a store each run the scheduler; the one whose update wins sends the batch.
     */
    async claimBatch(id: string, owner: string, nowIso: string, nowMs: number, untilMs: number): Promise<CampaignRow | undefined> {
      return db
        .updateTable('campaigns')
        .set({ batch_owner: owner, batch_lease_until: untilMs })
        .where('id', '=', id)
        .where('deleted_at', 'is', null)
        .where((eb) => eb.or([eb('batch_lease_until', 'is', null), eb('batch_lease_until', '<', nowMs)]))
        .where((eb) =>
          eb.or([
            eb.and([eb('status', '=', 'SCHEDULED'), eb('scheduled_at', '<=', nowIso)]),
            eb.and([eb('status', '=', 'RUNNING'), eb.or([eb('next_batch_at', 'is', null), eb('next_batch_at', '<=', nowMs)])]),
          ]),
        )
        .returningAll()
        .executeTakeFirst();
    },
    async releaseAllBatches(): Promise<number> {
      const res = await db.updateTable('campaigns').set({ batch_owner: null, batch_lease_until: null }).where('batch_owner', 'is not', null).executeTakeFirst();
      return Number(res.numUpdatedRows);
    },
    /** Extends `owner`'s batch lease; false when the batch is no longer its own (taken by another node, or freed). */
    async renewBatch(id: string, owner: string, untilMs: number): Promise<boolean> {
      const res = await db.updateTable('campaigns').set({ batch_lease_until: untilMs }).where('id', '=', id).where('batch_owner', '=', owner).executeTakeFirst();
      return res.numUpdatedRows > 0n;
    },
    async releaseBatch(id: string, owner: string): Promise<void> {
      await db.updateTable('campaigns').set({ batch_owner: null, batch_lease_until: null }).where('id', '=', id).where('batch_owner', '=', owner).execute();
    },
    async countEligible(c: CampaignRow, filter: FilterNode | null): Promise<number> {
      const r = await eligible(c, filter)
        .where((eb) => eb.not(eb.exists(eb.selectFrom('campaign_recipients').select(sql`1`.as('x')).where('campaign_recipients.campaign_id', '=', c.id).whereRef('campaign_recipients.contact_id', '=', 'contacts.id'))))
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .executeTakeFirstOrThrow();
      return Number(r.n);
    },
    /** The next contacts after the cursor, in id order. Already-reached ones are skipped by the insert itself. */
    async nextContacts(c: CampaignRow, filter: FilterNode | null, limit: number): Promise<Selectable<ContactsTable>[]> {
      let q = eligible(c, filter).selectAll('contacts');
      if (c.cursor) q = q.where('contacts.id', '>', c.cursor);
      return q.orderBy('contacts.id').limit(limit).execute();
    },
    async countReached(campaignId: string): Promise<number> {
      const r = await db.selectFrom('campaign_recipients').select((eb) => eb.fn.countAll<number>().as('n')).where('campaign_id', '=', campaignId).executeTakeFirstOrThrow();
      return Number(r.n);
    },
    /** Whether any email of the campaign is still on its way (not yet delivered, bounced or ended otherwise). */
    async hasEmailsUnderway(campaignId: string): Promise<boolean> {
      const r = await db
        .selectFrom('campaign_recipients')
        .innerJoin('emails', 'emails.id', 'campaign_recipients.email_id')
        .select('campaign_recipients.email_id')
        .where('campaign_recipients.campaign_id', '=', campaignId)
        .where('emails.latest_status', 'in', ['SCHEDULED', 'QUEUED', 'SENT', 'DELIVERY_DELAYED'])
        .limit(1)
        .executeTakeFirst();
      return r !== undefined;
    },
    /** Counts a status of a campaign email once; returns whether it counted. */
    async countStatus(emailId: string, status: CountedStatus): Promise<boolean> {
      return sync.write(() => {
        const rec = sync.sqlite.prepare('select campaign_id, counted from campaign_recipients where email_id = ?').get(emailId) as { campaign_id: string; counted: string } | undefined;
        if (!rec || rec.counted.split(',').includes(status)) return false;
        sync.sqlite.prepare('update campaign_recipients set counted = ? where email_id = ?').run(rec.counted ? `${rec.counted},${status}` : status, emailId);
        // The column name comes from the closed COUNTED_STATUSES list, never from input.
        sync.sqlite.prepare(`update campaigns set ${status} = ${status} + 1 where id = ?`).run(rec.campaign_id);
        return true;
      });
    },
    /**
     * Counts, once each, the statuses campaign emails reached (their email_events) that their
     * recipient rows have not counted. Live counting (countStatus) runs after the status was
     * committed, so a process killed in between loses that count; this repairs it. Works on
     * the recipients after rowid `after`, `limit` of them; `last` is null when none are left.
     */
    async recountMissed(after: number, limit: number): Promise<{ last: number | null; added: number }> {
      const reachable = RECOUNTED_EVENT_STATUSES.map((s) => `'${s}'`).join(', ');
      return sync.write(() => {
        const rows = sync.sqlite
          .prepare(
            `select cr.rowid as rid, cr.campaign_id, cr.email_id, cr.counted,
               (select group_concat(distinct case when e.status in ('OPENED', 'CLICKED') and json_extract(e.data_json, '$.machine') = 1 then 'MACHINE_' || e.status else e.status end)
                  from email_events e where e.email_id = cr.email_id and e.status in (${reachable})) as reached,
               exists (select 1 from email_events e where e.email_id = cr.email_id and e.status = 'BOUNCED' and json_extract(e.data_json, '$.bounce.type') = 'Permanent') as hard
             from campaign_recipients cr where cr.rowid > ? order by cr.rowid limit ?`,
          )
          .all(after, limit) as { rid: number; campaign_id: string; email_id: string; counted: string; reached: string | null; hard: number }[];
        let added = 0;
        for (const r of rows) {
          const counted = r.counted ? r.counted.split(',') : [];
          const reached = [...(r.reached ? r.reached.split(',') : []), ...(r.hard ? [HARD_BOUNCED] : [])];
          const missing = reached.map((s) => s.toLowerCase() as CountedStatus).filter((s) => COUNTED_STATUSES.includes(s) && !counted.includes(s));
          if (!missing.length) continue;
          sync.sqlite.prepare('update campaign_recipients set counted = ? where email_id = ?').run([...counted, ...missing].join(','), r.email_id);
          // Column names come from the closed COUNTED_STATUSES list, never from input.
          for (const s of missing) sync.sqlite.prepare(`update campaigns set ${s} = ${s} + 1 where id = ?`).run(r.campaign_id);
          added += missing.length;
        }
        return { last: rows.length < limit ? null : rows[rows.length - 1]!.rid, added };
      });
    },
    async recipient(campaignId: string, contactId: string) {
      return db.selectFrom('campaign_recipients').selectAll().where('campaign_id', '=', campaignId).where('contact_id', '=', contactId).executeTakeFirst();
    },
    /** The email a campaign sent a contact: its address and subject (the recipient row outlives the contact). */
    async recipientEmail(campaignId: string, contactId: string): Promise<{ address: string | undefined; subject: string | null } | undefined> {
      const row = await db
        .selectFrom('campaign_recipients')
        .innerJoin('emails', 'emails.id', 'campaign_recipients.email_id')
        .select(['emails.to_json', 'emails.subject'])
        .where('campaign_recipients.campaign_id', '=', campaignId)
        .where('campaign_recipients.contact_id', '=', contactId)
        .executeTakeFirst();
      return row && { address: (JSON.parse(row.to_json) as string[])[0], subject: row.subject };
    },
    /** Counts an unsubscribe once per recipient. */
    async countUnsubscribe(campaignId: string, contactId: string): Promise<boolean> {
      return sync.write(() => {
        const changed = sync.sqlite.prepare('update campaign_recipients set unsubscribed = 1 where campaign_id = ? and contact_id = ? and unsubscribed = 0').run(campaignId, contactId).changes;
        if (changed) sync.sqlite.prepare('update campaigns set unsubscribed = unsubscribed + 1 where id = ?').run(campaignId);
        return changed > 0;
      });
    },
  });
}
export type CampaignsRepository = ReturnType<typeof createCampaignsRepository>;
