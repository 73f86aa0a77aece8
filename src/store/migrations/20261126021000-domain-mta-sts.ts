import type { Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// A receiving domain's MTA-STS policy as Posthorn serves it (its mode) and the state of the
// records that publish it and the TLS-RPT address (recommended, never required).
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('domains').addColumn('mta_sts_mode', 'text', (c) => c.notNull().defaultTo('testing')).execute();
  await db.schema.alterTable('domains').addColumn('mta_sts_status', 'text').execute();
  await db.schema.alterTable('domains').addColumn('mta_sts_host_status', 'text').execute();
  await db.schema.alterTable('domains').addColumn('tls_rpt_status', 'text').execute();
}
