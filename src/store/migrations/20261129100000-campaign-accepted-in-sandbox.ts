import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// Whether a campaign was scheduled, started or last resumed by a process in sandbox mode (1) or
// not (0): its batches make their emails as accepted in that mode (emails.accepted_in_sandbox),
// whichever process runs them. Null for every existing row: not known, the running process's
// mode as before. A run again (a store set back to an earlier migration) finds the column and
// adds nothing.
export async function up(db: Kysely<unknown>): Promise<void> {
  const campaigns = (await db.introspection.getTables()).find((t) => t.name === 'campaigns');
  if (campaigns?.columns.some((c) => c.name === 'accepted_in_sandbox')) return;
  await sql`alter table campaigns add column accepted_in_sandbox integer`.execute(db);
}
