import { join } from 'node:path';
import test from 'ava';
import { Migrator, sql } from 'kysely';
import { migrateToLatest } from '../../src/store/migrate.js';
import { MIGRATIONS } from '../../src/store/migrations/index.js';
import { openAppStore } from '../../src/store/open-store.js';
import { createEmptyDatabase, dropTestDatabase, testStoreKind } from '../helpers/pg-databases.js';
import { tempDir } from '../helpers/temp-dir.js';

// Domains kept before the time of their last verification was: a verified one was last found so
// at its last check (or its last change, if never checked); for the others it is unknown.

test('an upgrade gives each verified domain its last check as the time it was last found verified, and the others none', async (t) => {
  const pg = testStoreKind() === 'postgres';
  const url = pg ? await createEmptyDatabase() : '';
  const store = await openAppStore({ url, file: join(tempDir(t, 'posthorn-domain-verified-at-'), 'x.db'), durability: 'normal', poolMax: 2, connectTimeoutMs: 5000 });
  t.teardown(async () => {
    await store.close();
    if (pg) await dropTestDatabase(url);
  });
  const db = store.db;
  const before = new Migrator({ db, provider: { getMigrations: async () => MIGRATIONS } });
  const res = await before.migrateTo('20261127040000-retention-kept');
  t.falsy(res.error);

  const created = '2026-11-20T09:00:00.000Z';
  const changed = '2026-11-21T09:00:00.000Z';
  const checked = '2026-11-22T09:00:00.000Z';
  const team = Number((await sql<{ id: number }>`insert into teams (name, created_at, updated_at) values ('one', ${created}, ${created}) returning id`.execute(db)).rows[0]!.id);
  const domain = async (name: string, status: string, lastCheckedAt: string | null) =>
    Number(
      (
        await sql<{ id: number }>`insert into domains (team_id, name, region, status, dkim_selector, dkim_private_key, public_key, bounce_label, last_checked_at, created_at, updated_at)
          values (${team}, ${name}, 'r', ${status}, 's', 'k', 'p', ${`b-${name}`}, ${lastCheckedAt}, ${created}, ${changed}) returning id`.execute(db)
      ).rows[0]!.id,
    );
  const checkedOk = await domain('checked.example', 'SUCCESS', checked);
  const neverChecked = await domain('never.example', 'SUCCESS', null);
  const pending = await domain('pending.example', 'PENDING', checked);
  const failed = await domain('failed.example', 'FAILED', checked);

  await migrateToLatest(db);
  const rows = (await sql<{ id: number; verified_at: string | null }>`select id, verified_at from domains order by id`.execute(db)).rows;
  t.deepEqual(Object.fromEntries(rows.map((r) => [Number(r.id), r.verified_at])), {
    [checkedOk]: checked,
    [neverChecked]: changed,
    [pending]: null,
    [failed]: null,
  });
});
