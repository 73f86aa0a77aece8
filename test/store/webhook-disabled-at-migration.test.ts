import test from 'ava';
import { sql } from 'kysely';
import { migrateToLatest } from '../../src/store/migrate.js';
import { storeAtMigration } from '../helpers/store-at-migration.js';
import { tempDir } from '../helpers/temp-dir.js';

// Endpoints from before disabledAt have none on record (null, paused ones too: when is not
// known), attempts from before are HTTP attempts (not discards), and the migration run again
// changes nothing.

const BEFORE = '20261130000000-webhook-status';
const OLD = '2026-11-20T09:00:00.000Z';

test('endpoints from before have no disabledAt, their attempts are not discards; a rerun adds nothing', async (t) => {
  const { db } = await storeAtMigration(t, tempDir(t, 'wh-disabled-at-mig'), BEFORE);
  const team = await db.insertInto('teams').values({ name: 'Old team', created_at: OLD, updated_at: OLD }).returning('id').executeTakeFirstOrThrow();
  await db
    .insertInto('webhooks')
    .values({ id: 'wh_old', team_id: team.id, url: 'https://hooks.example/x', description: null, event_types_json: '[]', domain_ids_json: null, secret: 's', status: 'paused', created_at: OLD, updated_at: OLD })
    .execute();
  await db.insertInto('webhook_events').values({ id: 'ev_old', team_id: team.id, type: 'contact.created', domain_id: null, body: '{}', created_at: OLD }).execute();
  const call = await db
    .insertInto('webhook_calls')
    .values({ webhook_id: 'wh_old', event_id: 'ev_old', state: 'failed', attempts: 6, next_attempt_at: 0, created_at: OLD, updated_at: OLD })
    .returning('id')
    .executeTakeFirstOrThrow();
  await db
    .insertInto('webhook_attempts')
    .values({ public_id: 'wa_old', call_id: call.id, webhook_id: 'wh_old', event_id: 'ev_old', event_type: 'contact.created', attempt: 6, url: 'https://hooks.example/x', request_headers_json: '{}', response_status: 500, response_body: null, duration_ms: 3, error: 'HTTP 500', succeeded: 0, next_attempt_at: null, created_at: OLD })
    .execute();
  await migrateToLatest(db);
  t.deepEqual(await db.selectFrom('webhooks').select(['id', 'status', 'disabled_at']).execute(), [{ id: 'wh_old', status: 'paused', disabled_at: null }]);
  t.deepEqual(await db.selectFrom('webhook_attempts').select(['public_id', 'discarded']).execute(), [{ public_id: 'wa_old', discarded: 0 }]);

  // It and every later one, as a store set back to before it has none of them on record.
  await sql`delete from kysely_migration where name >= '20261130020000-webhook-disabled-at'`.execute(db);
  await migrateToLatest(db);
  t.is((await db.selectFrom('webhook_attempts').selectAll().execute()).length, 1);
});
