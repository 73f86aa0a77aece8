import test from 'ava';
import { sql } from 'kysely';
import { migrateToLatest } from '../../src/store/migrate.js';
import { storeAtMigration } from '../helpers/store-at-migration.js';
import { tempDir } from '../helpers/temp-dir.js';

// Endpoints made before webhook statuses existed are active with no failures counted, and the
// migration run again (a store set back to an earlier migration) changes nothing.

const BEFORE = '20261129150000-domains-name-index';
const OLD = '2026-11-20T09:00:00.000Z';

test('an endpoint from before the migration is active with no failures; a rerun adds nothing', async (t) => {
  const { db } = await storeAtMigration(t, tempDir(t, 'wh-status-mig'), BEFORE);
  const team = await db.insertInto('teams').values({ name: 'Old team', created_at: OLD, updated_at: OLD }).returning('id').executeTakeFirstOrThrow();
  await db
    .insertInto('webhooks')
    .values({ id: 'wh_old', team_id: team.id, url: 'https://hooks.example/x', description: null, event_types_json: '[]', domain_ids_json: null, secret: 's', created_at: OLD, updated_at: OLD })
    .execute();
  await migrateToLatest(db);
  t.deepEqual(await db.selectFrom('webhooks').select(['id', 'status', 'consecutive_failures']).execute(), [{ id: 'wh_old', status: 'active', consecutive_failures: 0 }]);

  // It and every later one, as a store set back to before it has none of them on record.
  await sql`delete from kysely_migration where name >= '20261130000000-webhook-status'`.execute(db);
  await migrateToLatest(db);
  t.is((await db.selectFrom('webhooks').selectAll().execute()).length, 1);
});
