import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// Whether an email was accepted by a process in sandbox mode (1) or not (0): a server in sandbox
// mode captures only the former, and holds real mail still waiting from before it was turned on.
// Null for every existing row: not known, captured as before. A run again (a store set back to
// an earlier migration) finds the column and adds nothing.
export async function up(db: Kysely<unknown>): Promise<void> {
  const emails = (await db.introspection.getTables()).find((t) => t.name === 'emails');
  if (emails?.columns.some((c) => c.name === 'accepted_in_sandbox')) return;
  await sql`alter table emails add column accepted_in_sandbox integer`.execute(db);
}
