import { SUSPENSION_MATCHES } from '../repositories/suspension-sql.js';

/*
 * Queue suspensions in PostgreSQL's SQL (store/repositories/suspension-sql.ts is SQLite's): a
 * delivery `d` is held when an active suspension matches every field it sets. `now` is the
 * placeholder of the current time in epoch ms ($n).
 */
export function heldBySuspension(now: string): string {
  return `exists (select 1 from queue_suspensions s where s.until_ms > ${now} and ${SUSPENSION_MATCHES})`;
}

/** The active suspension that holds delivery `d` longest ($1: now, $2: the delivery's id). */
export const HOLDING_SUSPENSION_SQL = `select s.* from queue_suspensions s, deliveries d
  where s.until_ms > $1 and d.id = $2 and ${SUSPENSION_MATCHES} order by s.until_ms desc, s.id limit 1`;

/** Moves due rows an active suspension holds to the end of the latest one holding them ($1: now). */
export const PARK_HELD_SQL = `update deliveries as d set next_attempt_at = (select max(s.until_ms) from queue_suspensions s where s.until_ms > $1 and ${SUSPENSION_MATCHES})
  where d.state = 'queued' and d.lease_owner is null and d.next_attempt_at <= $1 and ${heldBySuspension('$1')}
    and exists (select 1 from queue_suspensions where until_ms > $1)`;
