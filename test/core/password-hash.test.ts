import test from 'ava';
import { dummyHash, hashPassword, PASSWORD_HASH_COST, verifyPassword } from '../../src/core/users/password-hash.js';

// Console passwords: scrypt with its parameters in the stored text, at OWASP's cost unless asked.

test('a new hash is scrypt at N = 2^15, r = 8, p = 1, salted, and verifies only its own password', async (t) => {
  t.is(PASSWORD_HASH_COST, 15);
  const a = await hashPassword('correct horse battery');
  const b = await hashPassword('correct horse battery');
  t.regex(a, /^scrypt\$15\$8\$1\$[A-Za-z0-9+/=]{24}\$[A-Za-z0-9+/=]{44}$/);
  t.not(a, b, 'each hash has its own salt');
  t.true(await verifyPassword('correct horse battery', a));
  t.false(await verifyPassword('correct horse batterY', a));
  // NFC: the same text typed with a combining accent is the same password
  const composed = await hashPassword('caf\u00e9 au lait 42', 10);
  t.true(await verifyPassword('cafe\u0301 au lait 42', composed));
});

test('a cheaper cost is written into the hash and verified at that cost; costs outside 10-20 are refused', async (t) => {
  const cheap = await hashPassword('a test password', 10);
  t.regex(cheap, /^scrypt\$10\$8\$1\$/);
  t.true(await verifyPassword('a test password', cheap));
  t.regex(await dummyHash(10), /^scrypt\$10\$/);
  t.regex(await dummyHash(), /^scrypt\$15\$/);
  for (const cost of [9, 21, 12.5, Number.NaN]) await t.throwsAsync(hashPassword('a test password', cost), { instanceOf: RangeError });
});

test('a malformed or out-of-range stored hash never verifies', async (t) => {
  const good = await hashPassword('a test password', 10);
  const [, , r, p, salt, key] = good.split('$');
  for (const stored of ['', 'plain', `bcrypt$10$${r}$${p}$${salt}$${key}`, `scrypt$9$${r}$${p}$${salt}$${key}`, `scrypt$21$${r}$${p}$${salt}$${key}`, `scrypt$10$0$${p}$${salt}$${key}`, `scrypt$10$${r}$5$${salt}$${key}`, `scrypt$10$${r}$${p}$${salt}$`, good.slice(0, -4)]) {
    t.false(await verifyPassword('a test password', stored), stored);
  }
});
