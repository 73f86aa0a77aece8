import type { Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// Sandbox mode's capture mailbox: each message the engine would have handed to an MX, as it
// would have gone out (signed), with its envelope and parsed parts.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('sandbox_messages')
    .addColumn('id', 'text', (c) => c.primaryKey()) // sm_...
    .addColumn('team_id', 'integer', (c) => c.notNull().references('teams.id').onDelete('cascade'))
    .addColumn('domain_id', 'integer', (c) => c.notNull()) // the sending domain (a domain-bound key sees its own)
    .addColumn('email_id', 'text', (c) => c.notNull())
    .addColumn('mail_from', 'text', (c) => c.notNull()) // envelope MAIL FROM (the VERP return path)
    .addColumn('rcpt_to_json', 'text', (c) => c.notNull()) // envelope recipients of this transaction
    .addColumn('subject', 'text')
    .addColumn('size_bytes', 'integer', (c) => c.notNull())
    .addColumn('parsed_json', 'text', (c) => c.notNull()) // headers, bodies, addresses, attachment metadata
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('sandbox_messages_team_created').on('sandbox_messages').columns(['team_id', 'created_at']).execute();
  await db.schema.createIndex('sandbox_messages_email').on('sandbox_messages').column('email_id').execute();

  // The signed message, apart so list queries never page it in.
  await db.schema
    .createTable('sandbox_message_raw')
    .addColumn('sandbox_message_id', 'text', (c) => c.primaryKey().references('sandbox_messages.id').onDelete('cascade'))
    .addColumn('raw', 'blob', (c) => c.notNull())
    .execute();
}
