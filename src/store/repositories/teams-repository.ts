import type { Db } from '../db.js';
import { transact } from '../store-context.js';

export interface TeamRow {
  id: number;
  name: string;
  rateLimit: number | null;
  /** Egress pool of the team's mail; null: the default pool. */
  pool: string | null;
  createdAt: string;
}

const teamOf = (r: { id: number; name: string; rate_limit: number | null; pool: string | null; created_at: string }): TeamRow => ({
  id: r.id,
  name: r.name,
  rateLimit: r.rate_limit,
  pool: r.pool,
  createdAt: r.created_at,
});

export function createTeamsRepository(db: Db) {
  return {
    /** `inTransaction` runs inside the insert's transaction with the new team (the operator's audit entry commits with it). */
    async insert(name: string, nowIso: string, rateLimit: number | null = null, inTransaction?: (team: TeamRow) => void): Promise<number> {
      return transact(db, async (trx) => {
        const row = await trx.insertInto('teams').values({ name, rate_limit: rateLimit, created_at: nowIso, updated_at: nowIso }).returningAll().executeTakeFirstOrThrow();
        inTransaction?.(teamOf(row));
        return row.id;
      });
    },
    async findById(id: number): Promise<TeamRow | undefined> {
      const r = await db.selectFrom('teams').selectAll().where('id', '=', id).executeTakeFirst();
      return r && teamOf(r);
    },
    async list(): Promise<TeamRow[]> {
      const rows = await db.selectFrom('teams').selectAll().orderBy('id').execute();
      return rows.map(teamOf);
    },
    /** Undefined when there is no such team; otherwise `inTransaction` runs inside the update's transaction with the stored row. */
    async update(id: number, changes: { name?: string; rateLimit?: number | null; pool?: string | null }, nowIso: string, inTransaction?: (team: TeamRow) => void): Promise<TeamRow | undefined> {
      return transact(db, async (trx) => {
        const r = await trx
          .updateTable('teams')
          .set({
            ...(changes.name !== undefined ? { name: changes.name } : {}),
            ...(changes.rateLimit !== undefined ? { rate_limit: changes.rateLimit } : {}),
            ...(changes.pool !== undefined ? { pool: changes.pool } : {}),
            updated_at: nowIso,
          })
          .where('id', '=', id)
          .returningAll()
          .executeTakeFirst();
        const team = r && teamOf(r);
        if (team) inTransaction?.(team);
        return team;
      });
    },
  };
}
export type TeamsRepository = ReturnType<typeof createTeamsRepository>;
