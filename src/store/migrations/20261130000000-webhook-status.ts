import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// A webhook endpoint's status ('active', 'paused' by its owner, 'auto_disabled' after too many
// consecutive final failures) and that count of failures, kept on the row so one UPDATE counts
// and switches (core/webhooks/webhook-outbox.ts). Existing endpoints are active with no failures.
// A run again (a store set back to an earlier migration) finds the columns and adds nothing.
export async function up(db: Kysely<unknown>): Promise<void> {
  const webhooks = (await db.introspection.getTables()).find((t) => t.name === 'webhooks');
  if (webhooks?.columns.some((c) => c.name === 'status')) return;
  await sql`alter table webhooks add column status text not null default 'active'`.execute(db);
  await sql`alter table webhooks add column consecutive_failures integer not null default 0`.execute(db);
}
