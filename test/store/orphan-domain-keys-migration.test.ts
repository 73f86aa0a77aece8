import test from 'ava';
import { sql } from 'kysely';
import { migrateToLatest } from '../../src/store/migrate.js';
import { storeAtMigration } from '../helpers/store-at-migration.js';
import { tempDir } from '../helpers/temp-dir.js';

// Keys bound to a domain deleted before deleting a domain took its keys along (or to a domain
// row that is gone) were refused at authentication yet still listed: the migration deletes them
// and keeps every other key; run again, it changes nothing.

const BEFORE = '20261130020000-webhook-disabled-at';
const OLD = '2026-11-20T09:00:00.000Z';

test('keys bound to a deleted or missing domain are deleted; unbound keys and keys of live domains stay; a rerun changes nothing', async (t) => {
  const { db } = await storeAtMigration(t, tempDir(t, 'orphan-keys-mig'), BEFORE);
  const team = await db.insertInto('teams').values({ name: 'Old team', created_at: OLD, updated_at: OLD }).returning('id').executeTakeFirstOrThrow();
  const domain = async (name: string, deletedAt: string | null) =>
    (
      await db
        .insertInto('domains')
        .values({ team_id: team.id, name, region: 'local', status: 'SUCCESS', dkim_selector: 's', dkim_private_key: 'k', public_key: 'p', bounce_label: name.split('.')[0], created_at: OLD, updated_at: OLD, deleted_at: deletedAt })
        .returning('id')
        .executeTakeFirstOrThrow()
    ).id as number;
  const live = await domain('live.example', null);
  const gone = await domain('gone.example', OLD);
  const missing = gone + 1000;
  const key = (publicId: string, domainId: number | null) =>
    db
      .insertInto('api_keys')
      .values({ team_id: team.id, name: publicId, public_id: publicId, secret_hash: 'h', partial_key: 'us_x', permission: 'SENDING', domain_id: domainId, created_at: OLD })
      .execute();
  await key('unbound', null);
  await key('on-live', live);
  await key('on-deleted', gone);
  await key('on-missing', missing);
  await migrateToLatest(db);
  const left = async () => (await db.selectFrom('api_keys').select(['public_id', 'domain_id']).orderBy('public_id').execute()).map((r) => [r.public_id, r.domain_id === null ? null : Number(r.domain_id)]);
  t.deepEqual(await left(), [
    ['on-live', live],
    ['unbound', null],
  ]);
  t.is((await db.selectFrom('domains').select('id').execute()).length, 2, 'the domain rows stay (deleted ones keep their history)');

  // It and every later one, as a store set back to before it has none of them on record.
  await sql`delete from kysely_migration where name >= '20261130030000-orphan-domain-keys'`.execute(db);
  await migrateToLatest(db);
  t.deepEqual(await left(), [
    ['on-live', live],
    ['unbound', null],
  ]);
});
