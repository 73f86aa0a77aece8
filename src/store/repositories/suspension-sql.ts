import type BetterSqlite3 from 'better-sqlite3';

/*
 * Queue suspensions in SQL, shared by the claim (which never takes held mail) and the
 * operator's queue views. A delivery is held when an active suspension matches every field
 * it sets (destination, team, campaign). `d` is the deliveries table; the first parameter is
 * now (epoch ms).
 */
/** Suspension `s` holds delivery `d` (when active): every field it sets matches. Both dialects. */
export const SUSPENSION_MATCHES = `(s.destination is null or s.destination = d.rcpt_domain)
  and (s.team_id is null or s.team_id = d.team_id)
  and (s.campaign_id is null or s.campaign_id = (select e.campaign_id from emails e where e.id = d.email_id))`;

export const HELD_BY_SUSPENSION = `exists (select 1 from queue_suspensions s where s.until_ms > ? and ${SUSPENSION_MATCHES})`;

/** The active suspension that holds delivery `d` longest (parameters: now, delivery id). */
export const HOLDING_SUSPENSION = `select s.* from queue_suspensions s, deliveries d
  where s.until_ms > ? and d.id = ? and ${SUSPENSION_MATCHES} order by s.until_ms desc, s.id limit 1`;

/**
 * Moves due rows that an active suspension holds to the end of the latest one holding them, so
 * the claim's walk of the due index stops meeting them (the claim skips held rows either way).
 * Not an attempt: the attempt count and events are untouched. Runs inside a group-commit write.
 */
export function parkHeldSync(sqlite: BetterSqlite3.Database, nowMs: number): number {
  if (!sqlite.prepare('select 1 from queue_suspensions where until_ms > ? limit 1').get(nowMs)) return 0;
  return sqlite
    .prepare(
      `update deliveries as d set next_attempt_at = (select max(s.until_ms) from queue_suspensions s where s.until_ms > ? and ${SUSPENSION_MATCHES})
       where d.state = 'queued' and d.lease_owner is null and d.next_attempt_at <= ? and ${HELD_BY_SUSPENSION}`,
    )
    .run(nowMs, nowMs, nowMs).changes;
}
