import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// When a domain's DNS check last found it verified: a team whose records lapsed no longer acts
// for a name another team verified after that (core/domains/name-owners.ts). A verified domain
// was last found so at its last check; for the others the time is unknown (null).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table domains add column verified_at text`.execute(db);
  await sql`update domains set verified_at = coalesce(last_checked_at, updated_at) where status = 'SUCCESS'`.execute(db);
}
