import type { App } from '../../src/app.js';
import { createDeliveriesRepository } from '../../src/store/repositories/deliveries-repository.js';
import { createSuppressionsRepository } from '../../src/store/repositories/suppressions-repository.js';

/** Repositories over a running app's store, for assertions on rows no API exposes. */
export function repositoriesOf(app: App) {
  return { deliveries: createDeliveriesRepository(app.store.db), suppressions: createSuppressionsRepository(app.store.db) };
}
