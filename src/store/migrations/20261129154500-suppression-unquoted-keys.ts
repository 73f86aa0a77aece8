import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// `"ann"@x` and `ann@x` are one mailbox (RFC 5321 4.1.2), and the send path writes it unquoted,
// so it checks the list under `ann@x`. An entry added as `"ann"@x` was keyed with the quotes and
// stopped no send to the mailbox; suppressions are now keyed without quotes a local part does
// not need. Keyed here the same way; a row whose key is taken merges into the row holding it, which
// keeps the reason, source and time of the earlier of the two (a suppression keeps the reason it
// was first stopped for).

const DOT_ATOM_QUOTED = /^"([A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*)"(@.*)$/s;

interface Suppression {
  id: number;
  team_id: number;
  email: string;
  reason: string;
  source: string | null;
  created_at: string;
}

export async function up(db: Kysely<unknown>): Promise<void> {
  const rows = (await sql<Suppression>`select id, team_id, email, reason, source, created_at from suppressions where email like '"%' order by created_at, id`.execute(db)).rows;
  for (const row of rows) {
    const m = DOT_ATOM_QUOTED.exec(row.email);
    if (!m) continue;
    const key = m[1]! + m[2]!;
    const kept = (await sql<Suppression>`select id, created_at from suppressions where team_id = ${row.team_id} and email = ${key}`.execute(db)).rows[0];
    if (!kept) {
      await sql`update suppressions set email = ${key} where id = ${row.id}`.execute(db);
      continue;
    }
    if (row.created_at < kept.created_at) {
      await sql`update suppressions set reason = ${row.reason}, source = ${row.source}, created_at = ${row.created_at} where id = ${kept.id}`.execute(db);
    }
    await sql`delete from suppressions where id = ${row.id}`.execute(db);
  }
}
