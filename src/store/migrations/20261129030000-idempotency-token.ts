import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// Which request holds an in-flight idempotency key: a request whose store connection was cut
// may not know whether its claim of the key was stored, and gives up only its own claim, never
// that of another request with the same key (core/emails/email-service.ts). Older rows: null.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table idempotency_keys add column token text`.execute(db);
}
