import test from 'ava';
import { newId, newTimeOrderedId, randomString, timePrefix } from '../../src/lib/ids.js';

test('ids: prefix and 21 base62 characters, no repeats across many pool refills', (t) => {
  const seen = new Set<string>();
  // 20,000 ids of ~21-25 random bytes each go through the 4 KiB pool over a hundred times
  for (let i = 0; i < 20_000; i++) {
    const id = newId('em');
    t.regex(id, /^em_[0-9A-Za-z]{21}$/);
    seen.add(id);
  }
  t.is(seen.size, 20_000);
});

test('randomString: every character of the alphabet turns up, and only those', (t) => {
  const alphabet = '0123456789abcdefghijklmnopqrstuvwxyz';
  const counts = new Map<string, number>();
  for (const c of randomString(36_000, alphabet)) counts.set(c, (counts.get(c) ?? 0) + 1);
  t.deepEqual([...counts.keys()].sort().join(''), alphabet);
  // 1,000 expected each; rejection sampling keeps them uniform (a modulo bias would skew the first 4 by ~+40%)
  for (const [c, n] of counts) t.true(n > 800 && n < 1200, `${c}: ${n}`);
});

test('time-ordered ids: the time in base 36, then 21 random base62 characters; creation order survives sorting and lower()', (t) => {
  const start = Date.UTC(2026, 10, 26, 7, 0, 0);
  const ids: string[] = [];
  // Every millisecond step of a second, a few times each, plus the wrap of a base-36 digit
  for (let ms = 0; ms < 1000; ms++) for (let k = 0; k < 3; k++) ids.push(newTimeOrderedId('em', start + ms));
  for (const id of ids) t.regex(id, /^em_[0-9a-z]{9}[0-9A-Za-z]{21}$/);
  t.is(new Set(ids).size, ids.length);
  const timeOf = (id: string) => parseInt(id.slice(3, 12), 36);
  t.is(timeOf(ids[0]!), start);
  const byString = [...ids].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const byLower = [...ids].sort((a, b) => (a.toLowerCase() < b.toLowerCase() ? -1 : a.toLowerCase() > b.toLowerCase() ? 1 : 0));
  for (const sorted of [byString, byLower]) {
    for (let i = 1; i < sorted.length; i++) t.true(timeOf(sorted[i - 1]!) <= timeOf(sorted[i]!));
  }
  // Fixed width now and for three thousand years; never negative
  t.is(timePrefix(0), '000000000');
  t.is(timePrefix(Date.UTC(5000, 0, 1)).length, 9);
  t.true(timePrefix(Date.UTC(5000, 0, 1)) > timePrefix(start));
  t.is(timePrefix(-5), '000000000');
});
