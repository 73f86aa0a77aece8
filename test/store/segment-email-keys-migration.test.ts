import { join } from 'node:path';
import test from 'ava';
import { Migrator, sql } from 'kysely';
import { migrateToLatest } from '../../src/store/migrate.js';
import { MIGRATIONS } from '../../src/store/migrations/index.js';
import { openAppStore } from '../../src/store/open-store.js';
import { createEmptyDatabase, dropTestDatabase, testStoreKind } from '../helpers/pg-databases.js';
import { tempDir } from '../helpers/temp-dir.js';

// Segments saved before email conditions were keyed as contacts store addresses hold eq, neq and
// in values with the domain in Unicode (only lowercased), which match no stored address (its
// domain is in A-labels). Evaluation reads the saved filter as it is, so an upgrade keys them:
// the segments' filters and the snapshots of campaigns started from one.

const BEFORE = {
  match: 'any',
  conditions: [
    { field: 'email', op: 'eq', value: 'ute@bücher.example' },
    { match: 'all', conditions: [{ field: 'email', op: 'neq', value: 'max@büchershop.example' }, { field: 'firstName', op: 'eq', value: 'jürgen@bücher.example' }] },
    { field: 'email', op: 'in', value: ['ann@bücher.example', 'ann@xn--bcher-kva.example', 'plain@example.net'] },
    { field: 'email', op: 'contains', value: '@bücher' },
    { field: 'properties.mail', op: 'eq', value: 'x@bücher.example' },
  ],
};
const AFTER = {
  match: 'any',
  conditions: [
    { field: 'email', op: 'eq', value: 'ute@xn--bcher-kva.example' },
    { match: 'all', conditions: [{ field: 'email', op: 'neq', value: 'max@xn--bchershop-q9a.example' }, { field: 'firstName', op: 'eq', value: 'jürgen@bücher.example' }] },
    { field: 'email', op: 'in', value: ['ann@xn--bcher-kva.example', 'plain@example.net'] },
    { field: 'email', op: 'contains', value: '@bücher' },
    { field: 'properties.mail', op: 'eq', value: 'x@bücher.example' },
  ],
};

test('an upgrade keys the email eq, neq and in values of saved segments and campaign snapshots as contacts store addresses, and leaves everything else as it was', async (t) => {
  const pg = testStoreKind() === 'postgres';
  const url = pg ? await createEmptyDatabase() : '';
  const store = await openAppStore({ url, file: join(tempDir(t, 'posthorn-segment-keys-'), 'x.db'), durability: 'normal', poolMax: 2, connectTimeoutMs: 5000 });
  t.teardown(async () => {
    await store.close();
    if (pg) await dropTestDatabase(url);
  });
  const db = store.db;
  const res = await new Migrator({ db, provider: { getMigrations: async () => MIGRATIONS } }).migrateTo('20261129030000-idempotency-token');
  t.falsy(res.error);

  const at = '2026-11-20T09:00:00.000Z';
  const team = Number((await sql<{ id: number }>`insert into teams (name, created_at, updated_at) values ('one', ${at}, ${at}) returning id`.execute(db)).rows[0]!.id);
  await sql`insert into contact_books (id, team_id, name, emoji, created_at, updated_at) values ('cb_1', ${team}, 'b', 'x', ${at}, ${at})`.execute(db);
  const segment = (id: string, json: string) =>
    sql`insert into segments (id, team_id, contact_book_id, name, filters_json, created_at, updated_at) values (${id}, ${team}, 'cb_1', 's', ${json}, ${at}, ${at})`.execute(db);
  const plain = JSON.stringify({ match: 'all', conditions: [{ field: 'email', op: 'eq', value: 'a@example.net' }] });
  const keyed = JSON.stringify(AFTER);
  await segment('sg_old', JSON.stringify(BEFORE));
  await segment('sg_plain', plain);
  await segment('sg_keyed', keyed);
  const campaign = (id: string, json: string | null) =>
    sql`insert into campaigns (id, team_id, name, from_addr, subject, contact_book_id, segment_id, segment_filters_json, status, batch_size, created_at, updated_at)
      values (${id}, ${team}, 'c', 'a@news.example', 's', 'cb_1', 'sg_old', ${json}, 'RUNNING', 10, ${at}, ${at})`.execute(db);
  await campaign('cp_started', JSON.stringify(BEFORE));
  await campaign('cp_draft', null);

  await migrateToLatest(db);
  const segments = Object.fromEntries((await sql<{ id: string; filters_json: string }>`select id, filters_json from segments`.execute(db)).rows.map((r) => [r.id, r.filters_json]));
  t.deepEqual(JSON.parse(segments.sg_old!), AFTER);
  t.is(segments.sg_plain, plain, 'an ASCII filter is not rewritten');
  t.is(segments.sg_keyed, keyed, 'a filter already keyed is not rewritten');
  const campaigns = Object.fromEntries(
    (await sql<{ id: string; segment_filters_json: string | null }>`select id, segment_filters_json from campaigns`.execute(db)).rows.map((r) => [r.id, r.segment_filters_json]),
  );
  t.deepEqual(JSON.parse(campaigns.cp_started!), AFTER);
  t.is(campaigns.cp_draft, null);
});
