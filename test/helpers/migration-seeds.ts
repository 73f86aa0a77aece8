import { sql, type Kysely } from 'kysely';

// Rows written straight into a store held at an older migration, as a release of that time
// stored them, for the tests of the migrations that re-key or merge them.

/** The time seeded rows carry unless a test names another. */
export const SEEDED_AT = '2026-11-20T09:00:00.000Z';

export async function addTeam(db: Kysely<any>, name: string): Promise<number> {
  return Number((await sql<{ id: number }>`insert into teams (name, created_at, updated_at) values (${name}, ${SEEDED_AT}, ${SEEDED_AT}) returning id`.execute(db)).rows[0]!.id);
}

export const addBook = (db: Kysely<any>, team: number, id: string) =>
  sql`insert into contact_books (id, team_id, name, emoji, created_at, updated_at) values (${id}, ${team}, 'b', 'x', ${SEEDED_AT}, ${SEEDED_AT})`.execute(db);

export type ContactSeed = { id: string; team: number; book: string; email: string; first?: string | null; last?: string | null; subscribed?: number; reason?: string | null; props?: string; at?: string };

export const addContact = (db: Kysely<any>, c: ContactSeed) =>
  sql`insert into contacts (id, team_id, contact_book_id, email, first_name, last_name, subscribed, unsubscribe_reason, properties_json, created_at, updated_at)
    values (${c.id}, ${c.team}, ${c.book}, ${c.email}, ${c.first ?? null}, ${c.last ?? null}, ${c.subscribed ?? 1}, ${c.reason ?? null}, ${c.props ?? '{}'}, ${c.at ?? SEEDED_AT}, ${c.at ?? SEEDED_AT})`.execute(db);
