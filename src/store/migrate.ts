import { Migrator, type MigrationResultSet } from 'kysely';
import type { Db } from './db.js';
import { MIGRATIONS } from './migrations/index.js';

export interface MigrateOutcome {
  applied: string[];
}

/** Applies every pending migration; throws with the failing migration's name. */
export async function migrateToLatest(db: Db): Promise<MigrateOutcome> {
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => MIGRATIONS },
  });
  const result: MigrationResultSet = await migrator.migrateToLatest();
  if (result.error) {
    const failed = result.results?.find((r) => r.status === 'Error')?.migrationName ?? 'unknown';
    throw new Error(`migration ${failed} failed: ${(result.error as Error).message ?? String(result.error)}`);
  }
  return { applied: (result.results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName) };
}
