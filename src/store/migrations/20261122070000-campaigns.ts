import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('campaigns')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('team_id', 'integer', (c) => c.notNull().references('teams.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('from_addr', 'text', (c) => c.notNull())
    .addColumn('subject', 'text', (c) => c.notNull())
    .addColumn('preview_text', 'text')
    .addColumn('contact_book_id', 'text', (c) => c.notNull())
    .addColumn('segment_id', 'text')
    .addColumn('content', 'text')
    .addColumn('html', 'text')
    .addColumn('text_body', 'text')
    .addColumn('reply_to_json', 'text', (c) => c.notNull().defaultTo('[]'))
    .addColumn('cc_json', 'text', (c) => c.notNull().defaultTo('[]'))
    .addColumn('bcc_json', 'text', (c) => c.notNull().defaultTo('[]'))
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('scheduled_at', 'text')
    .addColumn('batch_size', 'integer', (c) => c.notNull())
    // Durable progress: contacts are taken in id order after this cursor.
    .addColumn('cursor', 'text')
    .addColumn('next_batch_at', 'integer') // epoch ms
    .addColumn('total', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('sent', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('delivered', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('opened', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('clicked', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('bounced', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('complained', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('unsubscribed', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addColumn('deleted_at', 'text')
    .execute();
  await sql`create index campaigns_team on campaigns(team_id, created_at) where deleted_at is null`.execute(db);
  await sql`create index campaigns_due on campaigns(status) where deleted_at is null and status in ('SCHEDULED', 'RUNNING')`.execute(db);

  // One row per contact reached: the primary key is what guarantees nobody gets a campaign
  // twice, and it is written in the same transaction as the contact's email.
  await db.schema
    .createTable('campaign_recipients')
    .addColumn('campaign_id', 'text', (c) => c.notNull().references('campaigns.id').onDelete('cascade'))
    .addColumn('contact_id', 'text', (c) => c.notNull())
    .addColumn('email_id', 'text', (c) => c.notNull())
    // Which statuses were already counted for this recipient (counters move once per email).
    .addColumn('counted', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('unsubscribed', 'integer', (c) => c.notNull().defaultTo(0))
    .addPrimaryKeyConstraint('campaign_recipients_pk', ['campaign_id', 'contact_id'])
    .execute();
  await db.schema.createIndex('campaign_recipients_email').on('campaign_recipients').column('email_id').execute();
}
