import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// Open and click tracking chosen per email and per campaign, over the domain's switches:
// 1 on, 0 off, null (every existing row) the domain's setting when the message is composed.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table emails add column open_tracking integer`.execute(db);
  await sql`alter table emails add column click_tracking integer`.execute(db);
  await sql`alter table campaigns add column open_tracking integer`.execute(db);
  await sql`alter table campaigns add column click_tracking integer`.execute(db);
}
