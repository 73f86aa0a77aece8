import test from 'ava';
import { ByteBudget } from '../../src/lib/byte-budget.js';

test('what fits is admitted at once; the rest waits, first come first served, and is admitted as room is given back', async (t) => {
  const budget = new ByteBudget(100);
  const admitted: string[] = [];
  const take = (name: string, bytes: number) => budget.acquire(bytes).then(() => admitted.push(name));
  await take('a', 60);
  void take('b', 50); // does not fit beside a
  void take('c', 10); // would fit, but b came first
  await Promise.resolve();
  t.deepEqual(admitted, ['a']);
  t.is(budget.queued, 2);
  budget.release(60);
  await new Promise((r) => setImmediate(r));
  t.deepEqual(admitted, ['a', 'b', 'c']);
  t.is(budget.inUse, 60);
  t.is(budget.queued, 0);
});

test('a request larger than the whole budget waits until nothing is held, then goes alone', async (t) => {
  const budget = new ByteBudget(100);
  await budget.acquire(30);
  let huge = false;
  const hugeAdmitted = budget.acquire(250).then(() => (huge = true));
  let small = false;
  void budget.acquire(10).then(() => (small = true));
  await new Promise((r) => setImmediate(r));
  t.false(huge);
  t.false(small, 'not ahead of the one that waits');
  budget.release(30);
  await hugeAdmitted;
  t.is(budget.inUse, 250);
  await new Promise((r) => setImmediate(r));
  t.false(small, 'nothing beside it');
  budget.release(250);
  await new Promise((r) => setImmediate(r));
  t.true(small);
  t.is(budget.inUse, 10);
});
