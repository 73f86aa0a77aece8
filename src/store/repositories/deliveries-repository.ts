import type { Insertable, Transaction } from 'kysely';
import type { Db } from '../db.js';
import type { Database, DeliveryState } from '../tables/database.js';
import type { DeliveryAttemptsTable } from '../tables/operations-tables.js';
import { type DeliveryRow } from './emails-repository.js';
import { groupCommitOf, type GroupCommitStore } from '../group-commit.js';
import { HELD_BY_SUSPENSION, parkHeldSync } from './suspension-sql.js';
import { transact, withDialect } from '../store-context.js';

/** How often the claim parks held rows (see claimDue). */
export const PARK_INTERVAL_MS = 1000;

export type { DeliveryRow };

export interface DeliveryUpdate {
  id: number;
  state: DeliveryState;
  attempts: number;
  nextAttemptAt: number;
  code: number | null;
  response: string | null;
  mxHost: string | null;
}

export interface StatusEventWrite {
  emailId: string;
  status: string;
  rank: number;
  data: unknown;
  at: string;
  /** The delivery this event reports on: with applyResults it is written only if that row's update was. */
  deliveryId?: number;
}

export interface ResultsWrite {
  /** Emails whose first attempt this is: SENT is recorded once (sent_at is the guard). */
  sent?: { emailIds: string[]; at: string; rank: number };
  updates: DeliveryUpdate[];
  events: StatusEventWrite[];
  suppressions: { teamId: number; email: string; reason: 'HARD_BOUNCE' | 'COMPLAINT'; source: string; at: string; deliveryId?: number }[];
  /** The operator's trace of the sessions this attempt used, stored with its results. */
  traces?: Omit<Insertable<DeliveryAttemptsTable>, 'id'>[];
  /**
   * The lease the rows were taken under: a row leased by another owner since (a node that took
   * this one for dead claimed it) is left to that owner, its lease and its attempt.
   */
  owner?: string;
}

/** What an asynchronous report (a DSN received after our 250) says about one delivery. */
export interface ReportDeliveryUpdate {
  id: number;
  /** New state, applied only while the row is in one of `fromStates`; omitted = keep the state. */
  state?: DeliveryState;
  fromStates?: DeliveryState[];
  code: number | null;
  response: string;
  at: string;
}

/**
 * Applies a report to a delivery row inside the caller's transaction. A permanent DSN
 * after a 250 is normal (the remote accepted, then could not deliver), so `delivered`
 * may become `bounced`; a row we are still retrying ourselves keeps its state.
 */
export async function applyReportToDelivery(trx: Transaction<Database>, u: ReportDeliveryUpdate): Promise<void> {
  const set = { last_code: u.code, last_response: u.response.slice(0, 2000), updated_at: u.at };
  if (u.state && u.fromStates?.length) {
    const moved = await trx.updateTable('deliveries').set({ ...set, state: u.state }).where('id', '=', u.id).where('state', 'in', u.fromStates).executeTakeFirst();
    if (moved.numUpdatedRows > 0n) return;
  }
  await trx.updateTable('deliveries').set(set).where('id', '=', u.id).execute();
}

function insertEventSync(sqlite: GroupCommitStore['sqlite'], e: StatusEventWrite): void {
  sqlite
    .prepare('insert into email_events (email_id, status, data_json, created_at) values (?, ?, ?, ?)')
    .run(e.emailId, e.status, e.data === undefined || e.data === null ? null : JSON.stringify(e.data), e.at);
}

/** Moves latestStatus forward only (by rank), to the status of `e`. */
function bumpSync(sqlite: GroupCommitStore['sqlite'], e: StatusEventWrite): void {
  sqlite.prepare('update emails set latest_status = ?, status_rank = ?, updated_at = ? where id = ? and status_rank < ?').run(e.status, e.rank, e.at, e.emailId, e.rank);
}

/**
 * Records the first attempt (sent_at is the guard: true only the first time) and, in the same
 * statement, moves latestStatus forward to `top`'s status as bumpSync would.
 */
function markSentSync(sqlite: GroupCommitStore['sqlite'], emailId: string, sentAt: string, top: StatusEventWrite): boolean {
  return (
    sqlite
      .prepare(
        `update emails set sent_at = ?,
           latest_status = case when status_rank < ? then ? else latest_status end,
           updated_at = case when status_rank < ? then ? else updated_at end,
           status_rank = max(status_rank, ?)
         where id = ? and sent_at is null`,
      )
      .run(sentAt, top.rank, top.status, top.rank, top.at, top.rank, emailId).changes > 0
  );
}

/**
 * Attempt results wait up to this long to share a commit with others (they arrive one SMTP
 * reply at a time). Nobody is waiting on them but the engine's in-flight slot, and 20 ms
 * against hundreds of slots costs no throughput.
 */
export const RESULTS_COALESCE_MS = 20;

export function createDeliveriesRepository(db: Db) {
  const sync = groupCommitOf(db);
  let lastParkMs = 0;
  return withDialect(db, 'deliveries', {
    /**
     * Claims due deliveries with a lease in one UPDATE ... RETURNING (architecture.md, House rules 6), so two
     * workers (or two nodes sharing a database later) never take the same row; a lease
     * whose holder died expires and the row is claimed again.
     */
    async claimDue(owner: string, nowMs: number, leaseMs: number, limit: number, skipDomains: readonly string[] = []): Promise<DeliveryRow[]> {
      // Hot path: a prepared UPDATE ... RETURNING over the partial index of due, unleased rows.
      // skipDomains: destinations that already have all the work in flight they may have; their
      // rows stay unleased (and are skipped in the index walk) so other destinations' mail moves.
      // The list is one JSON parameter, so this stays one prepared statement.
      // Mail an operator suspended is never claimed; once a second, held rows that came due are
      // parked at the suspension's end so later walks of the index do not meet them again.
      return sync.write(() => {
        if (nowMs - lastParkMs >= PARK_INTERVAL_MS || nowMs < lastParkMs) {
          lastParkMs = nowMs;
          parkHeldSync(sync.sqlite, nowMs);
        }
        return sync.sqlite
          .prepare(
            `update deliveries set lease_owner = ?, lease_until = ?
             where id in (select d.id from deliveries d where d.state = 'queued' and d.lease_owner is null and d.next_attempt_at <= ?
                          and d.rcpt_domain not in (select value from json_each(?)) and not ${HELD_BY_SUSPENSION}
                          order by d.next_attempt_at limit ?)
             returning *`,
          )
          .all(owner, nowMs + leaseMs, nowMs, JSON.stringify(skipDomains), nowMs, limit) as DeliveryRow[];
      });
    },

    /** Leases whose holder died (or hung past the lease) become claimable again. */
    async releaseExpiredLeases(nowMs: number): Promise<number> {
      return sync.write(
        () => sync.sqlite.prepare(`update deliveries set lease_owner = null, lease_until = null where lease_owner is not null and lease_until < ?`).run(nowMs).changes,
      );
    },

    /** Earliest due time among queued, unleased deliveries (to sleep until then). */
    async nextDueAt(): Promise<number | null> {
      const r = await db
        .selectFrom('deliveries')
        .select((eb) => eb.fn.min('next_attempt_at').as('due'))
        .where('state', '=', 'queued')
        .where('lease_owner', 'is', null)
        .executeTakeFirst();
      return r?.due === null || r?.due === undefined ? null : Number(r.due);
    },

    /** On start with SQLite (one node per database file): every lease belonged to a dead process. */
    async releaseAllLeases(): Promise<number> {
      const res = await db.updateTable('deliveries').set({ lease_owner: null, lease_until: null }).where('lease_owner', 'is not', null).executeTakeFirst();
      return Number(res.numUpdatedRows);
    },

    /** Leases one queued delivery that nobody holds (an operator's purge); false when it is not queued or is being attempted. */
    async takeLease(id: number, owner: string, untilMs: number): Promise<boolean> {
      const res = await db
        .updateTable('deliveries')
        .set({ lease_owner: owner, lease_until: untilMs })
        .where('id', '=', id)
        .where('state', '=', 'queued')
        .where('lease_owner', 'is', null)
        .executeTakeFirst();
      return res.numUpdatedRows > 0n;
    },

    /**
     * Puts claimed rows back unattempted until `untilMs`, with why (traffic shaping: a hold, the
     * rate, the warm-up budget). No attempt is counted and no event written. Only rows `owner`
     * still holds: a lease lost meanwhile may be another node's now.
     */
    async parkLeases(ids: number[], owner: string, untilMs: number, reason: string, nowIso: string): Promise<void> {
      if (!ids.length) return;
      await sync.write(() => {
        sync.sqlite
          .prepare(
            `update deliveries set lease_owner = null, lease_until = null, next_attempt_at = ?, held_reason = ?, updated_at = ?
             where id in (select value from json_each(?)) and state = 'queued' and lease_owner = ?`,
          )
          .run(untilMs, reason, nowIso, JSON.stringify(ids), owner);
      });
    },

    /** Puts back queued rows `owner` holds; a row it no longer holds (another node took it since) keeps that lease. */
    async releaseLeases(ids: number[], owner: string): Promise<void> {
      if (!ids.length) return;
      await db.updateTable('deliveries').set({ lease_owner: null, lease_until: null }).where('id', 'in', ids).where('lease_owner', '=', owner).where('state', '=', 'queued').execute();
    },

    /**
     * Extends to `untilMs` the leases `owner` holds on these queued rows (attempts still under
     * way); a row recorded, released or taken by another node since is left as it is.
     */
    async renewLeases(ids: number[], owner: string, untilMs: number): Promise<number> {
      if (!ids.length) return 0;
      return sync.write(
        () =>
          sync.sqlite
            .prepare(`update deliveries set lease_until = ? where id in (select value from json_each(?)) and lease_owner = ? and state = 'queued'`)
            .run(untilMs, JSON.stringify(ids), owner).changes,
      );
    },

    /**
     * Writes one attempt's results, status events and suppressions atomically (group-committed).
     * A row is updated only while it is still queued, and not leased by another owner than
     * `w.owner` (a node that took this one for dead claimed it): one closed meanwhile (purged by
     * an operator, dropped as suppressed) keeps that outcome, one claimed by another node its
     * lease, and the late result's events and suppressions (those naming its deliveryId) are not
     * written either. `inTransaction` runs
     * last inside the same transaction with the emails newly marked SENT and the ids of the
     * rows updated (the transactional outbox); it may run more than once, like the write itself.
     */
    async applyResults(w: ResultsWrite, nowIso: string, inTransaction?: (newlySent: string[], applied: ReadonlySet<number>) => void): Promise<string[]> {
      const { sqlite } = sync;
      return sync.write(() => {
        const applied = new Set<number>();
        for (const u of w.updates) {
          const res = sqlite
            .prepare(
              `update deliveries set state = ?, attempts = ?, next_attempt_at = ?, last_code = ?, last_response = ?, mx_host = ?,
               lease_owner = null, lease_until = null, held_reason = null, updated_at = ?
               where id = ? and state = 'queued' and (? is null or lease_owner is null or lease_owner = ?)`,
            )
            .run(u.state, u.attempts, u.nextAttemptAt, u.code, u.response, u.mxHost, nowIso, u.id, w.owner ?? null, w.owner ?? null);
          if (res.changes > 0) applied.add(u.id);
        }
        const stillOpen = (x: { deliveryId?: number }) => x.deliveryId === undefined || applied.has(x.deliveryId);
        const events = w.events.filter(stillOpen);
        // Each email's status moves once, to its highest-ranked event of the write (the first of
        // equal ranks): what one update per event, in order, would leave. An attempt's SENT and
        // DELIVERED cost one statement on the email instead of three with the guard.
        const newlySent: string[] = [];
        if (w.sent) {
          for (const id of w.sent.emailIds) {
            const sent: StatusEventWrite = { emailId: id, status: 'SENT', rank: w.sent.rank, data: null, at: w.sent.at };
            let best = sent;
            for (const e of events) if (e.emailId === id && e.rank > best.rank) best = e;
            if (markSentSync(sqlite, id, w.sent.at, best)) {
              newlySent.push(id);
              insertEventSync(sqlite, sent);
            }
          }
        }
        const top = new Map<string, StatusEventWrite>();
        for (const e of events) {
          insertEventSync(sqlite, e);
          const t = top.get(e.emailId);
          if (!t || e.rank > t.rank) top.set(e.emailId, e);
        }
        // a newly sent email's status moved with its guard already
        for (const e of top.values()) if (!newlySent.includes(e.emailId)) bumpSync(sqlite, e);
        for (const x of w.suppressions) {
          if (!stillOpen(x)) continue;
          sqlite
            .prepare('insert into suppressions (team_id, email, reason, source, created_at) values (?, ?, ?, ?, ?) on conflict (team_id, email) do nothing')
            .run(x.teamId, x.email, x.reason, x.source, x.at);
        }
        for (const t of w.traces ?? []) {
          sqlite
            .prepare(
              `insert into delivery_attempts (email_id, team_id, rcpt_domain, started_at, mx_host, address, source, source_name, tls_json, results_json, transcript_json)
               values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
            )
            .run(t.email_id, t.team_id, t.rcpt_domain, t.started_at, t.mx_host ?? null, t.address ?? null, t.source ?? null, t.source_name ?? null, t.tls_json ?? null, t.results_json, t.transcript_json);
        }
        inTransaction?.(newlySent, applied);
        return newlySent;
      }, { coalesceMs: RESULTS_COALESCE_MS });
    },

    /** The stored traces of an email's attempts, oldest first. */
    async attemptsOfEmail(emailId: string) {
      return db.selectFrom('delivery_attempts').selectAll().where('email_id', '=', emailId).orderBy('id').execute();
    },

    /** Drops traces of attempts started before `beforeMs`; bounded batches keep each write short. */
    async pruneAttempts(beforeMs: number, limit = 5000): Promise<number> {
      return sync.write(
        () =>
          sync.sqlite.prepare('delete from delivery_attempts where id in (select id from delivery_attempts where started_at < ? order by started_at limit ?)').run(beforeMs, limit).changes,
      );
    },

    async countsByState(): Promise<{ state: string; due: number; count: number }[]> {
      const rows = await db.selectFrom('deliveries').select(['state', (eb) => eb.fn.countAll<number>().as('count')]).groupBy('state').execute();
      return rows.map((r) => ({ state: r.state, due: 0, count: Number(r.count) }));
    },

    async listQueued(limit: number): Promise<DeliveryRow[]> {
      return db.selectFrom('deliveries').selectAll().where('state', '=', 'queued').orderBy('next_attempt_at').limit(limit).execute();
    },

    async findById(id: number): Promise<DeliveryRow | undefined> {
      return db.selectFrom('deliveries').selectAll().where('id', '=', id).executeTakeFirst();
    },

    /**
     * A queued delivery becomes due now, as the bulk retry does it: undefined when it is not
     * queued, on the wire (leased), or a scheduled send whose time has not come (due_since is its
     * time). `inTransaction` runs inside the same transaction with the row (the operator's audit
     * entry commits with it).
     */
    async retryNow(id: number, nowMs: number, nowIso: string, inTransaction?: (row: DeliveryRow) => void): Promise<DeliveryRow | undefined> {
      return transact(db, async (trx) => {
        const row = await trx
          .updateTable('deliveries')
          .set({ next_attempt_at: nowMs, updated_at: nowIso })
          .where('id', '=', id)
          .where('state', '=', 'queued')
          .where('lease_owner', 'is', null)
          .where('due_since', '<=', nowMs)
          .returningAll()
          .executeTakeFirst();
        if (row) inTransaction?.(row);
        return row;
      });
    },

    /** One email's recipients, only if the email is the team's. */
    async listForEmailInTeam(teamId: number, emailId: string): Promise<DeliveryRow[]> {
      return db.selectFrom('deliveries').selectAll().where('team_id', '=', teamId).where('email_id', '=', emailId).orderBy('id').execute();
    },

    async listForEmail(emailId: string): Promise<DeliveryRow[]> {
      return db.selectFrom('deliveries').selectAll().where('email_id', '=', emailId).orderBy('id').execute();
    },
  });
}
export type DeliveriesRepository = ReturnType<typeof createDeliveriesRepository>;
