import type { Kysely } from 'kysely';
import { transact } from '../store-context.js';
import type { Database } from '../tables/database.js';
import { ZERO_COUNTERS, type AnalyticsRepository, type EngagementHit, type StatCounters, type StatDelta } from '../repositories/analytics-repository.js';
import { kyselyExec, openTxWrites, type PgExec, type TxWriteKind } from './pg-exec.js';

/*
 * Analytics rollups on PostgreSQL: increments queued by the transactional handler are summed per
 * (team, domain, day) and written before the emitter's transaction commits, as one upsert for
 * the whole batch. Rows are upserted in key order, so two nodes' transactions that touch the
 * same rollup rows lock them in the same order and never deadlock.
 */

interface StatItem {
  delta: StatDelta | null;
  hit: EngagementHit | null;
}

const COUNTER_KEYS = Object.keys(ZERO_COUNTERS) as (keyof StatCounters)[];

export async function writeRollups(exec: PgExec, deltas: StatDelta[], hits: EngagementHit[]): Promise<void> {
  const rows = new Map<string, StatDelta>();
  const add = (d: StatDelta) => {
    const key = `${d.teamId}|${d.domainId}|${d.day}`;
    const cur = rows.get(key);
    if (!cur) rows.set(key, { ...d });
    else for (const k of COUNTER_KEYS) cur[k] += d[k];
  };
  for (const d of deltas) add(d);
  const uniqueHits = [...new Map(hits.map((h) => [`${h.emailId}|${h.kind}`, h])).values()];
  if (uniqueHits.length) {
    // An open or click counts once per email: the insert decides which one (and an email that
    // no longer exists counts nothing).
    const counted = await exec.query<{ email_id: string; kind: string }>(
      `insert into email_engagement_counted (email_id, kind)
       select x.e, x.k from unnest($1::text[], $2::text[]) as x(e, k) where exists (select 1 from emails where id = x.e)
       on conflict (email_id, kind) do nothing returning email_id, kind`,
      [uniqueHits.map((h) => h.emailId), uniqueHits.map((h) => h.kind)],
    );
    const won = new Set(counted.map((r) => `${r.email_id}|${r.kind}`));
    for (const h of uniqueHits) if (won.has(`${h.emailId}|${h.kind}`)) add({ ...ZERO_COUNTERS, teamId: h.teamId, domainId: h.domainId, day: h.day, [h.kind]: 1 });
  }
  if (!rows.size) return;
  const list = [...rows.values()].sort((a, b) => a.teamId - b.teamId || a.domainId - b.domainId || (a.day < b.day ? -1 : a.day > b.day ? 1 : 0));
  const col = (k: keyof StatDelta) => list.map((d) => d[k]);
  await exec.run(
    `insert into email_daily_stats (team_id, domain_id, day, sent, delivered, opened, clicked, bounced, hard_bounced, complained, machine_opened, machine_clicked)
     select * from unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[])
     on conflict (team_id, domain_id, day) do update set
       sent = email_daily_stats.sent + excluded.sent, delivered = email_daily_stats.delivered + excluded.delivered,
       opened = email_daily_stats.opened + excluded.opened, clicked = email_daily_stats.clicked + excluded.clicked,
       bounced = email_daily_stats.bounced + excluded.bounced, hard_bounced = email_daily_stats.hard_bounced + excluded.hard_bounced,
       complained = email_daily_stats.complained + excluded.complained,
       machine_opened = email_daily_stats.machine_opened + excluded.machine_opened, machine_clicked = email_daily_stats.machine_clicked + excluded.machine_clicked`,
    [col('teamId'), col('domainId'), col('day'), col('sent'), col('delivered'), col('opened'), col('clicked'), col('bounced'), col('hardBounced'), col('complained'), col('machineOpened'), col('machineClicked')],
  );
}

const ROLLUPS: TxWriteKind<StatItem> = {
  name: 'analytics',
  order: 20,
  async flush(exec, items) {
    await writeRollups(
      exec,
      items.flatMap((i) => i.delta ?? []),
      items.flatMap((i) => i.hit ?? []),
    );
  },
};

export function pgAnalytics(db: Kysely<Database>): Partial<AnalyticsRepository> {
  return {
    applyInOpenTransaction(delta: StatDelta | null, hit: EngagementHit | null): void {
      if (delta || hit) openTxWrites('applyInOpenTransaction').add(ROLLUPS, { delta, hit });
    },
    async apply(deltas: StatDelta[], hits: EngagementHit[]): Promise<void> {
      if (!deltas.length && !hits.length) return;
      await transact(db, (trx) => writeRollups(kyselyExec(trx), deltas, hits));
    },
  };
}
