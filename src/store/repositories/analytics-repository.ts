import { sql } from 'kysely';
import type { Db } from '../db.js';
import { groupCommitOf } from '../group-commit.js';
import { withDialect, transact } from '../store-context.js';
import { boundedRead } from '../bounded-read.js';

export interface StatCounters {
  sent: number;
  delivered: number;
  opened: number;
  clicked: number;
  bounced: number;
  hardBounced: number;
  complained: number;
  /** Emails opened or clicked by a machine (tracking/machine-hits.ts), once each; apart from opened and clicked. */
  machineOpened: number;
  machineClicked: number;
}

export interface StatDelta extends StatCounters {
  teamId: number;
  /** 0 when the event had no domain. */
  domainId: number;
  day: string;
}

/** An open or click that counts only if it is the email's first of its kind (a person's, or a machine's). */
export interface EngagementHit {
  emailId: string;
  kind: 'opened' | 'clicked' | 'machineOpened' | 'machineClicked';
  teamId: number;
  domainId: number;
  day: string;
}

export const ZERO_COUNTERS: StatCounters = { sent: 0, delivered: 0, opened: 0, clicked: 0, bounced: 0, hardBounced: 0, complained: 0, machineOpened: 0, machineClicked: 0 };

const UPSERT_DAILY_SQL = `insert into email_daily_stats (team_id, domain_id, day, sent, delivered, opened, clicked, bounced, hard_bounced, complained, machine_opened, machine_clicked)
  values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
  on conflict (team_id, domain_id, day) do update set
    sent = sent + excluded.sent, delivered = delivered + excluded.delivered, opened = opened + excluded.opened,
    clicked = clicked + excluded.clicked, bounced = bounced + excluded.bounced,
    hard_bounced = hard_bounced + excluded.hard_bounced, complained = complained + excluded.complained,
    machine_opened = machine_opened + excluded.machine_opened, machine_clicked = machine_clicked + excluded.machine_clicked`;
// An email that no longer exists counts nothing (and cannot trip the foreign key).
const COUNT_HIT_SQL = `insert into email_engagement_counted (email_id, kind)
  select ?, ? where exists (select 1 from emails where id = ?)
  on conflict (email_id, kind) do nothing`;

export function createAnalyticsRepository(db: Db) {
  const sync = groupCommitOf(db);
  return withDialect(db, 'analytics', {
    /**
     * One event's increments, inside the transaction that is open (the emitter's): the rollups
     * commit or roll back with the state change. On SQLite they are written at once,
     * synchronously, on the one connection; PostgreSQL writes them before that transaction commits.
     */
    applyInOpenTransaction(delta: StatDelta | null, hit: EngagementHit | null): void {
      const { sqlite } = sync;
      let d = delta;
      if (hit && sqlite.prepare(COUNT_HIT_SQL).run(hit.emailId, hit.kind, hit.emailId).changes > 0) {
        d = { ...ZERO_COUNTERS, teamId: hit.teamId, domainId: hit.domainId, day: hit.day, [hit.kind]: 1 };
      }
      if (!d) return;
      sqlite.prepare(UPSERT_DAILY_SQL).run(d.teamId, d.domainId, d.day, d.sent, d.delivered, d.opened, d.clicked, d.bounced, d.hardBounced, d.complained, d.machineOpened, d.machineClicked);
    },

    /**
     * Adds counter deltas to the daily rollups in one transaction; opens and clicks are
     * first de-duplicated per email (the insert-or-ignore decides which one counts).
     */
    async apply(deltas: StatDelta[], hits: EngagementHit[]): Promise<void> {
      if (!deltas.length && !hits.length) return;
      await transact(db, async (trx) => {
        const rows = new Map<string, StatDelta>();
        const add = (d: StatDelta) => {
          const key = `${d.teamId}|${d.domainId}|${d.day}`;
          const cur = rows.get(key);
          if (!cur) rows.set(key, { ...d });
          else for (const k of Object.keys(ZERO_COUNTERS) as (keyof StatCounters)[]) cur[k] += d[k];
        };
        for (const d of deltas) add(d);
        for (const h of hits) {
          // insert ... select: an email that no longer exists counts nothing (and cannot
          // trip the foreign key and lose the whole batch).
          const res = await trx
            .insertInto('email_engagement_counted')
            .columns(['email_id', 'kind'])
            .expression((eb) =>
              eb
                .selectFrom('emails')
                .select([eb.val(h.emailId).as('email_id'), eb.val(h.kind).as('kind')])
                .where('id', '=', h.emailId),
            )
            .onConflict((oc) => oc.columns(['email_id', 'kind']).doNothing())
            .executeTakeFirst();
          if (Number(res.numInsertedOrUpdatedRows ?? 0n) > 0) {
            add({ ...ZERO_COUNTERS, teamId: h.teamId, domainId: h.domainId, day: h.day, [h.kind]: 1 });
          }
        }
        for (const d of rows.values()) {
          await trx
            .insertInto('email_daily_stats')
            .values({
              team_id: d.teamId,
              domain_id: d.domainId,
              day: d.day,
              sent: d.sent,
              delivered: d.delivered,
              opened: d.opened,
              clicked: d.clicked,
              bounced: d.bounced,
              hard_bounced: d.hardBounced,
              complained: d.complained,
              machine_opened: d.machineOpened,
              machine_clicked: d.machineClicked,
            })
            .onConflict((oc) =>
              oc.columns(['team_id', 'domain_id', 'day']).doUpdateSet({
                sent: sql`email_daily_stats.sent + excluded.sent`,
                delivered: sql`email_daily_stats.delivered + excluded.delivered`,
                opened: sql`email_daily_stats.opened + excluded.opened`,
                clicked: sql`email_daily_stats.clicked + excluded.clicked`,
                bounced: sql`email_daily_stats.bounced + excluded.bounced`,
                hard_bounced: sql`email_daily_stats.hard_bounced + excluded.hard_bounced`,
                complained: sql`email_daily_stats.complained + excluded.complained`,
                machine_opened: sql`email_daily_stats.machine_opened + excluded.machine_opened`,
                machine_clicked: sql`email_daily_stats.machine_clicked + excluded.machine_clicked`,
              }),
            )
            .execute();
        }
      });
    },

    /** Per-day sums over [fromDay, toDay], for one domain or all of the team's. */
    async daily(teamId: number, domainId: number | null, fromDay: string, toDay: string): Promise<(StatCounters & { day: string })[]> {
      return boundedRead(db, async (rdb) => {
        let q = rdb
          .selectFrom('email_daily_stats')
          .where('team_id', '=', teamId)
          .where('day', '>=', fromDay)
          .where('day', '<=', toDay);
        if (domainId !== null) q = q.where('domain_id', '=', domainId);
        const rows = await q
          .select((eb) => [
            'day',
            eb.fn.sum<number>('sent').as('sent'),
            eb.fn.sum<number>('delivered').as('delivered'),
            eb.fn.sum<number>('opened').as('opened'),
            eb.fn.sum<number>('clicked').as('clicked'),
            eb.fn.sum<number>('bounced').as('bounced'),
            eb.fn.sum<number>('hard_bounced').as('hard_bounced'),
            eb.fn.sum<number>('complained').as('complained'),
            eb.fn.sum<number>('machine_opened').as('machine_opened'),
            eb.fn.sum<number>('machine_clicked').as('machine_clicked'),
          ])
          .groupBy('day')
          .orderBy('day')
          .execute();
        return rows.map((r) => ({ day: r.day, ...toCounters(r) }));
      });
    },

    /** All-time sums (rollup rows: domains x days, never the emails). */
    async totals(teamId: number, domainId: number | null): Promise<StatCounters> {
      return boundedRead(db, async (rdb) => {
        let q = rdb.selectFrom('email_daily_stats').where('team_id', '=', teamId);
        if (domainId !== null) q = q.where('domain_id', '=', domainId);
        const r = await q
          .select((eb) => [
            eb.fn.coalesce(eb.fn.sum<number>('sent'), sql<number>`0`).as('sent'),
            eb.fn.coalesce(eb.fn.sum<number>('delivered'), sql<number>`0`).as('delivered'),
            eb.fn.coalesce(eb.fn.sum<number>('opened'), sql<number>`0`).as('opened'),
            eb.fn.coalesce(eb.fn.sum<number>('clicked'), sql<number>`0`).as('clicked'),
            eb.fn.coalesce(eb.fn.sum<number>('bounced'), sql<number>`0`).as('bounced'),
            eb.fn.coalesce(eb.fn.sum<number>('hard_bounced'), sql<number>`0`).as('hard_bounced'),
            eb.fn.coalesce(eb.fn.sum<number>('complained'), sql<number>`0`).as('complained'),
            eb.fn.coalesce(eb.fn.sum<number>('machine_opened'), sql<number>`0`).as('machine_opened'),
            eb.fn.coalesce(eb.fn.sum<number>('machine_clicked'), sql<number>`0`).as('machine_clicked'),
          ])
          .executeTakeFirstOrThrow();
        return toCounters(r);
      });
    },
  });
}
/** SQL sums (numbers or numeric strings) as the API's counters. */
function toCounters(r: Record<'sent' | 'delivered' | 'opened' | 'clicked' | 'bounced' | 'hard_bounced' | 'complained' | 'machine_opened' | 'machine_clicked', unknown>): StatCounters {
  return {
    sent: Number(r.sent),
    delivered: Number(r.delivered),
    opened: Number(r.opened),
    clicked: Number(r.clicked),
    bounced: Number(r.bounced),
    hardBounced: Number(r.hard_bounced),
    complained: Number(r.complained),
    machineOpened: Number(r.machine_opened),
    machineClicked: Number(r.machine_clicked),
  };
}
export type AnalyticsRepository = ReturnType<typeof createAnalyticsRepository>;
