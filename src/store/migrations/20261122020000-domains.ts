import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('domains')
    .addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
    .addColumn('team_id', 'integer', (c) => c.notNull().references('teams.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('region', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('subdomain', 'text')
    .addColumn('dkim_selector', 'text', (c) => c.notNull())
    .addColumn('dkim_private_key', 'text', (c) => c.notNull())
    .addColumn('public_key', 'text', (c) => c.notNull())
    .addColumn('bounce_label', 'text', (c) => c.notNull())
    .addColumn('dkim_status', 'text')
    .addColumn('spf_status', 'text')
    .addColumn('mx_status', 'text')
    .addColumn('dmarc_status', 'text')
    .addColumn('dmarc_added', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('click_tracking', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('open_tracking', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('tracking_domain', 'text')
    .addColumn('tracking_domain_status', 'text')
    .addColumn('tls_policy', 'text', (c) => c.notNull().defaultTo('OPPORTUNISTIC'))
    .addColumn('receiving', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('receiving_mx_status', 'text')
    .addColumn('is_verifying', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('error_message', 'text')
    .addColumn('verification_error', 'text')
    .addColumn('last_checked_at', 'text')
    // Start of the current unverified stretch: FAILED after 72 hours of it.
    .addColumn('unverified_since', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addColumn('deleted_at', 'text')
    .execute();
  // A name may exist once per team among live domains; a deleted one can be added again.
  await sql`create unique index domains_team_name on domains(team_id, name) where deleted_at is null`.execute(db);
  await sql`create index domains_name on domains(name) where deleted_at is null`.execute(db);
}
