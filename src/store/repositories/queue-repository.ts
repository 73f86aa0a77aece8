import type { Selectable } from 'kysely';
import type { Db } from '../db.js';
import { groupCommitOf } from '../group-commit.js';
import type { QueueSuspensionsTable } from '../tables/operations-tables.js';
import type { DeliveryRow } from './deliveries-repository.js';
import { HELD_BY_SUSPENSION, HOLDING_SUSPENSION, parkHeldSync } from './suspension-sql.js';
import { withDialect } from '../store-context.js';

/*
 * The operator's view of the delivery queue: counts by state and destination, the deliveries
 * behind them, suspensions, and bulk retry. Queued deliveries fall in exactly one state:
 * in flight (leased), suspended (held by an active suspension), ready (due now), deferred
 * (attempted before, due later) or scheduled (never attempted, due later).
 */

export type SuspensionRow = Selectable<QueueSuspensionsTable>;
export type QueueState = 'ready' | 'scheduled' | 'deferred' | 'inflight' | 'suspended';

/** Which queued deliveries an operator action applies to; at least one field is set. */
export interface QueueSelector {
  destination?: string;
  teamId?: number;
  campaignId?: string;
  emailIds?: string[];
}

/**
 * The state of a queued row, in SQL (parameters: now for the suspension check, then now three
 * times). Mail traffic shaping parked (a hold, the rate, the warm-up budget) counts as suspended.
 */
const STATE_SQL = `case when d.lease_owner is not null then 'inflight'
  when ${HELD_BY_SUSPENSION} then 'suspended'
  when d.held_reason is not null and d.next_attempt_at > ? then 'suspended'
  when d.next_attempt_at <= ? then 'ready'
  when d.attempts > 0 then 'deferred' else 'scheduled' end`;

function selectorSql(sel: QueueSelector): { where: string; params: unknown[] } {
  const parts: string[] = [];
  const params: unknown[] = [];
  if (sel.destination !== undefined) {
    parts.push('d.rcpt_domain = ?');
    params.push(sel.destination);
  }
  if (sel.teamId !== undefined) {
    parts.push('d.team_id = ?');
    params.push(sel.teamId);
  }
  if (sel.campaignId !== undefined) {
    parts.push('d.email_id in (select id from emails where campaign_id = ?)');
    params.push(sel.campaignId);
  }
  if (sel.emailIds !== undefined) {
    parts.push('d.email_id in (select value from json_each(?))');
    params.push(JSON.stringify(sel.emailIds));
  }
  return { where: parts.length ? parts.map((p) => `(${p})`).join(' and ') : '1 = 1', params };
}

export interface DestinationRow {
  destination: string;
  queued: number;
  inflight: number;
  deferred: number;
  suspended: number;
  oldestDueMs: number | null;
  lastResponse: string | null;
  lastCode: number | null;
  mxHost: string | null;
}

export function createQueueRepository(db: Db) {
  const sync = groupCommitOf(db);
  return withDialect(db, 'queue', {
    async totals(nowMs: number): Promise<Record<QueueState, number>> {
      return sync.read(() => {
        const rows = sync.sqlite
          .prepare(`select ${STATE_SQL} as state, count(*) as n from deliveries d where d.state = 'queued' group by 1`)
          .all(nowMs, nowMs, nowMs) as { state: QueueState; n: number }[];
        const out: Record<QueueState, number> = { ready: 0, scheduled: 0, deferred: 0, inflight: 0, suspended: 0 };
        for (const r of rows) out[r.state] = r.n;
        return out;
      });
    },

    /** Due time of the oldest delivery that is ready now (due, not leased, not held), or null. */
    async oldestReadyMs(nowMs: number): Promise<number | null> {
      return sync.read(() => {
        const r = sync.sqlite
          .prepare(`select min(d.next_attempt_at) as due from deliveries d where d.state = 'queued' and d.lease_owner is null and d.next_attempt_at <= ? and not ${HELD_BY_SUSPENSION}`)
          .get(nowMs, nowMs) as { due: number | null };
        return r.due;
      });
    },

    /** Queued deliveries by state, recipient domain and last MX host (the metrics' queue gauge). */
    async countsForMetrics(nowMs: number): Promise<{ state: QueueState; domain: string; mxHost: string | null; count: number }[]> {
      return sync.read(
        () =>
          sync.sqlite
            .prepare(`select ${STATE_SQL} as state, d.rcpt_domain as domain, d.mx_host as mxHost, count(*) as count from deliveries d where d.state = 'queued' group by 1, 2, 3`)
            .all(nowMs, nowMs, nowMs) as { state: QueueState; domain: string; mxHost: string | null; count: number }[],
      );
    },

    /** One row per destination domain with queued mail, most queued first. */
    async byDestination(nowMs: number, limit: number): Promise<DestinationRow[]> {
      return sync.read(
        () =>
          sync.sqlite
            .prepare(
              `select d.rcpt_domain as destination, count(*) as queued,
                 sum(d.lease_owner is not null) as inflight,
                 sum(d.lease_owner is null and d.attempts > 0 and d.next_attempt_at > ? and d.held_reason is null and not ${HELD_BY_SUSPENSION}) as deferred,
                 sum(d.lease_owner is null and (${HELD_BY_SUSPENSION} or (d.held_reason is not null and d.next_attempt_at > ?))) as suspended,
                 min(case when d.lease_owner is null then d.next_attempt_at end) as oldestDueMs,
                 (select x.last_response from deliveries x where x.rcpt_domain = d.rcpt_domain and x.last_response is not null order by x.updated_at desc limit 1) as lastResponse,
                 (select x.last_code from deliveries x where x.rcpt_domain = d.rcpt_domain and x.last_response is not null order by x.updated_at desc limit 1) as lastCode,
                 (select x.mx_host from deliveries x where x.rcpt_domain = d.rcpt_domain and x.mx_host is not null order by x.updated_at desc limit 1) as mxHost
               from deliveries d where d.state = 'queued' group by d.rcpt_domain order by queued desc, destination limit ?`,
            )
            .all(nowMs, nowMs, nowMs, nowMs, limit) as DestinationRow[],
      );
    },

    /** Queued deliveries matching the filters, by id, after the cursor. */
    async messages(nowMs: number, sel: QueueSelector, state: QueueState | undefined, limit: number, afterId: number): Promise<(DeliveryRow & { queue_state: QueueState })[]> {
      const { where, params } = selectorSql(sel);
      return sync.read(
        () =>
          sync.sqlite
            .prepare(
              `select * from (select d.*, ${STATE_SQL} as queue_state from deliveries d where d.state = 'queued' and d.id > ? and ${where} order by d.id)
               where ? is null or queue_state = ? limit ?`,
            )
            .all(nowMs, nowMs, nowMs, afterId, ...params, state ?? null, state ?? null, limit) as (DeliveryRow & { queue_state: QueueState })[],
      );
    },

    /**
     * Matching queued deliveries not on the wire become due now; held ones stay held, and a
     * scheduled send not due yet (due_since is its time) keeps its time. Returns how many.
     * `inTransaction` runs inside the same write with that number (the operator's audit entry
     * commits with the change); it may run more than once, like the write itself.
     */
    async retryNow(sel: QueueSelector, nowMs: number, nowIso: string, inTransaction?: (retried: number) => void): Promise<number> {
      const { where, params } = selectorSql(sel);
      return sync.write(() => {
        const retried = sync.sqlite
          .prepare(`update deliveries as d set next_attempt_at = ?, updated_at = ? where d.state = 'queued' and d.lease_owner is null and d.due_since <= ? and ${where}`)
          .run(nowMs, nowIso, nowMs, ...params).changes;
        inTransaction?.(retried);
        return retried;
      });
    },

    /** Of the deliveries retryNow makes due, how many an active suspension still holds (the retry says so). */
    async heldBySuspension(sel: QueueSelector, nowMs: number): Promise<number> {
      const { where, params } = selectorSql(sel);
      return sync.read(
        () =>
          (
            sync.sqlite
              .prepare(`select count(*) as n from deliveries d where d.state = 'queued' and d.lease_owner is null and d.due_since <= ? and ${where} and ${HELD_BY_SUSPENSION}`)
              .get(nowMs, ...params, nowMs) as { n: number }
          ).n,
      );
    },

    /**
     * Leases up to `limit` matching queued deliveries that are not on the wire, for an operator
     * bounce: the lease keeps the engine from attempting them while they are failed.
     */
    async leaseForBounce(sel: QueueSelector, owner: string, untilMs: number, limit: number): Promise<DeliveryRow[]> {
      const { where, params } = selectorSql(sel);
      return sync.write(
        () =>
          sync.sqlite
            .prepare(
              `update deliveries set lease_owner = ?, lease_until = ?
               where id in (select d.id from deliveries d where d.state = 'queued' and d.lease_owner is null and ${where} order by d.id limit ?)
               returning *`,
            )
            .all(owner, untilMs, ...params, limit) as DeliveryRow[],
      );
    },

    /** Returns how many rows it parked; `inTransaction` runs inside the same write (see retryNow). */
    async insertSuspension(row: SuspensionRow, nowMs: number, inTransaction?: (parked: number) => void): Promise<number> {
      // Held rows due now are parked at the end of the suspension at once (see parkHeld). Those
      // other suspensions already hold are parked first, so the count is this one's alone.
      return sync.write(() => {
        parkHeldSync(sync.sqlite, nowMs);
        sync.sqlite
          .prepare('insert into queue_suspensions (id, destination, team_id, campaign_id, reason, until_ms, created_by, created_at) values (?, ?, ?, ?, ?, ?, ?, ?)')
          .run(row.id, row.destination, row.team_id, row.campaign_id, row.reason, row.until_ms, row.created_by, row.created_at);
        const parked = parkHeldSync(sync.sqlite, nowMs);
        inTransaction?.(parked);
        return parked;
      });
    },

    async activeSuspensions(nowMs: number): Promise<SuspensionRow[]> {
      return sync.read(() => sync.sqlite.prepare('select * from queue_suspensions where until_ms > ? order by until_ms, id').all(nowMs) as SuspensionRow[]);
    },

    /** The active suspension that holds one delivery (the one ending last), if any. */
    async holdingSuspension(deliveryId: number, nowMs: number): Promise<SuspensionRow | undefined> {
      return sync.read(() => sync.sqlite.prepare(HOLDING_SUSPENSION).get(nowMs, deliveryId) as SuspensionRow | undefined);
    },

    /**
     * Ends a suspension now: the mail it parked is due at once. Undefined when none is active with
     * that id; otherwise `inTransaction` runs inside the same write with it (see retryNow).
     */
    async endSuspension(id: string, nowMs: number, nowIso: string, inTransaction?: (ended: SuspensionRow) => void): Promise<SuspensionRow | undefined> {
      return sync.write(() => {
        const s = sync.sqlite.prepare('select * from queue_suspensions where id = ? and until_ms > ?').get(id, nowMs) as SuspensionRow | undefined;
        if (!s) return undefined;
        sync.sqlite.prepare('delete from queue_suspensions where id = ?').run(id);
        // Parked rows carry the suspension's end as their due time; another suspension that
        // still holds some of them parks them again at the next claim.
        sync.sqlite
          .prepare(
            `update deliveries as d set next_attempt_at = ?, updated_at = ? where d.state = 'queued' and d.lease_owner is null and d.next_attempt_at = ?
               and (? is null or d.rcpt_domain = ?) and (? is null or d.team_id = ?)
               and (? is null or d.email_id in (select id from emails where campaign_id = ?))`,
          )
          .run(nowMs, nowIso, s.until_ms, s.destination, s.destination, s.team_id, s.team_id, s.campaign_id, s.campaign_id);
        inTransaction?.(s);
        return s;
      });
    },

    /** Removes suspensions that ended long ago (they are kept a while for the record). */
    async pruneSuspensions(beforeMs: number): Promise<number> {
      return sync.write(() => sync.sqlite.prepare('delete from queue_suspensions where until_ms < ?').run(beforeMs).changes);
    },
  });
}
export type QueueRepository = ReturnType<typeof createQueueRepository>;
