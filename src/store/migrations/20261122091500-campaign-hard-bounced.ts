import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// Campaigns count hard bounces apart from all bounces (the campaign resource of the usesend
// API has hardBounced next to bounced).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table campaigns add column hard_bounced integer not null default 0`.execute(db);
}
