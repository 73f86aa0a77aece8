import type { Kysely } from 'kysely';
import type { Database } from '../tables/database.js';
import { authQueryOf, type ApiKeyAuthRow, type ApiKeysRepository } from '../repositories/api-keys-repository.js';
import type { SuppressionsRepository } from '../repositories/suppressions-repository.js';
import { pgPoolOf } from './pg-context.js';
import { clientExec } from './pg-exec.js';

/*
 * The per-request reads SQLite answers with prepared statements inside the process (the key,
 * the suppressed recipients): on PostgreSQL, one prepared statement each.
 */

export function pgApiKeys(db: Kysely<Database>): Partial<ApiKeysRepository> {
  const exec = clientExec(pgPoolOf(db));
  const auth = authQueryOf(db).sql;
  return {
    async findForAuth(publicId: string): Promise<ApiKeyAuthRow | undefined> {
      const [row] = await exec.query<ApiKeyAuthRow>(auth, [publicId]);
      return row;
    },
  };
}

export function pgSuppressions(db: Kysely<Database>): Partial<SuppressionsRepository> {
  const exec = clientExec(pgPoolOf(db));
  return {
    async findSuppressed(teamId: number, emails: string[]): Promise<Set<string>> {
      if (!emails.length) return new Set();
      const rows = await exec.query<{ email: string }>('select email from suppressions where team_id = $1 and email = any($2::text[])', [teamId, [...new Set(emails)]]);
      return new Set(rows.map((r) => r.email));
    },
  };
}
