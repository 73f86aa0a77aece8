import type { Selectable } from 'kysely';
import type { Db } from '../db.js';
import { groupCommitOf } from '../group-commit.js';
import type { ShapingHoldsTable } from '../tables/shaping-tables.js';

/*
 * Traffic-shaping state that must survive a restart: the holds replies put on a (source,
 * rollup) and the warm-up messages sent per (source, rollup, day).
 */

export type ShapingHoldRow = Selectable<ShapingHoldsTable>;

export function createShapingRepository(db: Db) {
  const sync = groupCommitOf(db);
  return {
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

    /** Ends a hold now; the hold as it was, or undefined when none is active with that id. */
    async endHold(id: string, nowMs: number): Promise<ShapingHoldRow | undefined> {
      return sync.write(() => {
        const row = sync.sqlite.prepare('select * from shaping_holds where id = ? and until_ms > ?').get(id, nowMs) as ShapingHoldRow | undefined;
        if (row) sync.sqlite.prepare('delete from shaping_holds where id = ?').run(id);
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

    async pruneWarmupUsage(beforeDay: string): Promise<number> {
      return sync.write(() => sync.sqlite.prepare('delete from warmup_usage where day < ?').run(beforeDay).changes);
    },
  };
}
export type ShapingRepository = ReturnType<typeof createShapingRepository>;
