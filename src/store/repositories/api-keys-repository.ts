import type { Db } from '../db.js';
import { groupCommitOf } from '../group-commit.js';
import { transact, withDialect } from '../store-context.js';

export interface ApiKeyRow {
  id: number;
  teamId: number;
  name: string;
  publicId: string;
  secretHash: string;
  partialKey: string;
  permission: 'FULL' | 'SENDING';
  domainId: number | null;
  lastUsedAt: string | null;
  createdAt: string;
}

export interface ApiKeyAuthRow extends ApiKeyRow {
  teamRateLimit: number | null;
}

const columns = [
  'api_keys.id as id',
  'api_keys.team_id as teamId',
  'api_keys.name as name',
  'api_keys.public_id as publicId',
  'api_keys.secret_hash as secretHash',
  'api_keys.partial_key as partialKey',
  'api_keys.permission as permission',
  'api_keys.domain_id as domainId',
  'api_keys.last_used_at as lastUsedAt',
  'api_keys.created_at as createdAt',
] as const;

/**
 * The key and its team's rate limit, by public id: one indexed lookup per request. A key bound
 * to a deleted domain is no key (deleting a domain deletes its keys; one left from before that,
 * or made while the domain was being deleted, is refused here).
 */
export function authQueryOf(db: Db) {
  return db
    .selectFrom('api_keys')
    .innerJoin('teams', 'teams.id', 'api_keys.team_id')
    .leftJoin('domains', 'domains.id', 'api_keys.domain_id')
    .select([...columns, 'teams.rate_limit as teamRateLimit'])
    .where('api_keys.public_id', '=', '?')
    .where((eb) => eb.or([eb('api_keys.domain_id', 'is', null), eb('domains.deleted_at', 'is', null)]))
    .compile();
}

export function createApiKeysRepository(db: Db) {
  const sync = groupCommitOf(db);
  const authQuery = authQueryOf(db);
  const deleteWhere = (id: number, scope: { teamId?: number; domainId?: number }, inTransaction?: () => void): Promise<boolean> =>
    transact(db, async (trx) => {
      let q = trx.deleteFrom('api_keys').where('id', '=', id);
      if (scope.teamId !== undefined) q = q.where('team_id', '=', scope.teamId);
      if (scope.domainId !== undefined) q = q.where('domain_id', '=', scope.domainId);
      const res = await q.executeTakeFirst();
      if (res.numDeletedRows === 0n) return false;
      inTransaction?.();
      return true;
    });
  return withDialect(db, 'apiKeys', {
    /** `inTransaction` runs inside the insert's transaction with the new id (the operator's audit entry commits with it). */
    async insert(row: Omit<ApiKeyRow, 'id' | 'lastUsedAt'>, inTransaction?: (id: number) => void): Promise<number> {
      return transact(db, async (trx) => {
        const r = await trx
          .insertInto('api_keys')
          .values({
            team_id: row.teamId,
            name: row.name,
            public_id: row.publicId,
            secret_hash: row.secretHash,
            partial_key: row.partialKey,
            permission: row.permission,
            domain_id: row.domainId,
            created_at: row.createdAt,
          })
          .returning('id')
          .executeTakeFirstOrThrow();
        inTransaction?.(r.id);
        return r.id;
      });
    },
    /** One indexed lookup per request: the key and its team's rate limit together. */
    async findForAuth(publicId: string): Promise<ApiKeyAuthRow | undefined> {
      // Hot path (every request): compiled once by Kysely, then run as a prepared statement.
      return sync.read(() => sync.sqlite.prepare(authQuery.sql).get(publicId) as ApiKeyAuthRow | undefined);
    },
    /** domainId: only the keys bound to that domain. */
    async listByTeam(teamId: number, domainId?: number): Promise<ApiKeyRow[]> {
      let q = db.selectFrom('api_keys').select(columns).where('team_id', '=', teamId);
      if (domainId !== undefined) q = q.where('domain_id', '=', domainId);
      return q.orderBy('id').execute();
    },
    async listAll(): Promise<ApiKeyRow[]> {
      return db.selectFrom('api_keys').select(columns).orderBy('id').execute();
    },
    async count(): Promise<number> {
      const r = await db.selectFrom('api_keys').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
      return Number(r.n);
    },
    /** False when there is no such key; otherwise `inTransaction` runs inside the delete's transaction. */
    /** Deletes a key of this team (and of this domain, for a domain-bound caller); false when there is none. */
    async deleteInTeam(id: number, teamId: number, domainId?: number, inTransaction?: () => void): Promise<boolean> {
      return deleteWhere(id, { teamId, domainId }, inTransaction);
    },
    /** The operator's revocation (the CLI): any team's key. Kept apart so a team caller cannot reach it by leaving out its team. */
    async deleteAnyTeam(id: number, inTransaction?: () => void): Promise<boolean> {
      return deleteWhere(id, {}, inTransaction);
    },
    async touch(id: number, nowIso: string): Promise<void> {
      await db.updateTable('api_keys').set({ last_used_at: nowIso }).where('id', '=', id).execute();
    },
  });
}
export type ApiKeysRepository = ReturnType<typeof createApiKeysRepository>;
