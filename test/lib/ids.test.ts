import test from 'ava';
import { newId, randomString } from '../../src/lib/ids.js';

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
