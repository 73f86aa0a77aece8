import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// Deleting a domain deletes the keys bound to it, in its transaction; before that, they stayed:
// refused at authentication, yet listed (GET /v1/apiKeys, the operator's keys). Those bound to a
// deleted domain, or to a domain row that is gone, go now. The same statement on both stores, and
// a run again (a store set back to an earlier migration) finds none left.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    delete from api_keys
    where domain_id is not null
      and not exists (select 1 from domains where domains.id = api_keys.domain_id and domains.deleted_at is null)
  `.execute(db);
}
