import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// Content retention finds received mail and sandbox captures by their age alone, across teams;
// the indexes these tables had lead with the team or the domain, so each daily run read the
// whole table. Plain indexes: nothing in their WHERE is fixed, and neither table is on the
// send path (a received email is written by the inbound listener, a capture in sandbox mode
// only).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create index received_emails_created on received_emails(created_at)`.execute(db);
  await sql`create index sandbox_messages_created on sandbox_messages(created_at)`.execute(db);
}
