import { sql, type Selectable, type SqlBool } from 'kysely';
import type { Db } from '../db.js';
import { groupCommitOf } from '../group-commit.js';
import { withDialect, transact } from '../store-context.js';
import type { SuppressionsTable } from '../tables/database.js';
import { addressLikePatterns } from './address-like-patterns.js';
import { boundedRead } from '../bounded-read.js';

export type SuppressionRow = Selectable<SuppressionsTable>;
export type SuppressionReason = SuppressionsTable['reason'];

/** Up to this many addresses are bound as parameters; more go as one JSON list. */
const MAX_BOUND_ADDRESSES = 16;

export function createSuppressionsRepository(db: Db) {
  const sync = groupCommitOf(db);
  return withDialect(db, 'suppressions', {
    /** Which of these (lowercased) addresses are suppressed for the team. */
    async findSuppressed(teamId: number, emails: string[]): Promise<Set<string>> {
      if (!emails.length) return new Set();
      // Hot path (every send, every delivery claim): prepared statements instead of a Kysely
      // build per call. A send's few addresses are bound one by one (one cached statement per
      // count; a JSON list costs ~5% of a send's CPU); a claim's hundreds go as one JSON list so
      // they do not fill the statement cache with a statement per count.
      const unique = [...new Set(emails)];
      const rows = await sync.read(() =>
        unique.length <= MAX_BOUND_ADDRESSES
          ? (sync.sqlite.prepare(`select email from suppressions where team_id = ? and email in (${unique.map(() => '?').join(', ')})`).all(teamId, ...unique) as { email: string }[])
          : (sync.sqlite.prepare('select email from suppressions where team_id = ? and email in (select value from json_each(?))').all(teamId, JSON.stringify(unique)) as { email: string }[]),
      );
      return new Set(rows.map((r) => r.email));
    },
    /** Adds or keeps an entry (an existing entry keeps its first reason). Returns true when added. */
    async add(teamId: number, email: string, reason: SuppressionReason, source: string | null, nowIso: string): Promise<boolean> {
      const res = await db
        .insertInto('suppressions')
        .values({ team_id: teamId, email, reason, source, created_at: nowIso })
        .onConflict((oc) => oc.columns(['team_id', 'email']).doNothing())
        .executeTakeFirst();
      return Number(res.numInsertedOrUpdatedRows ?? 0n) > 0;
    },
    async addMany(teamId: number, emails: string[], reason: SuppressionReason, source: string | null, nowIso: string): Promise<number> {
      if (!emails.length) return 0;
      let added = 0;
      await transact(db, async (trx) => {
        // In one order for every request: on PostgreSQL two requests inserting the same new
        // addresses in different orders would each wait for a row the other inserted (a deadlock).
        for (const email of [...new Set(emails)].sort()) {
          const res = await trx
            .insertInto('suppressions')
            .values({ team_id: teamId, email, reason, source, created_at: nowIso })
            .onConflict((oc) => oc.columns(['team_id', 'email']).doNothing())
            .executeTakeFirst();
          added += Number(res.numInsertedOrUpdatedRows ?? 0n);
        }
      });
      return added;
    },
    async get(teamId: number, email: string): Promise<SuppressionRow | undefined> {
      return db.selectFrom('suppressions').selectAll().where('team_id', '=', teamId).where('email', '=', email).executeTakeFirst();
    },
    async remove(teamId: number, emails: string[]): Promise<number> {
      if (!emails.length) return 0;
      const res = await db.deleteFrom('suppressions').where('team_id', '=', teamId).where('email', 'in', [...new Set(emails)]).executeTakeFirst();
      return Number(res.numDeletedRows);
    },
    async list(teamId: number, f: { search?: string; reason?: SuppressionReason; offset: number; limit: number }): Promise<{ rows: SuppressionRow[]; total: number }> {
      return boundedRead(db, async (rdb) => {
        let q = rdb.selectFrom('suppressions').where('team_id', '=', teamId);
        if (f.search) {
          // ESCAPE makes the backslashes count: a search for "a_b" means that text, not "a?b". An
          // internationalised domain typed in Unicode also matches its stored A-labels (address-like-patterns.ts).
          const patterns = addressLikePatterns('contains', f.search).map((p) => sql<SqlBool>`email like ${p} escape '\\'`);
          q = q.where(patterns.length === 1 ? patterns[0]! : (eb) => eb.or(patterns));
        }
        if (f.reason) q = q.where('reason', '=', f.reason);
        // One after the other: they share the read's connection.
        const rows = await q.selectAll().orderBy('created_at', 'desc').orderBy('id', 'desc').limit(f.limit).offset(f.offset).execute();
        const total = await q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
        return { rows, total: Number(total.n) };
      });
    },
  });
}
export type SuppressionsRepository = ReturnType<typeof createSuppressionsRepository>;
