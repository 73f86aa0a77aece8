import { sql, type Selectable } from 'kysely';
import type { Db } from '../db.js';
import { groupCommitOf } from '../group-commit.js';
import { transact, withDialect } from '../store-context.js';
import type { ShapingHoldsTable } from '../tables/shaping-tables.js';

/*
 * Traffic-shaping state that must survive a restart: the holds replies put on a (source,
 * rollup) and the warm-up messages sent per (source, rollup, day). With several nodes on one
 * PostgreSQL, also what they share so that a rate and a warm-up budget hold for the cluster:
 * the message rate's slots (GCRA, a row per (source, rollup)) and the budget taken atomically.
 * PostgreSQL's versions are in store/pg/pg-shaping.ts (the slots batched, one round trip for
 * every transaction that asks at once).
 */

export type ShapingHoldRow = Selectable<ShapingHoldsTable>;

/** A message-rate slot asked for: `spacingMs` is one message's share of the rate. */
export interface SlotRequest {
  source: string;
  rollup: string;
  spacingMs: number;
}

/** The mail a lifted hold parked (its held_reason, `reasonOf` the hold) becomes due at `dueMs`. */
export interface HoldRelease {
  reasonOf: (hold: ShapingHoldRow) => string;
  dueMs: number;
  nowIso: string;
}

/** took: the slot is this caller's (send now); tatMs: the (source, rollup)'s next free time. */
export interface SlotAnswer {
  took: boolean;
  tatMs: number;
}

export function createShapingRepository(db: Db) {
  const sync = groupCommitOf(db);
  const warmupUsed = async (source: string, rollup: string, day: string): Promise<number> => {
    const row = await db.selectFrom('warmup_usage').select('used').where('source', '=', source).where('rollup', '=', rollup).where('day', '=', day).executeTakeFirst();
    return row?.used ?? 0;
  };
  return withDialect(db, 'shaping', {
    async activeHolds(nowMs: number): Promise<ShapingHoldRow[]> {
      return sync.read(() => sync.sqlite.prepare('select * from shaping_holds where until_ms > ? order by until_ms, id').all(nowMs) as ShapingHoldRow[]);
    },

    /** Puts a hold in place of any of the same kind on the same (source, rollup). */
    async putHold(row: ShapingHoldRow): Promise<void> {
      await sync.write(() => {
        sync.sqlite.prepare('delete from shaping_holds where source = ? and rollup = ? and kind = ?').run(row.source, row.rollup, row.kind);
        sync.sqlite
          .prepare('insert into shaping_holds (id, source, rollup, kind, message_rate, reason, until_ms, created_at) values (?, ?, ?, ?, ?, ?, ?, ?)')
          .run(row.id, row.source, row.rollup, row.kind, row.message_rate, row.reason, row.until_ms, row.created_at);
      });
    },

    /**
     * Ends a hold now; the hold as it was, or undefined when none is active with that id. With
     * `release`, the mail the hold parked becomes due at `dueMs` in the same write, and
     * `inTransaction` runs inside it with the hold (the operator's audit entry commits with it;
     * it may run more than once, like the write itself).
     */
    async endHold(id: string, nowMs: number, release?: HoldRelease, inTransaction?: (ended: ShapingHoldRow) => void): Promise<ShapingHoldRow | undefined> {
      return sync.write(() => {
        const row = sync.sqlite.prepare('select * from shaping_holds where id = ? and until_ms > ?').get(id, nowMs) as ShapingHoldRow | undefined;
        if (!row) return undefined;
        sync.sqlite.prepare('delete from shaping_holds where id = ?').run(id);
        if (release) {
          sync.sqlite
            .prepare(`update deliveries set next_attempt_at = ?, updated_at = ? where state = 'queued' and lease_owner is null and held_reason = ? and next_attempt_at > ?`)
            .run(release.dueMs, release.nowIso, release.reasonOf(row), release.dueMs);
        }
        inTransaction?.(row);
        return row;
      });
    },

    async pruneHolds(beforeMs: number): Promise<number> {
      return sync.write(() => sync.sqlite.prepare('delete from shaping_holds where until_ms < ?').run(beforeMs).changes);
    },

    /** Warm-up messages sent on one UTC day, per (source, rollup). */
    async warmupUsage(day: string): Promise<{ source: string; rollup: string; used: number }[]> {
      return sync.read(() => sync.sqlite.prepare('select source, rollup, used from warmup_usage where day = ?').all(day) as { source: string; rollup: string; used: number }[]);
    },

    async addWarmupUsage(source: string, rollup: string, day: string, n: number): Promise<void> {
      await sync.write(() => {
        sync.sqlite
          .prepare('insert into warmup_usage (source, rollup, day, used) values (?, ?, ?, ?) on conflict (source, rollup, day) do update set used = used + excluded.used')
          .run(source, rollup, day, n);
      });
    },

    /**
     * Takes n messages of a day's warm-up budget if they fit (used + n <= budget), atomically for
     * every node; otherwise takes nothing. Answers with the usage after (or as found).
     */
    async takeWarmup(source: string, rollup: string, day: string, n: number, budget: number): Promise<{ took: boolean; used: number }> {
      if (n > budget) return { took: false, used: await warmupUsed(source, rollup, day) };
      return transact(db, async (trx) => {
        const taken = await trx
          .insertInto('warmup_usage')
          .values({ source, rollup, day, used: n })
          .onConflict((oc) => oc.columns(['source', 'rollup', 'day']).doUpdateSet({ used: sql`warmup_usage.used + excluded.used` }).where(sql<boolean>`warmup_usage.used + excluded.used <= ${budget}`))
          .returning('used')
          .executeTakeFirst();
        if (taken) return { took: true, used: taken.used };
        const row = await trx.selectFrom('warmup_usage').select('used').where('source', '=', source).where('rollup', '=', rollup).where('day', '=', day).executeTakeFirst();
        return { took: false, used: row?.used ?? 0 };
      });
    },

    async pruneWarmupUsage(beforeDay: string): Promise<number> {
      return sync.write(() => sync.sqlite.prepare('delete from warmup_usage where day < ?').run(beforeDay).changes);
    },

    /**
     * GCRA for the cluster: for each request, the (source, rollup)'s slot is taken when its
     * theoretical arrival time is within half a spacing of now (then it moves one spacing on),
     * else nothing changes and the answer says when the next one is free. One request per
     * (source, rollup) per call.
     */
    async takeSlots(requests: readonly SlotRequest[], nowMs: number): Promise<SlotAnswer[]> {
      return transact(db, async (trx) => {
        const out: SlotAnswer[] = [];
        for (const r of requests) {
          const row = await trx.selectFrom('shaping_rates').select('tat_ms').where('source', '=', r.source).where('rollup', '=', r.rollup).executeTakeFirst();
          const tat = row?.tat_ms ?? nowMs;
          if (2 * (tat - nowMs) > r.spacingMs) {
            out.push({ took: false, tatMs: tat });
            continue;
          }
          const next = Math.max(tat, nowMs) + r.spacingMs;
          await trx
            .insertInto('shaping_rates')
            .values({ source: r.source, rollup: r.rollup, tat_ms: next })
            .onConflict((oc) => oc.columns(['source', 'rollup']).doUpdateSet({ tat_ms: next }))
            .execute();
          out.push({ took: true, tatMs: next });
        }
        return out;
      });
    },

    /**
     * Of these deliveries the shaper parked for a rate slot, those that may still wait at that
     * slot (`atMs`): queued and either due then or leased (being parked, or attempted, right
     * now: asked again later). One bounced, purged, cancelled, retried or parked again
     * elsewhere since is not.
     */
    async stillParked(slots: readonly { id: number; atMs: number }[]): Promise<number[]> {
      const kept: number[] = [];
      for (let i = 0; i < slots.length; i += 500) {
        const chunk = slots.slice(i, i + 500);
        const at = new Map(chunk.map((x) => [x.id, x.atMs]));
        const rows = await db.selectFrom('deliveries').select(['id', 'next_attempt_at', 'lease_owner']).where('id', 'in', [...at.keys()]).where('state', '=', 'queued').execute();
        for (const r of rows) if (r.lease_owner !== null || Number(r.next_attempt_at) === at.get(Number(r.id))) kept.push(Number(r.id));
      }
      return kept;
    },

    /** Forgets rates whose last slot is long past (a (source, rollup) no longer sent to). */
    async pruneRates(beforeMs: number): Promise<number> {
      const res = await db.deleteFrom('shaping_rates').where('tat_ms', '<', beforeMs).executeTakeFirst();
      return Number(res.numDeletedRows);
    },
  });
}
export type ShapingRepository = ReturnType<typeof createShapingRepository>;
