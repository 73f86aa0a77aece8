import { join } from 'node:path';
import test from 'ava';
import { Migrator, sql } from 'kysely';
import { migrateToLatest } from '../../src/store/migrate.js';
import { MIGRATIONS } from '../../src/store/migrations/index.js';
import { openAppStore } from '../../src/store/open-store.js';
import { createEmptyDatabase, dropTestDatabase, testStoreKind } from '../helpers/pg-databases.js';
import { tempDir } from '../helpers/temp-dir.js';

// Campaigns kept before they had a domain get the one their from-address is on, so a key bound
// to that domain still finds its campaigns after the upgrade (and no other domain's).

test('an upgrade gives each existing campaign the live team domain its from-address is on, and none otherwise', async (t) => {
  const pg = testStoreKind() === 'postgres';
  const url = pg ? await createEmptyDatabase() : '';
  const store = await openAppStore({ url, file: join(tempDir(t, 'posthorn-campaign-domain-'), 'x.db'), durability: 'normal', poolMax: 2, connectTimeoutMs: 5000 });
  t.teardown(async () => {
    await store.close();
    if (pg) await dropTestDatabase(url);
  });
  const db = store.db;
  const before = new Migrator({ db, provider: { getMigrations: async () => MIGRATIONS } });
  const res = await before.migrateTo('20261127020000-job-run-finished');
  t.falsy(res.error);

  const now = '2026-11-20T09:00:00.000Z';
  const team = async (name: string) => Number((await sql<{ id: number }>`insert into teams (name, created_at, updated_at) values (${name}, ${now}, ${now}) returning id`.execute(db)).rows[0]!.id);
  const domain = async (teamId: number, name: string, deletedAt: string | null = null) =>
    Number(
      (
        await sql<{ id: number }>`insert into domains (team_id, name, region, status, dkim_selector, dkim_private_key, public_key, bounce_label, created_at, updated_at, deleted_at)
          values (${teamId}, ${name}, 'r', 'SUCCESS', 's', 'k', 'p', ${`b-${name}`}, ${now}, ${now}, ${deletedAt}) returning id`.execute(db)
      ).rows[0]!.id,
    );
  const one = await team('one');
  const two = await team('two');
  await domain(one, 'gone.example', now);
  const news = await domain(one, 'news.example');
  const idn = await domain(one, 'xn--bcher-kva.example');
  const again = await domain(one, 'gone.example');
  await domain(two, 'other.example');
  const theirs = await domain(two, 'news.example');
  const campaign = async (id: string, teamId: number, from: string) =>
    sql`insert into campaigns (id, team_id, name, from_addr, subject, contact_book_id, status, batch_size, created_at, updated_at)
      values (${id}, ${teamId}, 'c', ${from}, 's', 'cb_x', 'DRAFT', 10, ${now}, ${now})`.execute(db);
  await campaign('cp_plain', one, 'a@news.example');
  await campaign('cp_named', one, '"Ann @ News" <Ann@News.Example.>');
  await campaign('cp_idn', one, 'Bücher <x@bücher.example>');
  await campaign('cp_readded', one, 'a@gone.example');
  await campaign('cp_foreign', one, 'a@other.example');
  await campaign('cp_unknown', one, 'a@nowhere.example');
  await campaign('cp_theirs', two, 'a@news.example');

  await migrateToLatest(db);
  const rows = (await sql<{ id: string; domain_id: number | null }>`select id, domain_id from campaigns order by id`.execute(db)).rows;
  t.deepEqual(Object.fromEntries(rows.map((r) => [r.id, r.domain_id === null ? null : Number(r.domain_id)])), {
    cp_foreign: null,
    cp_idn: idn,
    cp_named: news,
    cp_plain: news,
    cp_readded: again,
    cp_theirs: theirs,
    cp_unknown: null,
  });
});
