import { sql, type Kysely } from 'kysely';
import type { Database } from '../tables/database.js';
import type { HoldRelease, ShapingHoldRow, ShapingRepository, SlotAnswer, SlotRequest } from '../repositories/shaping-repository.js';
import { pgPoolOf, sharedOf } from './pg-context.js';
import { clientExec, kyselyExec, type PgExec } from './pg-exec.js';
import { transact } from '../store-context.js';

/*
 * Traffic shaping's state on PostgreSQL (store/repositories/shaping-repository.ts). The message
 * rate is the cluster's: GCRA with the theoretical arrival time of each (source, rollup) in a
 * row, taken and moved in one atomic upsert. The transactions that ask for a slot at the same
 * moment, on any rollups, share one statement (while one runs, the next ones gather), so a
 * shaped send costs a share of a round trip, not one each.
 */

/**
 * Per request (distinct (source, rollup), sorted so two nodes lock rows in the same order):
 * the slot is taken when tat is within half a spacing of now (2 * (tat - now) <= spacing),
 * moving tat to max(tat, now) + spacing; otherwise the row is only read. A first request
 * inserts the row with its slot taken.
 */
const TAKE_SLOTS_SQL = `with req as (select * from unnest($1::text[], $2::text[], $3::bigint[]) as r(source, rollup, spacing)),
  up as (insert into shaping_rates as s (source, rollup, tat_ms)
         select source, rollup, $4::bigint + spacing from req
         on conflict (source, rollup) do update set tat_ms = greatest(s.tat_ms, $4::bigint) + (excluded.tat_ms - $4::bigint)
         where 2 * (s.tat_ms - $4::bigint) <= excluded.tat_ms - $4::bigint
         returning s.source, s.rollup, s.tat_ms)
select source, rollup, tat_ms, true as took from up
union all
select s.source, s.rollup, s.tat_ms, false as took from shaping_rates s join req r on r.source = s.source and r.rollup = s.rollup
where not exists (select 1 from up u where u.source = s.source and u.rollup = s.rollup)`;

const TAKE_WARMUP_SQL = `with up as (insert into warmup_usage as w (source, rollup, day, used) values ($1, $2, $3, $4)
         on conflict (source, rollup, day) do update set used = w.used + excluded.used where w.used + excluded.used <= $5
         returning w.used)
select used, true as took from up
union all
select used, false as took from warmup_usage where source = $1 and rollup = $2 and day = $3 and not exists (select 1 from up)`;

interface SlotCall {
  requests: readonly SlotRequest[];
  nowMs: number;
  resolve: (a: SlotAnswer[]) => void;
  reject: (e: unknown) => void;
}

const keyOf = (source: string, rollup: string) => `${source}\n${rollup}`;

/** Gathers the slot requests of concurrent callers; one statement at a time, the waiting ones together. */
function createSlotTaker(exec: PgExec) {
  let waiting: SlotCall[] = [];
  let running = false;

  async function runBatch(calls: SlotCall[]): Promise<void> {
    // One row per (source, rollup) per statement (an upsert cannot touch a row twice): the first
    // caller asks; the others of the batch find the slot gone, which is GCRA's answer anyway.
    const now = Math.max(...calls.map((c) => c.nowMs));
    const first = new Map<string, SlotRequest>();
    for (const c of calls) for (const r of c.requests) if (!first.has(keyOf(r.source, r.rollup))) first.set(keyOf(r.source, r.rollup), r);
    const asked = [...first.values()].sort((a, b) => (a.source === b.source ? (a.rollup < b.rollup ? -1 : 1) : a.source < b.source ? -1 : 1));
    try {
      const rows = await exec.query<{ source: string; rollup: string; tat_ms: number; took: boolean }>(TAKE_SLOTS_SQL, [
        asked.map((r) => r.source),
        asked.map((r) => r.rollup),
        asked.map((r) => Math.max(1, Math.round(r.spacingMs))),
        now,
      ]);
      const answers = new Map(rows.map((r) => [keyOf(r.source, r.rollup), { took: r.took, tatMs: r.tat_ms }]));
      const given = new Set<string>();
      for (const c of calls) {
        c.resolve(
          c.requests.map((r) => {
            const k = keyOf(r.source, r.rollup);
            const a = answers.get(k) ?? { took: false, tatMs: now + r.spacingMs };
            if (!a.took || given.has(k)) return { took: false, tatMs: a.tatMs };
            given.add(k);
            return a;
          }),
        );
      }
    } catch (err) {
      for (const c of calls) c.reject(err);
    }
  }

  function pump(): void {
    if (running || !waiting.length) return;
    running = true;
    const calls = waiting;
    waiting = [];
    void runBatch(calls).finally(() => {
      running = false;
      pump();
    });
  }

  return (requests: readonly SlotRequest[], nowMs: number): Promise<SlotAnswer[]> =>
    new Promise((resolve, reject) => {
      waiting.push({ requests, nowMs, resolve, reject });
      // The transactions planned in this turn of the event loop go together.
      if (waiting.length === 1) setImmediate(pump);
    });
}

export function pgShaping(db: Kysely<Database>): Partial<ShapingRepository> {
  const exec = clientExec(pgPoolOf(db));
  const takeSlots = sharedOf(db, 'shaping-slots', () => createSlotTaker(exec));
  return {
    async activeHolds(nowMs: number): Promise<ShapingHoldRow[]> {
      return exec.query<ShapingHoldRow>('select * from shaping_holds where until_ms > $1 order by until_ms, id', [nowMs]);
    },

    async putHold(row: ShapingHoldRow): Promise<void> {
      await transact(db, async (trx) => {
        // Nodes replacing the same hold at once would each delete the old row and insert their
        // own (neither sees the other's insert): two holds, and lifting one leaves the other.
        await sql`select pg_advisory_xact_lock(hashtext(${`hold:${row.source}\n${row.rollup}\n${row.kind}`}))`.execute(trx);
        await trx.deleteFrom('shaping_holds').where('source', '=', row.source).where('rollup', '=', row.rollup).where('kind', '=', row.kind).execute();
        await trx.insertInto('shaping_holds').values(row).execute();
      });
    },

    async endHold(id: string, nowMs: number, release?: HoldRelease, inTransaction?: (ended: ShapingHoldRow) => void): Promise<ShapingHoldRow | undefined> {
      const END = 'delete from shaping_holds where id = $1 and until_ms > $2 returning *';
      if (!release && !inTransaction) return (await exec.query<ShapingHoldRow>(END, [id, nowMs]))[0];
      return transact(db, async (trx) => {
        const tx = kyselyExec(trx);
        const [row] = await tx.query<ShapingHoldRow>(END, [id, nowMs]);
        if (!row) return undefined;
        if (release) {
          await tx.run(`update deliveries set next_attempt_at = $1, updated_at = $2 where state = 'queued' and lease_owner is null and held_reason = $3 and next_attempt_at > $1`, [
            release.dueMs,
            release.nowIso,
            release.reasonOf(row),
          ]);
        }
        inTransaction?.(row);
        return row;
      });
    },

    async pruneHolds(beforeMs: number): Promise<number> {
      return exec.run('delete from shaping_holds where until_ms < $1', [beforeMs]);
    },

    async warmupUsage(day: string): Promise<{ source: string; rollup: string; used: number }[]> {
      return exec.query('select source, rollup, used from warmup_usage where day = $1', [day]);
    },

    async addWarmupUsage(source: string, rollup: string, day: string, n: number): Promise<void> {
      await exec.run('insert into warmup_usage (source, rollup, day, used) values ($1, $2, $3, $4) on conflict (source, rollup, day) do update set used = warmup_usage.used + excluded.used', [
        source,
        rollup,
        day,
        n,
      ]);
    },

    async takeWarmup(source: string, rollup: string, day: string, n: number, budget: number): Promise<{ took: boolean; used: number }> {
      if (n > budget) {
        const [row] = await exec.query<{ used: number }>('select used from warmup_usage where source = $1 and rollup = $2 and day = $3', [source, rollup, day]);
        return { took: false, used: row?.used ?? 0 };
      }
      const [row] = await exec.query<{ used: number; took: boolean }>(TAKE_WARMUP_SQL, [source, rollup, day, n, budget]);
      return row ? { took: row.took, used: row.used } : { took: false, used: 0 };
    },

    async pruneWarmupUsage(beforeDay: string): Promise<number> {
      return exec.run('delete from warmup_usage where day < $1', [beforeDay]);
    },

    takeSlots,
  };
}
