import { sql, type Selectable } from 'kysely';
import type { Db } from '../db.js';
import { groupCommitOf } from '../group-commit.js';
import { isPostgres, transact, withDialect } from '../store-context.js';
import type { BounceNoticeRecipientsTable } from '../tables/database.js';

export type BounceNoticeRecipientRow = Selectable<BounceNoticeRecipientsTable>;

/** A recipient that ended, for its email's bounce notice (written only if the email was submitted with a sender). */
export interface NewBounceNoticeRecipient {
  emailId: string;
  recipient: string;
  reply: string | null;
  smtpCode: number | null;
  mxHost: string | null;
  reason: string;
  status: string | null;
  expired: boolean;
  atMs: number;
}

/** An email's rows claimed by one node: one notice. */
export interface ClaimedBounceNotice {
  emailId: string;
  teamId: number;
  rows: BounceNoticeRecipientRow[];
}

const num = (v: unknown): number => Number(v);
const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

/** PostgreSQL answers bigint columns as strings. */
export function bounceNoticeRowOf(r: Record<string, unknown>): BounceNoticeRecipientRow {
  const row = r as unknown as BounceNoticeRecipientRow;
  return {
    ...row,
    id: num(row.id),
    team_id: num(row.team_id),
    smtp_code: numOrNull(row.smtp_code),
    expired: num(row.expired),
    created_at: num(row.created_at),
    next_attempt_at: num(row.next_attempt_at),
    attempts: num(row.attempts),
    first_failure_at: numOrNull(row.first_failure_at),
    lease_until: numOrNull(row.lease_until),
  };
}

export function createBounceNoticesRepository(db: Db) {
  // The rows are written inside the transaction that records the outcome (a group-commit write
  // fn or a Kysely transaction: core/events.ts), so synchronously on the raw handle; PostgreSQL
  // queues them and writes them before that transaction commits (store/pg/pg-bounce-notices.ts).
  type Statements = ReturnType<typeof prepare>;
  const prepare = () => {
    const { sqlite } = groupCommitOf(db);
    return {
      sqlite,
      // Only mail that came in by submission with a sender to tell ('' is MAIL FROM:<>).
      insert: sqlite.prepare<[string, string | null, number | null, string | null, string, string | null, number, number, number, string]>(
        `insert into bounce_notice_recipients (email_id, team_id, recipient, reply, smtp_code, mx_host, reason, status, expired, created_at, next_attempt_at, attempts)
         select id, team_id, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0 from emails where id = ? and submitted_by <> ''`,
      ),
    };
  };
  let prepared: Statements | undefined;
  const stmts = () => (prepared ??= prepare());

  /** Rows of `ids` still held by `owner` (a lease another node took over after it ran out is not touched). */
  const owned = (ids: readonly number[], owner: string) => db.updateTable('bounce_notice_recipients').where('id', 'in', [...ids]).where('lease_owner', '=', owner);

  return withDialect(db, 'bounceNotices', {
    /** Writes the rows into the transaction the caller has open (the outcome's); no statement of its own otherwise. */
    addInOpenTransaction(rows: readonly NewBounceNoticeRecipient[]): void {
      const s = stmts();
      if (!s.sqlite.inTransaction) throw new Error('addInOpenTransaction: no transaction is open');
      for (const r of rows) s.insert.run(r.recipient, r.reply, r.smtpCode, r.mxHost, r.reason, r.status, r.expired ? 1 : 0, r.atMs, r.atMs, r.emailId);
    },

    /**
     * Leases the due rows of up to `limit` emails whose notice is ready: none of the email's
     * deliveries is due or being attempted, or its first row waited `maxWaitMs`; an email part
     * of which another node holds is left to it. On PostgreSQL the rows are locked in one order
     * first, so two nodes never split an email's rows between them.
     */
    async claimReady(owner: string, nowMs: number, leaseMs: number, maxWaitMs: number, limit: number): Promise<ClaimedBounceNotice[]> {
      return transact(db, async (trx) => {
        const picked = await sql<{ email_id: string }>`
          select b.email_id from bounce_notice_recipients b
          where b.next_attempt_at <= ${nowMs} and (b.lease_until is null or b.lease_until <= ${nowMs})
            and not exists (select 1 from bounce_notice_recipients o where o.email_id = b.email_id and o.lease_until > ${nowMs})
          group by b.email_id
          having min(b.created_at) <= ${nowMs - maxWaitMs}
            or not exists (select 1 from deliveries d where d.email_id = b.email_id and d.state = 'queued' and (d.lease_owner is not null or d.next_attempt_at <= ${nowMs}))
          order by min(b.next_attempt_at)
          limit ${limit}`.execute(trx);
        const emailIds = picked.rows.map((r) => r.email_id);
        if (!emailIds.length) return [];
        if (isPostgres(db)) await trx.selectFrom('bounce_notice_recipients').select('id').where('email_id', 'in', emailIds).orderBy('id').forUpdate().execute();
        const rows = await trx
          .updateTable('bounce_notice_recipients as b')
          .set({ lease_owner: owner, lease_until: nowMs + leaseMs })
          .where('b.email_id', 'in', emailIds)
          .where('b.next_attempt_at', '<=', nowMs)
          .where((eb) => eb.or([eb('b.lease_until', 'is', null), eb('b.lease_until', '<=', nowMs)]))
          .where((eb) => eb.not(eb.exists(eb.selectFrom('bounce_notice_recipients as o').select('o.id').whereRef('o.email_id', '=', 'b.email_id').where('o.lease_until', '>', nowMs))))
          .returningAll()
          .execute();
        const byEmail = new Map<string, ClaimedBounceNotice>();
        for (const raw of rows) {
          const row = bounceNoticeRowOf(raw);
          const claim = byEmail.get(row.email_id) ?? { emailId: row.email_id, teamId: row.team_id, rows: [] };
          claim.rows.push(row);
          byEmail.set(row.email_id, claim);
        }
        for (const c of byEmail.values()) c.rows.sort((a, b) => a.id - b.id);
        return [...byEmail.values()];
      });
    },

    /** Extends the lease of rows whose notice is still being sent. */
    async renew(owner: string, ids: readonly number[], untilMs: number): Promise<void> {
      if (ids.length) await owned(ids, owner).set({ lease_until: untilMs }).execute();
    },

    /** Sent or given up on. */
    async remove(owner: string, ids: readonly number[]): Promise<void> {
      if (ids.length) await db.deleteFrom('bounce_notice_recipients').where('id', 'in', [...ids]).where('lease_owner', '=', owner).execute();
    },

    /** Not sent for now: due again at nextAttemptAt. */
    async reschedule(owner: string, ids: readonly number[], next: { nextAttemptAt: number; attempts: number; firstFailureAt: number }): Promise<void> {
      if (!ids.length) return;
      await owned(ids, owner)
        .set({ lease_owner: null, lease_until: null, next_attempt_at: next.nextAttemptAt, attempts: next.attempts, first_failure_at: next.firstFailureAt })
        .execute();
    },

    /** Not attempted (stopping): claimable again at once. */
    async release(owner: string, ids: readonly number[]): Promise<void> {
      if (ids.length) await owned(ids, owner).set({ lease_owner: null, lease_until: null }).execute();
    },

    /** Notices waiting (emails with rows): never tried yet, or deferred by the sender's MX (the metrics gauge). */
    async countsForMetrics(): Promise<{ waiting: number; deferred: number }> {
      const rows = await db
        .selectFrom('bounce_notice_recipients')
        .select([sql<number>`case when attempts > 0 then 1 else 0 end`.as('deferred'), sql<number>`count(distinct email_id)`.as('n')])
        .groupBy(sql`case when attempts > 0 then 1 else 0 end`)
        .execute();
      const count = (deferred: boolean) => Number(rows.find((r) => Number(r.deferred) === (deferred ? 1 : 0))?.n ?? 0);
      return { waiting: count(false), deferred: count(true) };
    },

    /** At start: the leases a previous run of `owner` left (every owner's, on a lone node). */
    async releaseLeftBehind(owner: string | null): Promise<number> {
      let q = db.updateTable('bounce_notice_recipients').set({ lease_owner: null, lease_until: null }).where('lease_owner', 'is not', null);
      if (owner !== null) q = q.where('lease_owner', '=', owner);
      const res = await q.executeTakeFirst();
      return Number(res.numUpdatedRows);
    },
  });
}

export type BounceNoticesRepository = ReturnType<typeof createBounceNoticesRepository>;
