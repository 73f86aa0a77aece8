import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// Bounce notices of submitted mail (submission.bounceNotices) waiting to be sent: one row per
// recipient that ended BOUNCED or FAILED, written in the transaction that records the outcome,
// deleted once its notice is sent or given up on. The notice job claims an email's rows with
// a lease (several nodes on PostgreSQL), so one node sends one notice per email at a time.
// team_id is written but not a foreign key (like deliveries): the email's cascade removes the
// rows with the email or its team.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('bounce_notice_recipients')
    .addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
    .addColumn('email_id', 'text', (c) => c.notNull().references('emails.id').onDelete('cascade'))
    .addColumn('team_id', 'integer', (c) => c.notNull())
    .addColumn('recipient', 'text', (c) => c.notNull())
    .addColumn('reply', 'text')
    .addColumn('smtp_code', 'integer')
    .addColumn('mx_host', 'text')
    .addColumn('reason', 'text', (c) => c.notNull())
    .addColumn('status', 'text') // an inbound DSN's RFC 3463 status
    .addColumn('expired', 'integer', (c) => c.notNull()) // 1: given up at the give-up age
    .addColumn('created_at', 'integer', (c) => c.notNull()) // epoch ms: when the recipient ended
    .addColumn('next_attempt_at', 'integer', (c) => c.notNull()) // epoch ms
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0)) // notice sends that failed for now
    .addColumn('first_failure_at', 'integer') // epoch ms: the give-up age counts from it
    .addColumn('lease_owner', 'text')
    .addColumn('lease_until', 'integer') // epoch ms
    .execute();
  // The claim looks for due rows, then takes every row of the emails it picked.
  await sql`create index bounce_notice_recipients_due on bounce_notice_recipients(next_attempt_at)`.execute(db);
  await db.schema.createIndex('bounce_notice_recipients_email').on('bounce_notice_recipients').column('email_id').execute();
}
