import { join } from 'node:path';
import test from 'ava';
import { Migrator, sql } from 'kysely';
import { migrateToLatest } from '../../src/store/migrate.js';
import { MIGRATIONS } from '../../src/store/migrations/index.js';
import { openAppStore } from '../../src/store/open-store.js';
import { createEmptyDatabase, dropTestDatabase, testStoreKind } from '../helpers/pg-databases.js';
import { tempDir } from '../helpers/temp-dir.js';

// JSON kept before unpaired surrogates were refused and cleaned: an upgrade turns each escape of
// half a character into U+FFFD, where PostgreSQL reads the JSON as jsonb (contact properties,
// a bounce's data), and leaves every other escape and character as it was.

test('an upgrade replaces the unpaired surrogate escapes of contact properties and bounce data with U+FFFD, and PostgreSQL reads them as jsonb', async (t) => {
  const pg = testStoreKind() === 'postgres';
  const url = pg ? await createEmptyDatabase() : '';
  const store = await openAppStore({ url, file: join(tempDir(t, 'posthorn-surrogates-'), 'x.db'), durability: 'normal', poolMax: 2, connectTimeoutMs: 5000 });
  t.teardown(async () => {
    await store.close();
    if (pg) await dropTestDatabase(url);
  });
  const db = store.db;
  const res = await new Migrator({ db, provider: { getMigrations: async () => MIGRATIONS } }).migrateTo('20261128010000-bounce-notice-queue');
  t.falsy(res.error);

  const at = '2026-11-20T09:00:00.000Z';
  const team = Number((await sql<{ id: number }>`insert into teams (name, created_at, updated_at) values ('one', ${at}, ${at}) returning id`.execute(db)).rows[0]!.id);
  await sql`insert into contact_books (id, team_id, name, emoji, created_at, updated_at) values ('cb_1', ${team}, 'b', 'x', ${at}, ${at})`.execute(db);
  const contact = (id: string, json: string) =>
    sql`insert into contacts (id, team_id, contact_book_id, email, properties_json, created_at, updated_at) values (${id}, ${team}, 'cb_1', ${`${id}@example.com`}, ${json}, ${at}, ${at})`.execute(db);
  // As JSON.stringify wrote them: a lone high and a lone low surrogate, beside a pair (escaped and
  // not), a control character, and a backslash followed by "ud800" (text, not an escape).
  await contact('c_lone', '{"hi":"a\\ud800b","lo":"\\udc00","pair":"\\ud83d\\ude00","raw":"😀","ctl":"\\u0001","slash":"\\\\ud800"}');
  await contact('c_key', '{"k\\ud800":"v"}');
  await contact('c_plain', '{"plan":"pro","n":3}');
  const email = (id: string) =>
    sql`insert into emails (id, team_id, from_addr, to_json, subject, message_id, latest_status, status_rank, created_at, updated_at) values (${id}, ${team}, 'a@x.com', '["b@y.com"]', 's', ${`<${id}@x.com>`}, 'BOUNCED', 5, ${at}, ${at})`.execute(db);
  await email('em_1');
  const event = (status: string, json: string) => sql`insert into email_events (email_id, status, data_json, created_at) values ('em_1', ${status}, ${json}, ${at})`.execute(db);
  await event('BOUNCED', '{"bounce":{"type":"Permanent","diagnostic":"550 \\udbff gone"}}');
  await event('DELIVERED', '{"response":"250 \\ud800"}');

  await migrateToLatest(db);
  const props = Object.fromEntries(
    (await sql<{ id: string; properties_json: string }>`select id, properties_json from contacts order by id`.execute(db)).rows.map((r) => [r.id, r.properties_json]),
  );
  t.deepEqual(JSON.parse(props.c_lone!), { hi: 'a\uFFFDb', lo: '\uFFFD', pair: '😀', raw: '😀', ctl: '\u0001', slash: '\\ud800' });
  t.deepEqual(JSON.parse(props.c_key!), { 'k\uFFFD': 'v' });
  t.is(props.c_plain, '{"plan":"pro","n":3}', 'JSON without an escape is not rewritten');
  const events = (await sql<{ status: string; data_json: string }>`select status, data_json from email_events order by id`.execute(db)).rows;
  t.deepEqual(JSON.parse(events[0]!.data_json), { bounce: { type: 'Permanent', diagnostic: '550 \uFFFD gone' } });
  t.is(events[1]!.data_json, '{"response":"250 \\ud800"}', 'only bounces are read as jsonb: the rest is left as it was');
  if (pg) {
    // What failed before: the reads the segment filters and the campaign recount make.
    const read = await sql<{ hi: string }>`select properties_json::jsonb ->> 'hi' as hi from contacts where id = 'c_lone'`.execute(db);
    t.is(read.rows[0]!.hi, 'a\uFFFDb');
    const type = await sql<{ type: string }>`select data_json::jsonb -> 'bounce' ->> 'type' as type from email_events where status = 'BOUNCED'`.execute(db);
    t.is(type.rows[0]!.type, 'Permanent');
  }
});
