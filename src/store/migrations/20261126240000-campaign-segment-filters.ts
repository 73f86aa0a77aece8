import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// The segment filter a campaign started with: its audience stays the one counted at the start
// when the segment is edited or deleted while it runs. Null for campaigns without a segment and
// for those started before this column existed (they keep reading the live segment).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table campaigns add column segment_filters_json text`.execute(db);
}
