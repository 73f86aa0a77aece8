import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// The give-up age counts from when a delivery became due, not from when its email was
// accepted: a send scheduled 4 days ahead failed on its first 4xx. The column says so now;
// rows of scheduled emails still waiting get their scheduled time.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table deliveries rename column accepted_at to due_since`.execute(db);
  await sql`update deliveries set due_since = next_attempt_at where state = 'queued' and attempts = 0 and next_attempt_at > due_since`.execute(db);
}
