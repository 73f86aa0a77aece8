import type { Kysely } from 'kysely';
import type { Database } from '../tables/database.js';
import type { DeliveryRow } from '../repositories/deliveries-repository.js';
import type { DestinationRow, QueueRepository, QueueSelector, QueueState, SuspensionRow } from '../repositories/queue-repository.js';
import { pgPoolOf } from './pg-context.js';
import { clientExec, kyselyExec } from './pg-exec.js';
import { heldBySuspension, HOLDING_SUSPENSION_SQL, PARK_HELD_SQL } from './pg-suspension-sql.js';
import { transact } from '../store-context.js';

/* The operator's queue views and actions (store/repositories/queue-repository.ts) in PostgreSQL's SQL. */

/** Numbered parameters, added as a statement is built. */
class Params {
  readonly values: unknown[] = [];
  add(v: unknown): string {
    this.values.push(v);
    return `$${this.values.length}`;
  }
}

/** The state of a queued row; mail traffic shaping parked (a hold, the rate, the warm-up budget) counts as suspended. */
function stateSql(now: string): string {
  return `case when d.lease_owner is not null then 'inflight'
    when ${heldBySuspension(now)} then 'suspended'
    when d.held_reason is not null and d.next_attempt_at > ${now} then 'suspended'
    when d.next_attempt_at <= ${now} then 'ready'
    when d.attempts > 0 then 'deferred' else 'scheduled' end`;
}

function selectorSql(sel: QueueSelector, p: Params): string {
  const parts: string[] = [];
  if (sel.destination !== undefined) parts.push(`d.rcpt_domain = ${p.add(sel.destination)}`);
  if (sel.teamId !== undefined) parts.push(`d.team_id = ${p.add(sel.teamId)}`);
  if (sel.campaignId !== undefined) parts.push(`d.email_id in (select id from emails where campaign_id = ${p.add(sel.campaignId)})`);
  if (sel.emailIds !== undefined) parts.push(`d.email_id = any(${p.add(sel.emailIds)}::text[])`);
  return parts.length ? parts.map((x) => `(${x})`).join(' and ') : 'true';
}

export function pgQueue(db: Kysely<Database>): Partial<QueueRepository> {
  const exec = clientExec(pgPoolOf(db));
  return {
    async totals(nowMs: number): Promise<Record<QueueState, number>> {
      const rows = await exec.query<{ state: QueueState; n: number }>(`select ${stateSql('$1')} as state, count(*) as n from deliveries d where d.state = 'queued' group by 1`, [nowMs]);
      const out: Record<QueueState, number> = { ready: 0, scheduled: 0, deferred: 0, inflight: 0, suspended: 0 };
      for (const r of rows) out[r.state] = r.n;
      return out;
    },

    async oldestReadyMs(nowMs: number): Promise<number | null> {
      const [r] = await exec.query<{ due: number | null }>(
        `select min(d.next_attempt_at) as due from deliveries d where d.state = 'queued' and d.lease_owner is null and d.next_attempt_at <= $1 and not ${heldBySuspension('$1')}`,
        [nowMs],
      );
      return r?.due ?? null;
    },

    async countsForMetrics(nowMs: number) {
      return exec.query<{ state: QueueState; domain: string; mxHost: string | null; count: number }>(
        `select ${stateSql('$1')} as state, d.rcpt_domain as domain, d.mx_host as "mxHost", count(*) as count from deliveries d where d.state = 'queued' group by 1, 2, 3`,
        [nowMs],
      );
    },

    async byDestination(nowMs: number, limit: number): Promise<DestinationRow[]> {
      return exec.query<DestinationRow>(
        `select d.rcpt_domain as destination, count(*) as queued,
           count(*) filter (where d.lease_owner is not null) as inflight,
           count(*) filter (where d.lease_owner is null and d.attempts > 0 and d.next_attempt_at > $1 and d.held_reason is null and not ${heldBySuspension('$1')}) as deferred,
           count(*) filter (where d.lease_owner is null and (${heldBySuspension('$1')} or (d.held_reason is not null and d.next_attempt_at > $1))) as suspended,
           min(case when d.lease_owner is null then d.next_attempt_at end) as "oldestDueMs",
           (select x.last_response from deliveries x where x.rcpt_domain = d.rcpt_domain and x.last_response is not null order by x.updated_at desc limit 1) as "lastResponse",
           (select x.last_code from deliveries x where x.rcpt_domain = d.rcpt_domain and x.last_response is not null order by x.updated_at desc limit 1) as "lastCode",
           (select x.mx_host from deliveries x where x.rcpt_domain = d.rcpt_domain and x.mx_host is not null order by x.updated_at desc limit 1) as "mxHost"
         from deliveries d where d.state = 'queued' group by d.rcpt_domain order by queued desc, destination limit $2`,
        [nowMs, limit],
      );
    },

    async messages(nowMs: number, sel: QueueSelector, state: QueueState | undefined, limit: number, afterId: number) {
      const p = new Params();
      const now = p.add(nowMs);
      const after = p.add(afterId);
      const where = selectorSql(sel, p);
      const st = p.add(state ?? null);
      const lim = p.add(limit);
      return exec.query<DeliveryRow & { queue_state: QueueState }>(
        `select * from (select d.*, ${stateSql(now)} as queue_state from deliveries d where d.state = 'queued' and d.id > ${after} and ${where}) q
         where ${st}::text is null or queue_state = ${st}::text order by id limit ${lim}`,
        p.values,
      );
    },

    async retryNow(sel: QueueSelector, nowMs: number, nowIso: string, inTransaction?: (retried: number) => void): Promise<number> {
      const p = new Params();
      const now = p.add(nowMs);
      const set = `next_attempt_at = ${now}, updated_at = ${p.add(nowIso)}`;
      // A scheduled send not due yet (due_since is its time) keeps its time.
      const text = `update deliveries as d set ${set} where d.state = 'queued' and d.lease_owner is null and d.due_since <= ${now} and ${selectorSql(sel, p)}`;
      if (!inTransaction) return exec.run(text, p.values);
      return transact(db, async (trx) => {
        const retried = await kyselyExec(trx).run(text, p.values);
        inTransaction(retried);
        return retried;
      });
    },

    async heldBySuspension(sel: QueueSelector, nowMs: number): Promise<number> {
      const p = new Params();
      const now = p.add(nowMs);
      const [r] = await exec.query<{ n: string }>(
        `select count(*) as n from deliveries d where d.state = 'queued' and d.lease_owner is null and d.due_since <= ${now} and ${selectorSql(sel, p)} and ${heldBySuspension(now)}`,
        p.values,
      );
      return Number(r?.n ?? 0);
    },

    async leaseForBounce(sel: QueueSelector, owner: string, untilMs: number, limit: number): Promise<DeliveryRow[]> {
      const p = new Params();
      const set = `lease_owner = ${p.add(owner)}, lease_until = ${p.add(untilMs)}`;
      const where = selectorSql(sel, p);
      return exec.query<DeliveryRow>(
        `update deliveries set ${set}
         where id in (select d.id from deliveries d where d.state = 'queued' and d.lease_owner is null and ${where} order by d.id limit ${p.add(limit)} for update of d skip locked)
         returning *`,
        p.values,
      );
    },

    async insertSuspension(row: SuspensionRow, nowMs: number, inTransaction?: (parked: number) => void): Promise<number> {
      return transact(db, async (trx) => {
        // What other suspensions already hold is parked first, so the count is this one's alone.
        await kyselyExec(trx).run(PARK_HELD_SQL, [nowMs]);
        await trx.insertInto('queue_suspensions').values(row).execute();
        const parked = await kyselyExec(trx).run(PARK_HELD_SQL, [nowMs]);
        inTransaction?.(parked);
        return parked;
      });
    },

    async activeSuspensions(nowMs: number): Promise<SuspensionRow[]> {
      return exec.query<SuspensionRow>('select * from queue_suspensions where until_ms > $1 order by until_ms, id', [nowMs]);
    },

    async holdingSuspension(deliveryId: number, nowMs: number): Promise<SuspensionRow | undefined> {
      return (await exec.query<SuspensionRow>(HOLDING_SUSPENSION_SQL, [nowMs, deliveryId]))[0];
    },

    async endSuspension(id: string, nowMs: number, nowIso: string, inTransaction?: (ended: SuspensionRow) => void): Promise<SuspensionRow | undefined> {
      return transact(db, async (trx) => {
        const s = await trx.deleteFrom('queue_suspensions').where('id', '=', id).where('until_ms', '>', nowMs).returningAll().executeTakeFirst();
        if (!s) return undefined;
        // Parked rows carry the suspension's end as their due time; another suspension that
        // still holds some of them parks them again at the next claim.
        let q = trx.updateTable('deliveries').set({ next_attempt_at: nowMs, updated_at: nowIso }).where('state', '=', 'queued').where('lease_owner', 'is', null).where('next_attempt_at', '=', s.until_ms);
        if (s.destination !== null) q = q.where('rcpt_domain', '=', s.destination);
        if (s.team_id !== null) q = q.where('team_id', '=', s.team_id);
        const campaignId = s.campaign_id;
        if (campaignId !== null) q = q.where('email_id', 'in', (eb) => eb.selectFrom('emails').select('emails.id').where('emails.campaign_id', '=', campaignId));
        await q.execute();
        inTransaction?.(s);
        return s;
      });
    },

    async pruneSuspensions(beforeMs: number): Promise<number> {
      return exec.run('delete from queue_suspensions where until_ms < $1', [beforeMs]);
    },
  };
}
