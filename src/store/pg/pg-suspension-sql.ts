/*
 * Queue suspensions in PostgreSQL's SQL (store/repositories/suspension-sql.ts is SQLite's): a
 * delivery `d` is held when an active suspension matches every field it sets. `now` is the
 * placeholder of the current time in epoch ms ($n).
 */
export function heldBySuspension(now: string): string {
  return `exists (select 1 from queue_suspensions s where s.until_ms > ${now}
  and (s.destination is null or s.destination = d.rcpt_domain)
  and (s.team_id is null or s.team_id = d.team_id)
  and (s.campaign_id is null or s.campaign_id = (select e.campaign_id from emails e where e.id = d.email_id)))`;
}

/** Moves due rows an active suspension holds to the end of the latest one holding them ($1: now). */
export const PARK_HELD_SQL = `update deliveries as d set next_attempt_at = (select max(s.until_ms) from queue_suspensions s where s.until_ms > $1
    and (s.destination is null or s.destination = d.rcpt_domain) and (s.team_id is null or s.team_id = d.team_id)
    and (s.campaign_id is null or s.campaign_id = (select e.campaign_id from emails e where e.id = d.email_id)))
  where d.state = 'queued' and d.lease_owner is null and d.next_attempt_at <= $1 and ${heldBySuspension('$1')}
    and exists (select 1 from queue_suspensions where until_ms > $1)`;
