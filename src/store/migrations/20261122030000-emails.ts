import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('emails')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('team_id', 'integer', (c) => c.notNull().references('teams.id').onDelete('cascade'))
    .addColumn('domain_id', 'integer')
    .addColumn('api_key_id', 'integer')
    .addColumn('from_addr', 'text', (c) => c.notNull())
    .addColumn('to_json', 'text', (c) => c.notNull())
    .addColumn('cc_json', 'text')
    .addColumn('bcc_json', 'text')
    .addColumn('reply_to_json', 'text')
    .addColumn('subject', 'text', (c) => c.notNull())
    .addColumn('text_body', 'text')
    .addColumn('html_body', 'text')
    .addColumn('headers_json', 'text')
    .addColumn('attachments_json', 'text')
    .addColumn('tags_json', 'text', (c) => c.notNull().defaultTo('[]'))
    .addColumn('template_id', 'text')
    .addColumn('campaign_id', 'text')
    .addColumn('contact_id', 'text')
    .addColumn('in_reply_to', 'text')
    .addColumn('references_json', 'text')
    .addColumn('message_id', 'text', (c) => c.notNull())
    .addColumn('scheduled_at', 'text')
    .addColumn('latest_status', 'text', (c) => c.notNull())
    .addColumn('status_rank', 'integer', (c) => c.notNull())
    .addColumn('sent_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('emails_team_created').on('emails').columns(['team_id', 'created_at']).execute();
  await db.schema.createIndex('emails_message_id').on('emails').column('message_id').execute();

  await db.schema
    .createTable('email_tags')
    .addColumn('email_id', 'text', (c) => c.notNull().references('emails.id').onDelete('cascade'))
    .addColumn('team_id', 'integer', (c) => c.notNull())
    .addColumn('tag', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('email_tags_pk', ['email_id', 'tag'])
    .execute();
  await db.schema.createIndex('email_tags_team_tag').on('email_tags').columns(['team_id', 'tag']).execute();

  await db.schema
    .createTable('email_events')
    .addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
    .addColumn('email_id', 'text', (c) => c.notNull().references('emails.id').onDelete('cascade'))
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('data_json', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('email_events_email').on('email_events').columns(['email_id', 'id']).execute();

  // One row per recipient: its own state, attempts, last reply and next attempt (architecture.md, Decisions: delivery is per recipient).
  await db.schema
    .createTable('deliveries')
    .addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
    .addColumn('email_id', 'text', (c) => c.notNull().references('emails.id').onDelete('cascade'))
    .addColumn('team_id', 'integer', (c) => c.notNull())
    .addColumn('recipient', 'text', (c) => c.notNull())
    .addColumn('rcpt_domain', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull()) // to | cc | bcc
    .addColumn('state', 'text', (c) => c.notNull()) // queued | delivered | bounced | failed | cancelled
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('next_attempt_at', 'integer', (c) => c.notNull()) // epoch ms
    .addColumn('lease_owner', 'text')
    .addColumn('lease_until', 'integer') // epoch ms
    .addColumn('last_code', 'integer')
    .addColumn('last_response', 'text')
    .addColumn('mx_host', 'text')
    .addColumn('accepted_at', 'integer', (c) => c.notNull()) // epoch ms, for the give-up age
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await sql`create index deliveries_due on deliveries(next_attempt_at) where state = 'queued'`.execute(db);
  await db.schema.createIndex('deliveries_email').on('deliveries').column('email_id').execute();

  await db.schema
    .createTable('idempotency_keys')
    .addColumn('team_id', 'integer', (c) => c.notNull())
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('body_hash', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull()) // in_flight | done
    .addColumn('response_json', 'text')
    .addColumn('created_at', 'integer', (c) => c.notNull()) // epoch ms
    .addPrimaryKeyConstraint('idempotency_keys_pk', ['team_id', 'key'])
    .execute();

  await db.schema
    .createTable('suppressions')
    .addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
    .addColumn('team_id', 'integer', (c) => c.notNull().references('teams.id').onDelete('cascade'))
    .addColumn('email', 'text', (c) => c.notNull())
    .addColumn('reason', 'text', (c) => c.notNull())
    .addColumn('source', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('suppressions_team_email').on('suppressions').columns(['team_id', 'email']).unique().execute();
}
