import test from 'ava';
import Database from 'better-sqlite3';
import { withStatementCache } from '../../src/store/statement-cache.js';

test('the same SQL text gets the same compiled statement, on the same connection', (t) => {
  const db = withStatementCache(new Database(':memory:'));
  t.teardown(() => db.close());
  db.exec('create table t (v integer)');
  const a = db.prepare('insert into t (v) values (?)');
  t.is(db.prepare('insert into t (v) values (?)'), a);
  a.run(1);
  db.prepare('insert into t (v) values (?)').run(2);
  t.not(db.prepare('select v from t order by v'), a);
  t.deepEqual(db.prepare('select v from t order by v').all(), [{ v: 1 }, { v: 2 }]);
  // The handle is the connection itself: transactions and properties work unwrapped.
  t.true(db instanceof Database);
  db.transaction(() => {
    t.true(db.inTransaction);
    db.prepare('insert into t (v) values (?)').run(3);
  })();
  t.is((db.prepare('select count(*) as n from t').get() as { n: number }).n, 3);
});

test('the cache is bounded: the oldest statement is compiled again after 500 others', (t) => {
  const db = withStatementCache(new Database(':memory:'));
  t.teardown(() => db.close());
  const first = db.prepare('select 0');
  for (let i = 1; i <= 499; i++) db.prepare(`select ${i}`);
  t.is(db.prepare('select 0'), first);
  db.prepare('select 500');
  t.not(db.prepare('select 0'), first);
});
