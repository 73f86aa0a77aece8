import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// The envelope sender (MAIL FROM) of mail that came in by SMTP submission, for its bounce
// notices (submission.bounceNotices); null for every other send and every existing row.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table emails add column submitted_by text`.execute(db);
}
