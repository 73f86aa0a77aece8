import type { Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// Content retention's emails past the age that still had to keep their content (scheduled, or a
// delivery queued): each run tries them again, so its scan of the rest moves on past them
// instead of reading all history again from the oldest one kept. Built with the schema builder
// so the id sorts as the emails' ids do on PostgreSQL too (collate "C", pg-schema-plugin.ts).
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.createTable('retention_kept').addColumn('email_id', 'text', (c) => c.primaryKey()).execute();
}
