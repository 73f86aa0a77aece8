import test from 'ava';
import { join } from 'node:path';
import { sql } from 'kysely';
import { openStore, type Store } from '../../src/store/db.js';
import { migrateToLatest } from '../../src/store/migrate.js';
import { contactsInBook } from '../../src/store/repositories/contacts-scope.js';
import { tempDir } from '../helpers/temp-dir.js';

// Precedence of everything appended to a scoped query: a raw fragment with an OR, and a
// segment filter whose top level is "any", must stay inside the scope they are ANDed with.

async function storeWithTwoTeams(t: Parameters<typeof tempDir>[0]): Promise<Store> {
  const store = openStore(join(tempDir(t, 'posthorn-scope-'), 'x.db'));
  await migrateToLatest(store.db);
  const now = new Date(0).toISOString();
  for (const team of [1, 2]) {
    await store.db.insertInto('teams').values({ id: team, name: `team ${team}`, created_at: now, updated_at: now } as never).execute();
    await store.db.insertInto('contact_books').values({ id: `cb_${team}`, team_id: team, name: 'b', emoji: 'x', created_at: now, updated_at: now } as never).execute();
    for (const n of [1, 2]) {
      await store.db
        .insertInto('contacts')
        .values({ id: `ct_${team}_${n}`, team_id: team, contact_book_id: `cb_${team}`, email: `c${n}@example.net`, first_name: 'Bee', subscribed: 1, properties_json: '{}', created_at: now, updated_at: now } as never)
        .execute();
    }
  }
  return store;
}

test('a raw fragment with an OR appended to a scoped where is parenthesised, and stays in scope', async (t) => {
  const store = await storeWithTwoTeams(t);
  const q = store.db.selectFrom('contacts').select('id').where('team_id', '=', 2).where(sql<boolean>`1 = 0 or email like '%@%'`);
  t.regex(q.compile().sql, /"team_id" = \? and \(1 = 0 or email like '%@%'\)/);
  t.deepEqual((await q.orderBy('id').execute()).map((r) => r.id), ['ct_2_1', 'ct_2_2']);
  // The same for a NOT of a raw fragment, and for OR groups built from raw operands.
  const not = store.db.selectFrom('contacts').select('id').where('team_id', '=', 2).where((eb) => eb.not(sql<boolean>`1 = 1 or 1 = 1`));
  t.regex(not.compile().sql, /not \(1 = 1 or 1 = 1\)/);
  t.deepEqual(await not.execute(), []);
  const or = store.db.selectFrom('contacts').select('id').where('team_id', '=', 2).where((eb) => eb.or([sql<boolean>`1 = 0 or 1 = 1`, sql<boolean>`0`]));
  t.deepEqual((await or.execute()).length, 2);
  await store.close();
});

test('a top-level "any" filter is one parenthesised operand after the team and book', async (t) => {
  const store = await storeWithTwoTeams(t);
  const filter = { match: 'any' as const, conditions: [{ field: 'firstName', op: 'eq' as const, value: 'nobody' }, { field: 'email', op: 'contains' as const, value: '@' }] };
  const q = contactsInBook(store.db, { teamId: 2, bookId: 'cb_2' }, filter).select('contacts.id');
  t.regex(q.compile().sql, /where \("contacts"\."team_id" = \? and "contacts"\."contact_book_id" = \? and \("contacts"\."first_name" = \? or \(+case when length\("contacts"\."email"\) = octet_length\("contacts"\."email"\) then [^()]*(\([^()]*\)[^()]*)* end\)+\)\)$/);
  t.deepEqual((await q.orderBy('contacts.id').execute()).map((r) => r.id), ['ct_2_1', 'ct_2_2']);
  // A book of another team is not reachable even by naming it: the team is checked too.
  t.deepEqual(await contactsInBook(store.db, { teamId: 2, bookId: 'cb_1' }, filter).select('contacts.id').execute(), []);
  // Empty groups: all of nothing is everyone in the book, any of nothing is no one.
  t.is((await contactsInBook(store.db, { teamId: 1, bookId: 'cb_1' }, { match: 'all', conditions: [] }).select('contacts.id').execute()).length, 2);
  t.is((await contactsInBook(store.db, { teamId: 1, bookId: 'cb_1' }, { match: 'any', conditions: [] }).select('contacts.id').execute()).length, 0);
  await store.close();
});
