import { join } from 'node:path';
import type { ExecutionContext } from 'ava';
import { Migrator, type Kysely } from 'kysely';
import { MIGRATIONS } from '../../src/store/migrations/index.js';
import { openAppStore, type AppStore } from '../../src/store/open-store.js';
import { createEmptyDatabase, dropTestDatabase, testStoreKind } from './pg-databases.js';

// A store as an older release left it: the migration tests write rows in the shapes of that
// time, then run the migrations after it. SQLite in `dir` (where an app there opens it), or a
// fresh PostgreSQL database when the suite runs on that store.

/** The store an app in `dir` with store URL `url` opens. */
export function openStoreIn(dir: string, url: string): Promise<AppStore> {
  return openAppStore({ url, file: join(dir, 'posthorn.db'), durability: 'normal', poolMax: 2, connectTimeoutMs: 5000 });
}

/** A store migrated up to `migration` (inclusive); closed, and its database dropped, at teardown. */
export async function storeAtMigration(t: ExecutionContext, dir: string, migration: string): Promise<{ db: Kysely<any>; url: string; close: () => Promise<void> }> {
  const pg = testStoreKind() === 'postgres';
  const url = pg ? await createEmptyDatabase() : '';
  const store = await openStoreIn(dir, url);
  let open = true;
  const close = async () => {
    if (open) await store.close();
    open = false;
  };
  // Registered first, so it runs after an app's teardown (ava runs them in reverse order).
  t.teardown(async () => {
    await close();
    if (pg) await dropTestDatabase(url);
  });
  const res = await new Migrator({ db: store.db, provider: { getMigrations: async () => MIGRATIONS } }).migrateTo(migration);
  t.falsy(res.error);
  return { db: store.db as Kysely<any>, url, close };
}
