import type { App } from '../../src/app.js';
import type { SqliteStore } from '../../src/store/db.js';
import { createDeliveriesRepository } from '../../src/store/repositories/deliveries-repository.js';
import { createSuppressionsRepository } from '../../src/store/repositories/suppressions-repository.js';

/** Repositories over a running app's store, for assertions on rows no API exposes. */
export function repositoriesOf(app: App) {
  return { deliveries: createDeliveriesRepository(app.store.db), suppressions: createSuppressionsRepository(app.store.db) };
}

/** The SQLite store of an app, for tests of SQLite itself (the full disk, the WAL). */
export function sqliteStoreOf(app: App): SqliteStore {
  if (app.store.kind !== 'sqlite') throw new Error('this test needs the SQLite store');
  return app.store;
}
