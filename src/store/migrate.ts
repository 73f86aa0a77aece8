import { Migrator, sql, type MigrationResultSet } from 'kysely';
import type { Db } from './db.js';
import { MIGRATIONS } from './migrations/index.js';
import { isPostgres } from './store-context.js';

export interface MigrateOutcome {
  applied: string[];
}

/** The advisory lock that lets one node at a time migrate a shared PostgreSQL store. */
const MIGRATION_LOCK_KEY = 0x706f7374; // "post"

/** Applies every pending migration; throws with the failing migration's name. */
export async function migrateToLatest(db: Db): Promise<MigrateOutcome> {
  if (!isPostgres(db)) return migrate(db);
  // Nodes starting together: Kysely's own lock table is created with "if not exists", which
  // PostgreSQL does not make safe against a concurrent creator, so the nodes take turns first.
  return db.connection().execute(async (conn) => {
    await sql`select pg_advisory_lock(${MIGRATION_LOCK_KEY})`.execute(conn);
    try {
      return await migrate(db);
    } finally {
      await sql`select pg_advisory_unlock(${MIGRATION_LOCK_KEY})`.execute(conn);
    }
  });
}

/** Whether migrations have ever run on this store: false for a new, empty database. */
export async function hasMigrated(db: Db): Promise<boolean> {
  // One catalog lookup (Kysely's introspection reads every table's columns).
  const found = isPostgres(db)
    ? await sql<{ t: string | null }>`select to_regclass('kysely_migration')::text as t`.execute(db)
    : await sql<{ t: string | null }>`select name as t from sqlite_master where type = 'table' and name = 'kysely_migration'`.execute(db);
  return found.rows.some((r) => r.t !== null);
}

async function migrate(db: Db): Promise<MigrateOutcome> {
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => MIGRATIONS },
    // Applied migrations that share a timestamp are ordered by name: in code-point order, the
    // order Kysely sorts the list by, instead of its default localeCompare, whose first call
    // sets up ICU's collator (~6 ms of every start, admin commands included). Names begin with
    // distinct timestamps, so both orders are the same.
    nameComparator: (a, b) => (a < b ? -1 : a > b ? 1 : 0),
  });
  const result: MigrationResultSet = await migrator.migrateToLatest();
  if (result.error) {
    await refuseNewerStore(db);
    const failed = result.results?.find((r) => r.status === 'Error')?.migrationName ?? 'unknown';
    throw new Error(`migration ${failed} failed: ${(result.error as Error).message ?? String(result.error)}`);
  }
  return { applied: (result.results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName) };
}

/**
 * A store a newer release migrated holds migrations this one does not know, which Kysely
 * reports as "corrupted migrations": said as what it is, with what to do. Read only once
 * migrating has failed, so a start pays nothing for it.
 */
async function refuseNewerStore(db: Db): Promise<void> {
  const applied = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(db).catch(() => ({ rows: [] }));
  const unknown = unknownMigrations(applied.rows.map((r) => r.name));
  if (!unknown.length) return;
  throw new Error(
    `this store was written by a newer Posthorn release: it has migration${unknown.length === 1 ? '' : 's'} ${unknown.join(', ')}, which this release (newest: ${newestMigration()}) does not know; run that release or a newer one, or restore a backup made by this release (posthorn store restore)`,
  );
}

/** Applied migrations this release does not have: the store was migrated by a newer one. */
export function unknownMigrations(applied: readonly string[]): string[] {
  return applied.filter((name) => !Object.hasOwn(MIGRATIONS, name));
}

/** This release's newest migration. */
export function newestMigration(): string {
  return Object.keys(MIGRATIONS).sort().at(-1)!;
}
