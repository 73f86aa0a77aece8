import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
export async function up(db: Kysely<unknown>): Promise<void> {
  // Webhook endpoints. The secret is kept in clear because every delivery is signed with it
  // (HMAC needs the key); it is only ever shown on creation and rotation.
  await db.schema
    .createTable('webhooks')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('team_id', 'integer', (c) => c.notNull().references('teams.id').onDelete('cascade'))
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('description', 'text')
    .addColumn('event_types_json', 'text', (c) => c.notNull())
    .addColumn('domain_ids_json', 'text') // null = every domain
    .addColumn('secret', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('webhooks_team').on('webhooks').columns(['team_id', 'created_at']).execute();

  // One row per event that matched at least one endpoint: the exact JSON body, so every
  // endpoint and every retry receives the same bytes and the same event id.
  await db.schema
    .createTable('webhook_events')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('team_id', 'integer', (c) => c.notNull().references('teams.id').onDelete('cascade'))
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('domain_id', 'integer')
    .addColumn('body', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('webhook_events_created').on('webhook_events').column('created_at').execute();

  // The outbox: one row per (event, endpoint), claimed with a lease like deliveries.
  await db.schema
    .createTable('webhook_calls')
    .addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
    .addColumn('webhook_id', 'text', (c) => c.notNull().references('webhooks.id').onDelete('cascade'))
    .addColumn('event_id', 'text', (c) => c.notNull().references('webhook_events.id').onDelete('cascade'))
    .addColumn('state', 'text', (c) => c.notNull()) // pending | delivered | failed
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('next_attempt_at', 'integer', (c) => c.notNull()) // epoch ms
    .addColumn('lease_owner', 'text')
    .addColumn('lease_until', 'integer') // epoch ms
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  // The dispatcher claims per endpoint (so one slow endpoint never holds back another):
  // a range scan of this partial index per endpoint, oldest due first.
  await sql`create index webhook_calls_due on webhook_calls(webhook_id, next_attempt_at) where state = 'pending'`.execute(db);
  await db.schema.createIndex('webhook_calls_event').on('webhook_calls').column('event_id').execute();

  // Every HTTP attempt: what was sent (headers; the body is the event's), what came back.
  await db.schema
    .createTable('webhook_attempts')
    .addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement()) // order and cursor
    .addColumn('public_id', 'text', (c) => c.notNull()) // wa_..., the id shown in the API
    .addColumn('call_id', 'integer', (c) => c.notNull().references('webhook_calls.id').onDelete('cascade'))
    .addColumn('webhook_id', 'text', (c) => c.notNull().references('webhooks.id').onDelete('cascade'))
    .addColumn('event_id', 'text', (c) => c.notNull())
    .addColumn('event_type', 'text', (c) => c.notNull())
    .addColumn('attempt', 'integer', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('request_headers_json', 'text', (c) => c.notNull())
    .addColumn('response_status', 'integer')
    .addColumn('response_body', 'text')
    .addColumn('duration_ms', 'integer', (c) => c.notNull())
    .addColumn('error', 'text')
    .addColumn('succeeded', 'integer', (c) => c.notNull())
    .addColumn('next_attempt_at', 'integer') // null when this was the last attempt
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('webhook_attempts_webhook').on('webhook_attempts').columns(['webhook_id', 'id']).execute();
  await db.schema.createIndex('webhook_attempts_created').on('webhook_attempts').column('created_at').execute();

  // Daily rollups for the analytics endpoints, maintained as events happen. domain_id 0 is
  // "no domain" (a NULL would make every row distinct in the primary key).
  await db.schema
    .createTable('email_daily_stats')
    .addColumn('team_id', 'integer', (c) => c.notNull().references('teams.id').onDelete('cascade'))
    .addColumn('domain_id', 'integer', (c) => c.notNull())
    .addColumn('day', 'text', (c) => c.notNull()) // YYYY-MM-DD, UTC
    .addColumn('sent', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('delivered', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('opened', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('clicked', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('bounced', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('hard_bounced', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('complained', 'integer', (c) => c.notNull().defaultTo(0))
    .addPrimaryKeyConstraint('email_daily_stats_pk', ['team_id', 'domain_id', 'day'])
    .execute();

  // Opens and clicks count once per email: the first one inserts here and bumps the rollup.
  await db.schema
    .createTable('email_engagement_counted')
    .addColumn('email_id', 'text', (c) => c.notNull().references('emails.id').onDelete('cascade'))
    .addColumn('kind', 'text', (c) => c.notNull()) // opened | clicked
    .addPrimaryKeyConstraint('email_engagement_counted_pk', ['email_id', 'kind'])
    .execute();
}
