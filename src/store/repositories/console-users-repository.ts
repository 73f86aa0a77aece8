import type { Selectable } from 'kysely';
import type { Db } from '../db.js';
import { transact } from '../store-context.js';
import type { ConsoleSessionsTable, ConsoleUsersTable } from '../tables/database.js';

export type ConsoleUserRow = Selectable<ConsoleUsersTable>;
export type ConsoleSessionRow = Selectable<ConsoleSessionsTable>;

/** Console users and their sessions (docs/console.md). */
export function createConsoleUsersRepository(db: Db) {
  return {
    /** `inTransaction` runs inside the insert's transaction with the new row (the operator's audit entry commits with it). */
    async insert(u: { teamId: number; email: string; passwordHash: string; operator: boolean; nowIso: string }, inTransaction?: (row: ConsoleUserRow) => void): Promise<ConsoleUserRow> {
      return transact(db, async (trx) => {
        const row = await trx
          .insertInto('console_users')
          .values({ team_id: u.teamId, email: u.email, password_hash: u.passwordHash, operator: u.operator ? 1 : 0, last_login_at: null, created_at: u.nowIso, updated_at: u.nowIso })
          .returningAll()
          .executeTakeFirstOrThrow();
        inTransaction?.(row);
        return row;
      });
    },
    async findById(id: number): Promise<ConsoleUserRow | undefined> {
      return db.selectFrom('console_users').selectAll().where('id', '=', id).executeTakeFirst();
    },
    async findByEmail(email: string): Promise<ConsoleUserRow | undefined> {
      return db.selectFrom('console_users').selectAll().where('email', '=', email).executeTakeFirst();
    },
    async list(): Promise<ConsoleUserRow[]> {
      return db.selectFrom('console_users').selectAll().orderBy('id').execute();
    },
    async count(): Promise<number> {
      const r = await db.selectFrom('console_users').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
      return Number(r.n);
    },
    /** A new password ends every session of the user in the same transaction; `inTransaction` runs in it when the user exists. */
    async setPassword(id: number, passwordHash: string, nowIso: string, inTransaction?: () => void): Promise<boolean> {
      return transact(db, async (trx) => {
        const res = await trx.updateTable('console_users').set({ password_hash: passwordHash, updated_at: nowIso }).where('id', '=', id).executeTakeFirst();
        await trx.deleteFrom('console_sessions').where('user_id', '=', id).execute();
        if (res.numUpdatedRows === 0n) return false;
        inTransaction?.();
        return true;
      });
    },
    async touchLogin(id: number, nowIso: string): Promise<void> {
      await db.updateTable('console_users').set({ last_login_at: nowIso }).where('id', '=', id).execute();
    },
    /** False when there is no such user; otherwise `inTransaction` runs inside the delete's transaction. */
    async delete(id: number, inTransaction?: () => void): Promise<boolean> {
      // Sessions go with the user (foreign key cascade; deleted explicitly too in case
      // foreign keys are off on some connection).
      return transact(db, async (trx) => {
        await trx.deleteFrom('console_sessions').where('user_id', '=', id).execute();
        const res = await trx.deleteFrom('console_users').where('id', '=', id).executeTakeFirst();
        if (res.numDeletedRows === 0n) return false;
        inTransaction?.();
        return true;
      });
    },

    async insertSession(s: ConsoleSessionRow): Promise<void> {
      await db.insertInto('console_sessions').values(s).execute();
    },
    async findSession(tokenHash: string): Promise<(ConsoleSessionRow & { user: ConsoleUserRow }) | undefined> {
      const row = await db
        .selectFrom('console_sessions as s')
        .innerJoin('console_users as u', 'u.id', 's.user_id')
        .select(['s.token_hash', 's.user_id', 's.csrf_token', 's.created_at_ms', 's.last_seen_ms'])
        .select(['u.id', 'u.team_id', 'u.email', 'u.password_hash', 'u.operator', 'u.last_login_at', 'u.created_at', 'u.updated_at'])
        .where('s.token_hash', '=', tokenHash)
        .executeTakeFirst();
      if (!row) return undefined;
      const { token_hash, user_id, csrf_token, created_at_ms, last_seen_ms, ...user } = row;
      return { token_hash, user_id, csrf_token, created_at_ms, last_seen_ms, user };
    },
    async touchSession(tokenHash: string, nowMs: number): Promise<void> {
      await db.updateTable('console_sessions').set({ last_seen_ms: nowMs }).where('token_hash', '=', tokenHash).execute();
    },
    async deleteSession(tokenHash: string): Promise<void> {
      await db.deleteFrom('console_sessions').where('token_hash', '=', tokenHash).execute();
    },
    /** Sessions idle since `idleBeforeMs` or created before `createdBeforeMs` are over. */
    async deleteExpiredSessions(idleBeforeMs: number, createdBeforeMs: number): Promise<number> {
      const res = await db
        .deleteFrom('console_sessions')
        .where((eb) => eb.or([eb('last_seen_ms', '<', idleBeforeMs), eb('created_at_ms', '<', createdBeforeMs)]))
        .executeTakeFirst();
      return Number(res.numDeletedRows);
    },
  };
}
export type ConsoleUsersRepository = ReturnType<typeof createConsoleUsersRepository>;
