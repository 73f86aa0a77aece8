import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// A message the sender retries (after our 451, or when our 250 never reached it) is the same
// SMTP transaction again. Each report and each received copy keeps the hex SHA-256 of the
// transaction as it concerns that row (core/received/transaction-key.ts), unique within its
// team (and domain), so a retry finds what its first attempt already stored instead of storing
// it twice. Rows stored before this column have none (null keys never collide).
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('inbound_reports').addColumn('dedupe_key', 'text').execute();
  await db.schema.alterTable('received_emails').addColumn('dedupe_key', 'text').execute();
  // Unlinked reports (no team) share the scope 0.
  await sql`create unique index inbound_reports_team_dedupe on inbound_reports (coalesce(team_id, 0), dedupe_key)`.execute(db);
  await sql`create unique index received_emails_domain_dedupe on received_emails (team_id, domain_id, dedupe_key)`.execute(db);
}
