import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// The operator's side: server-operator keys, the audit log of their actions, queue suspensions
// (mail held without being attempted) and the trace of each delivery attempt.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('operator_keys')
    .addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('public_id', 'text', (c) => c.notNull().unique())
    .addColumn('secret_hash', 'text', (c) => c.notNull())
    .addColumn('partial_key', 'text', (c) => c.notNull())
    .addColumn('last_used_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('operator_audit')
    .addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
    // null for actions taken with the CLI on the server itself
    .addColumn('key_id', 'integer')
    .addColumn('actor', 'text', (c) => c.notNull())
    .addColumn('action', 'text', (c) => c.notNull())
    .addColumn('target_json', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('queue_suspensions')
    .addColumn('id', 'text', (c) => c.primaryKey())
    // Any of the three may be set; a delivery is held when it matches every one that is.
    .addColumn('destination', 'text')
    .addColumn('team_id', 'integer')
    .addColumn('campaign_id', 'text')
    .addColumn('reason', 'text', (c) => c.notNull())
    .addColumn('until_ms', 'integer', (c) => c.notNull())
    .addColumn('created_by', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await sql`create index queue_suspensions_until on queue_suspensions(until_ms)`.execute(db);

  await db.schema
    .createTable('delivery_attempts')
    .addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
    .addColumn('email_id', 'text', (c) => c.notNull())
    .addColumn('team_id', 'integer', (c) => c.notNull())
    .addColumn('rcpt_domain', 'text', (c) => c.notNull())
    .addColumn('started_at', 'integer', (c) => c.notNull()) // epoch ms
    .addColumn('mx_host', 'text')
    .addColumn('address', 'text')
    .addColumn('source', 'text')
    .addColumn('tls_json', 'text')
    // [{deliveryId, recipient, outcome, code, response}]
    .addColumn('results_json', 'text', (c) => c.notNull())
    // [[ms since started_at, 'C' | 'S' | 'I', line], ...]: client, server, info lines
    .addColumn('transcript_json', 'text', (c) => c.notNull())
    .execute();
  await sql`create index delivery_attempts_email on delivery_attempts(email_id, id)`.execute(db);
  await sql`create index delivery_attempts_started on delivery_attempts(started_at)`.execute(db);
}
