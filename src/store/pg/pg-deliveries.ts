import type { Kysely } from 'kysely';
import type { Database } from '../tables/database.js';
import { PARK_INTERVAL_MS, RESULTS_COALESCE_MS, type DeliveriesRepository, type DeliveryRow, type ResultsWrite, type StatusEventWrite } from '../repositories/deliveries-repository.js';
import { createPgBatcher } from './pg-batcher.js';
import { pgPoolOf, sharedOf } from './pg-context.js';
import { clientExec, type PgExec } from './pg-exec.js';
import { heldBySuspension, PARK_HELD_SQL } from './pg-suspension-sql.js';

/*
 * The delivery queue on PostgreSQL. Any number of nodes claim from it at once: the claim takes
 * due rows with FOR UPDATE SKIP LOCKED (rows another node is claiming are skipped, never waited
 * for) and leases them in the same statement. Results are group-committed like on SQLite: the
 * results of one coalescing window are written by two statements for the whole batch.
 */

const CLAIM_SQL = `update deliveries set lease_owner = $1, lease_until = $2
  where id in (select d.id from deliveries d
               where d.state = 'queued' and d.lease_owner is null and d.next_attempt_at <= $3
                 and d.rcpt_domain <> all($4::text[]) and not ${heldBySuspension('$3')}
               order by d.next_attempt_at limit $5
               for update of d skip locked)
  returning *`;

/** SENT marks (first attempt per email) and the delivery rows still queued, in one round trip. */
const MARK_SQL = `with s as (update emails e set sent_at = x.at from unnest($1::text[], $2::text[]) as x(id, at)
                            where e.id = x.id and e.sent_at is null returning e.id),
     u as (update deliveries d set state = x.state, attempts = x.attempts, next_attempt_at = x.next, last_code = x.code,
                   last_response = x.response, mx_host = x.mx, lease_owner = null, lease_until = null, held_reason = null, updated_at = x.now
           from unnest($3::bigint[], $4::text[], $5::bigint[], $6::bigint[], $7::bigint[], $8::text[], $9::text[], $10::text[], $11::text[])
                as x(id, state, attempts, next, code, response, mx, now, owner)
           where d.id = x.id and d.state = 'queued'
             and (x.owner is null or d.lease_owner is null or d.lease_owner = x.owner) returning d.id)
select 's' as k, id from s union all select 'u' as k, id::text from u`;

/** The status events, latestStatus moved forward only, suppressions and traces, in one round trip. */
const RECORD_SQL = `with ev as (insert into email_events (email_id, status, data_json, created_at)
                              select * from unnest($1::text[], $2::text[], $3::text[], $4::text[])),
     best as (select distinct on (id) id, status, rank, at
              from unnest($1::text[], $2::text[], $5::bigint[], $4::text[]) with ordinality as x(id, status, rank, at, ord)
              order by id, rank desc, ord),
     up as (update emails e set latest_status = b.status, status_rank = b.rank, updated_at = b.at from best b
            where e.id = b.id and e.status_rank < b.rank),
     sp as (insert into suppressions (team_id, email, reason, source, created_at)
            select * from unnest($6::bigint[], $7::text[], $8::text[], $9::text[], $10::text[]) on conflict (team_id, email) do nothing),
     tr as (insert into delivery_attempts (email_id, team_id, rcpt_domain, started_at, mx_host, address, source, source_name, tls_json, results_json, transcript_json)
            select * from unnest($11::text[], $12::bigint[], $13::text[], $14::bigint[], $15::text[], $16::text[], $17::text[], $18::text[], $19::text[], $20::text[], $21::text[]))
select 1`;

interface ResultsCall {
  w: ResultsWrite;
  nowIso: string;
  inTransaction?: (newlySent: string[], applied: ReadonlySet<number>) => void;
}

async function writeResults(exec: PgExec, calls: ResultsCall[]): Promise<string[][]> {
  // Which call first asked to mark each email SENT (an email is marked once).
  const sentBy = new Map<string, { call: number; at: string; rank: number }>();
  calls.forEach((c, i) => {
    for (const id of c.w.sent?.emailIds ?? []) if (!sentBy.has(id)) sentBy.set(id, { call: i, at: c.w.sent!.at, rank: c.w.sent!.rank });
  });
  // A row another node claimed since (it took the writer for dead) is left to it (ResultsWrite.owner).
  const updates = calls.flatMap((c) => c.w.updates.map((u) => ({ ...u, nowIso: c.nowIso, owner: c.w.owner ?? null })));
  const marked = await exec.query<{ k: 's' | 'u'; id: string }>(MARK_SQL, [
    [...sentBy.keys()],
    [...sentBy.values()].map((s) => s.at),
    updates.map((u) => u.id),
    updates.map((u) => u.state),
    updates.map((u) => u.attempts),
    updates.map((u) => u.nextAttemptAt),
    updates.map((u) => u.code),
    updates.map((u) => u.response),
    updates.map((u) => u.mxHost),
    updates.map((u) => u.nowIso),
    updates.map((u) => u.owner),
  ]);
  const sent = new Set(marked.filter((r) => r.k === 's').map((r) => r.id));
  const updated = new Set(marked.filter((r) => r.k === 'u').map((r) => Number(r.id)));

  const newlySent: string[][] = calls.map(() => []);
  const applied: Set<number>[] = calls.map(() => new Set());
  const events: StatusEventWrite[] = [];
  for (const [id, s] of sentBy) {
    if (!sent.has(id)) continue;
    newlySent[s.call]!.push(id);
    events.push({ emailId: id, status: 'SENT', rank: s.rank, data: null, at: s.at });
  }
  const suppressions: ResultsWrite['suppressions'] = [];
  const traces: NonNullable<ResultsWrite['traces']> = [];
  calls.forEach((c, i) => {
    for (const u of c.w.updates) if (updated.has(u.id)) applied[i]!.add(u.id);
    // A row closed meanwhile keeps its outcome: the late result's events and suppressions are dropped.
    const stillOpen = (x: { deliveryId?: number }) => x.deliveryId === undefined || applied[i]!.has(x.deliveryId);
    events.push(...c.w.events.filter(stillOpen));
    suppressions.push(...c.w.suppressions.filter(stillOpen));
    traces.push(...(c.w.traces ?? []));
  });
  if (events.length || suppressions.length || traces.length) {
    await exec.run(RECORD_SQL, [
      events.map((e) => e.emailId),
      events.map((e) => e.status),
      events.map((e) => (e.data === undefined || e.data === null ? null : JSON.stringify(e.data))),
      events.map((e) => e.at),
      events.map((e) => e.rank),
      suppressions.map((x) => x.teamId),
      suppressions.map((x) => x.email),
      suppressions.map((x) => x.reason),
      suppressions.map((x) => x.source),
      suppressions.map((x) => x.at),
      traces.map((t) => t.email_id),
      traces.map((t) => t.team_id),
      traces.map((t) => t.rcpt_domain),
      traces.map((t) => t.started_at),
      traces.map((t) => t.mx_host ?? null),
      traces.map((t) => t.address ?? null),
      traces.map((t) => t.source ?? null),
      traces.map((t) => t.source_name ?? null),
      traces.map((t) => t.tls_json ?? null),
      traces.map((t) => t.results_json),
      traces.map((t) => t.transcript_json),
    ]);
  }
  calls.forEach((c, i) => c.inTransaction?.(newlySent[i]!, applied[i]!));
  return newlySent;
}

export function pgDeliveries(db: Kysely<Database>): Partial<DeliveriesRepository> {
  const pool = pgPoolOf(db);
  const exec = clientExec(pool);
  const results = sharedOf(db, 'delivery-results', () => createPgBatcher<ResultsCall, string[]>(pool, writeResults, { maxConcurrent: 2 }));
  let lastParkMs = 0;
  return {
    async claimDue(owner: string, nowMs: number, leaseMs: number, limit: number, skipDomains: readonly string[] = []): Promise<DeliveryRow[]> {
      if (nowMs - lastParkMs >= PARK_INTERVAL_MS || nowMs < lastParkMs) {
        lastParkMs = nowMs;
        await exec.run(PARK_HELD_SQL, [nowMs]);
      }
      return exec.query<DeliveryRow>(CLAIM_SQL, [owner, nowMs + leaseMs, nowMs, [...skipDomains], limit]);
    },

    async parkLeases(ids: number[], owner: string, untilMs: number, reason: string, nowIso: string): Promise<void> {
      if (!ids.length) return;
      await exec.run(
        `update deliveries set lease_owner = null, lease_until = null, next_attempt_at = $1, held_reason = $2, updated_at = $3 where id = any($4::bigint[]) and state = 'queued' and lease_owner = $5`,
        [untilMs, reason, nowIso, ids, owner],
      );
    },

    async renewLeases(ids: number[], owner: string, untilMs: number): Promise<number> {
      if (!ids.length) return 0;
      return exec.run(`update deliveries set lease_until = $1 where id = any($2::bigint[]) and lease_owner = $3 and state = 'queued'`, [untilMs, ids, owner]);
    },

    async releaseExpiredLeases(nowMs: number): Promise<number> {
      return exec.run('update deliveries set lease_owner = null, lease_until = null where lease_owner is not null and lease_until < $1', [nowMs]);
    },

    async applyResults(w: ResultsWrite, nowIso: string, inTransaction?: (newlySent: string[], applied: ReadonlySet<number>) => void): Promise<string[]> {
      return results.write({ w, nowIso, inTransaction }, { coalesceMs: RESULTS_COALESCE_MS });
    },

    async pruneAttempts(beforeMs: number, limit = 5000): Promise<number> {
      return exec.run('delete from delivery_attempts where id in (select id from delivery_attempts where started_at < $1 order by started_at limit $2)', [beforeMs, limit]);
    },
  };
}
