import type { Kysely } from 'kysely';
import type { Database } from '../tables/database.js';
import type { NewWebhookEvent, OutboxPick, WebhookRow, WebhooksRepository } from '../repositories/webhooks-repository.js';
import { openTxWrites, type PgExec, type TxWriteKind } from './pg-exec.js';
import { transact } from '../store-context.js';

/*
 * The webhook outbox on PostgreSQL. The transactional handler (core/webhooks/webhook-outbox.ts)
 * runs inside the emitter's write and only queues its pick; before that transaction commits,
 * the whole batch is written with three statements: the endpoints of every team involved, the
 * events, the calls (unnest arrays), whatever the number of events.
 */

interface OutboxItem {
  teamId: number;
  pick: OutboxPick;
}

export async function insertOutboxRows(exec: PgExec, rows: { event: NewWebhookEvent; webhookIds: string[]; dueMs: number }[]): Promise<void> {
  if (!rows.length) return;
  await exec.run(
    `insert into webhook_events (id, team_id, type, domain_id, body, created_at)
     select * from unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::text[], $6::text[])`,
    [rows.map((r) => r.event.id), rows.map((r) => r.event.teamId), rows.map((r) => r.event.type), rows.map((r) => r.event.domainId), rows.map((r) => r.event.body), rows.map((r) => r.event.createdAt)],
  );
  const calls = rows.flatMap((r) => r.webhookIds.map((id) => ({ webhookId: id, eventId: r.event.id, due: r.dueMs, at: r.event.createdAt })));
  if (!calls.length) return;
  await exec.run(
    `insert into webhook_calls (webhook_id, event_id, state, attempts, next_attempt_at, created_at, updated_at)
     select w, e, 'pending', 0, d, a, a from unnest($1::text[], $2::text[], $3::bigint[], $4::text[]) as x(w, e, d, a)`,
    [calls.map((c) => c.webhookId), calls.map((c) => c.eventId), calls.map((c) => c.due), calls.map((c) => c.at)],
  );
}

const OUTBOX: TxWriteKind<OutboxItem> = {
  name: 'webhook-outbox',
  order: 10,
  async flush(exec, items) {
    const teams = [...new Set(items.map((i) => i.teamId))];
    // FOR KEY SHARE (what the calls' foreign key check takes anyway): an endpoint another
    // transaction is deleting is waited for and then left out, instead of failing this
    // transaction, and with it the state change the events report, on that foreign key.
    const endpoints = await exec.query<WebhookRow>('select * from webhooks where team_id = any($1::bigint[]) order by created_at, id for key share', [teams]);
    const byTeam = new Map<number, WebhookRow[]>();
    for (const row of endpoints) {
      const list = byTeam.get(row.team_id);
      if (list) list.push(row);
      else byTeam.set(row.team_id, [row]);
    }
    const writes = items.flatMap((i) => i.pick(byTeam.get(i.teamId) ?? []) ?? []);
    await insertOutboxRows(exec, writes);
  },
};

export function pgWebhooks(db: Kysely<Database>): Partial<WebhooksRepository> {
  return {
    enqueueInOpenTransaction(teamId: number, pick: OutboxPick): void {
      openTxWrites('enqueueInOpenTransaction').add(OUTBOX, { teamId, pick });
    },

    async enqueueForOneEndpoint(event: NewWebhookEvent, webhookId: string, dueMs: number): Promise<boolean> {
      // transact(): a COMMIT whose answer is lost is looked up, so the API does not answer 500 for a stored test event.
      return transact(db, async (trx) => {
        // Locked like the outbox's endpoints: one being deleted is gone (false), not a foreign key error.
        const exists = await trx.selectFrom('webhooks').select('id').where('id', '=', webhookId).forKeyShare().executeTakeFirst();
        if (!exists) return false;
        await trx.insertInto('webhook_events').values({ id: event.id, team_id: event.teamId, type: event.type, domain_id: event.domainId, body: event.body, created_at: event.createdAt }).execute();
        await trx
          .insertInto('webhook_calls')
          .values({ webhook_id: webhookId, event_id: event.id, state: 'pending', attempts: 0, next_attempt_at: dueMs, created_at: event.createdAt, updated_at: event.createdAt })
          .execute();
        return true;
      });
    },
  };
}
