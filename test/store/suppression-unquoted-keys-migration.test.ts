import test from 'ava';
import { sql, type Kysely } from 'kysely';
import { migrateToLatest } from '../../src/store/migrate.js';
import { storeAtMigration } from '../helpers/store-at-migration.js';
import { tempDir } from '../helpers/temp-dir.js';

// A suppression added as `"ann"@x` was keyed with its quotes, while the send path checks the
// mailbox unquoted (`ann@x`): it stopped no send. An upgrade keys it without the quotes, merging
// into a row already under that key (the earlier reason, source and time stay).

const BEFORE = '20261129150000-domains-name-index';
const OLD = '2026-11-20T09:00:00.000Z';
const NEW = '2026-11-27T09:00:00.000Z';

const addSuppression = (db: Kysely<any>, team: number, email: string, reason: string, source: string, at: string) =>
  sql`insert into suppressions (team_id, email, reason, source, created_at) values (${team}, ${email}, ${reason}, ${source}, ${at})`.execute(db);

test('an upgrade keys quoted dot-atom local parts without their quotes, merging into a row under the key; quotes that are needed stay', async (t) => {
  const { db } = await storeAtMigration(t, tempDir(t, 'posthorn-unquoted-keys-'), BEFORE);
  const team = Number((await sql<{ id: number }>`insert into teams (name, created_at, updated_at) values ('one', ${OLD}, ${OLD}) returning id`.execute(db)).rows[0]!.id);
  const other = Number((await sql<{ id: number }>`insert into teams (name, created_at, updated_at) values ('two', ${OLD}, ${OLD}) returning id`.execute(db)).rows[0]!.id);
  await addSuppression(db, team, '"ann"@example.net', 'MANUAL', 'api', OLD);
  await addSuppression(db, team, '"bob.b"@example.net', 'MANUAL', 'api', OLD);
  await addSuppression(db, team, 'bob.b@example.net', 'HARD_BOUNCE', 'em_b', NEW);
  await addSuppression(db, team, '"cy"@example.net', 'MANUAL', 'late', NEW);
  await addSuppression(db, team, 'cy@example.net', 'COMPLAINT', 'em_c', OLD);
  await addSuppression(db, team, '"a b"@example.net', 'MANUAL', 'space', OLD);
  await addSuppression(db, other, '"ann"@example.net', 'MANUAL', 'other', OLD);

  await migrateToLatest(db);
  const rows = async () => (await sql`select team_id, email, reason, source, created_at from suppressions order by team_id, email`.execute(db)).rows;
  t.deepEqual(await rows(), [
    { team_id: team, email: '"a b"@example.net', reason: 'MANUAL', source: 'space', created_at: OLD },
    { team_id: team, email: 'ann@example.net', reason: 'MANUAL', source: 'api', created_at: OLD },
    { team_id: team, email: 'bob.b@example.net', reason: 'MANUAL', source: 'api', created_at: OLD },
    { team_id: team, email: 'cy@example.net', reason: 'COMPLAINT', source: 'em_c', created_at: OLD },
    { team_id: other, email: 'ann@example.net', reason: 'MANUAL', source: 'other', created_at: OLD },
  ]);
});
