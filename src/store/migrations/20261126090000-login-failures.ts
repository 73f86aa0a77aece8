import type { Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// Failed console sign-ins (docs/console.md), counted in the store so the limits hold for every
// node of a cluster and across restarts. One row per failure and key (the account's and the
// client address's, both hashed); rows older than the window are pruned.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('login_failures')
    .addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('at_ms', 'integer', (c) => c.notNull()) // epoch ms
    .execute();
  await db.schema.createIndex('login_failures_key_at').on('login_failures').columns(['key', 'at_ms']).execute();
  await db.schema.createIndex('login_failures_at').on('login_failures').column('at_ms').execute();
}
