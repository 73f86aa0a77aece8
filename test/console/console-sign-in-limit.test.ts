import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { createLoginThrottle, LOGIN_LIMITS } from '../../src/core/users/login-throttle.js';
import { createLoginFailuresRepository } from '../../src/store/repositories/login-failures-repository.js';
import { createTestDatabase, dropTestDatabase, testStoreKind } from '../helpers/pg-databases.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { ConsoleClient, consoleUser } from './helpers/console-client.js';

// The console's sign-in limits (docs/console.md, Users and sessions) are counted in the store:
// they hold across a restart, for two nodes sharing one PostgreSQL database, and for attempts
// made at once; failures expire with the (injected) clock, and old rows are deleted. Every test
// here signs in from 127.0.0.1, so each ends by moving the clock past the window.

const clock = new ManualClock(Date.UTC(2026, 10, 26, 9, 0, 0));
const WINDOW_MS = LOGIN_LIMITS.account.windowMs;
let t0: TestApp;
let n = 0;
/** A new console user of the test team (a fresh account for each test). */
async function user(app = t0): Promise<string> {
  const email = `user${++n}@limit.example`;
  await consoleUser(app.app, email, app.teamId);
  return email;
}
const failures = (app = t0) => createLoginFailuresRepository(app.app.store.db);

test.before(async () => {
  t0 = await startTestApp({ clock });
});
test.after.always(async () => {
  await t0?.close();
});
test.afterEach.always(() => {
  clock.advance(WINDOW_MS + 1000);
});

test.serial('five failures lock the account until the oldest is 15 minutes old; then the right password works', async (t) => {
  const email = await user();
  const c = new ConsoleClient(t0.baseUrl);
  for (let i = 0; i < 5; i++) {
    t.is((await c.signIn(email, `guess ${i}`)).status, 401);
    clock.advance(60_000); // the failures are a minute apart: the first one expires first
  }
  const locked = await c.signIn(email);
  t.is(locked.status, 429);
  t.is(locked.headers.get('retry-after'), String(10 * 60), 'the first failure was 5 minutes ago');
  t.regex(locked.text, /Too many failed sign-in attempts for this account\. Try again in 10 minutes, or ask an operator to reset your password/);
  t.false(c.cookies.has('posthorn_session'));

  clock.advance(10 * 60_000 - 1000);
  const stillLocked = await c.signIn(email);
  t.is(stillLocked.status, 429);
  t.is(stillLocked.headers.get('retry-after'), '1');
  t.regex(stillLocked.text, /Try again in 1 minute,/);
  clock.advance(1000); // the first failure is 15 minutes old: four count, one more try is allowed
  const right = await c.signIn(email);
  t.is(right.status, 303);
  t.true(c.cookies.has('posthorn_session'));
});

test.serial('a success forgets the account\'s failures; the address keeps its count', async (t) => {
  const email = await user();
  const c = new ConsoleClient(t0.baseUrl);
  for (let i = 0; i < 4; i++) t.is((await c.signIn(email, `guess ${i}`)).status, 401);
  t.is((await c.signIn(email)).status, 303);
  const d = new ConsoleClient(t0.baseUrl); // signed out
  for (let i = 0; i < 4; i++) t.is((await d.signIn(email, `again ${i}`)).status, 401, 'the four before the success no longer count');
  t.is((await d.signIn(email, 'fifth')).status, 401);
  t.is((await d.signIn(email)).status, 429);

  // 9 failures from this address so far (the right password did not count); 11 more on other accounts reach 20.
  for (let i = 0; i < 11; i++) t.is((await new ConsoleClient(t0.baseUrl).signIn(`nobody${i}@limit.example`, 'x')).status, 401);
  const other = await user();
  const refused = await new ConsoleClient(t0.baseUrl).signIn(other);
  t.is(refused.status, 429);
  t.regex(refused.text, /Too many failed sign-in attempts from your network address\. Try again in 15 minutes/);
});

test.serial('attempts made at once see each other: of twelve parallel guesses five are tried, seven refused', async (t) => {
  const email = await user();
  const results = await Promise.all(Array.from({ length: 12 }, (_, i) => new ConsoleClient(t0.baseUrl).signIn(email, `parallel ${i}`)));
  const statuses = results.map((r) => r.status).sort();
  t.deepEqual(statuses, [...Array<number>(5).fill(401), ...Array<number>(7).fill(429)]);
  t.is((await new ConsoleClient(t0.baseUrl).signIn(email)).status, 429, 'the right password waits too');
});

test.serial('an operator\'s password reset lifts the account\'s lock', async (t) => {
  const email = await user();
  const c = new ConsoleClient(t0.baseUrl);
  for (let i = 0; i < 5; i++) await c.signIn(email, `guess ${i}`);
  t.is((await c.signIn(email)).status, 429);
  const reset = await t0.app.services.users.resetPassword(email, 'a brand new password');
  t.is((await c.signIn(email, reset.password)).status, 303);
});

test.serial('another spelling of the same address is the same account: a locked account stays locked however its address is written', async (t) => {
  const email = await user();
  const c = new ConsoleClient(t0.baseUrl);
  for (let i = 0; i < 5; i++) t.is((await c.signIn(email, `guess ${i}`)).status, 401);
  const [local, domain] = email.split('@') as [string, string];
  // Each of these signs in to the same user (the domain is mapped to its A-labels, as addresses are everywhere).
  const spellings = [
    `${local}@${domain.toUpperCase()}`,
    `${local}@${domain.replace('i', '\uff49')}`, // a fullwidth letter
    `${local}@${domain.replace('.', '\u00ad.')}`, // a soft hyphen, mapped to nothing
    `${local}@${domain.replace('.', '\u3002')}`, // an ideographic full stop
  ];
  for (const spelling of spellings) {
    const res = await new ConsoleClient(t0.baseUrl).signIn(spelling);
    t.is(res.status, 429, JSON.stringify(spelling));
    t.regex(res.text, /for this account/);
  }
});

test.serial('the change-password form is no way around the limit: wrong current passwords count as failed sign-ins', async (t) => {
  const email = await user();
  const c = new ConsoleClient(t0.baseUrl);
  t.is((await c.signIn(email)).status, 303);
  const token = await c.csrf();
  const change = (current: string) => c.post('/console/account/password', { currentPassword: current, newPassword: 'a new long password', confirmPassword: 'a new long password' }, { token, referer: '/console/account' });
  for (let i = 0; i < 5; i++) {
    t.is((await change(`guess ${i}`)).status, 303);
    t.regex(c.flash(), /is not your current password/);
  }
  // A holder of the session (a stolen cookie) gets no more guesses than a stranger at the sign-in form.
  t.is((await change('correct horse battery staple')).status, 303);
  t.regex(c.flash(), /Too many failed sign-in attempts for this account/);
  t.true(await t0.app.services.users.verifyCredentials(email, 'correct horse battery staple').then(Boolean), 'the password is unchanged');
  t.is((await new ConsoleClient(t0.baseUrl).signIn(email)).status, 429);
});

test.serial('a password change with the right current password still works, and forgets the account\'s failures', async (t) => {
  const email = await user();
  const c = new ConsoleClient(t0.baseUrl);
  t.is((await c.signIn(email)).status, 303);
  for (let i = 0; i < 4; i++) t.is((await new ConsoleClient(t0.baseUrl).signIn(email, `guess ${i}`)).status, 401);
  const ok = await c.post('/console/account/password', { currentPassword: 'correct horse battery staple', newPassword: 'a new long password', confirmPassword: 'a new long password' });
  t.is(ok.status, 303);
  t.regex(c.flash(), /Your password was changed/);
  // A new password too short is refused without counting as a guess.
  for (let i = 0; i < 6; i++) {
    await c.post('/console/account/password', { currentPassword: 'a new long password', newPassword: 'short', confirmPassword: 'short' });
    t.regex(c.flash(), /at least 10 characters/);
  }
  // The four failures before the change no longer count: one more is not a lock.
  t.is((await new ConsoleClient(t0.baseUrl).signIn(email, 'one more guess')).status, 401);
  t.is((await new ConsoleClient(t0.baseUrl).signIn(email, 'a new long password')).status, 303);
});

test.serial('the limits survive a restart: a new process on the same store still refuses', async (t) => {
  const restartClock = new ManualClock(clock.nowMs());
  const first = await startTestApp({ clock: restartClock });
  const email = await user(first);
  try {
    for (let i = 0; i < 5; i++) t.is((await new ConsoleClient(first.baseUrl).signIn(email, `guess ${i}`)).status, 401);
    await first.stop();
    const again = await startTestApp({ clock: restartClock, dataDir: first.dataDir, zone: first.zone });
    try {
      const c = new ConsoleClient(again.baseUrl);
      t.is((await c.signIn(email)).status, 429);
      restartClock.advance(WINDOW_MS);
      t.is((await c.signIn(email)).status, 303, 'and they expire as they would have');
    } finally {
      await again.stop();
    }
  } finally {
    await first.close();
  }
});

test.serial('old rows are deleted on a later write; a refused flood writes nothing', async (t) => {
  const repo = failures();
  const throttle = createLoginThrottle({ failures: repo, clock });
  clock.advance(2 * WINDOW_MS); // past every row the tests before wrote, and past the last prune
  const first = await throttle.begin('pruned@limit.example', '10.9.9.9');
  t.true(first.allowed);
  const base = await repo.count();
  t.is(base, 2, 'the failures of the earlier tests were deleted with this first write');

  // A flood of distinct accounts from distinct addresses: two rows each while they count.
  for (let i = 0; i < 200; i++) t.true((await throttle.begin(`flood${i}@limit.example`, `10.8.${i >> 8}.${i & 255}`)).allowed);
  t.is(await repo.count(), base + 400);
  // One address at its limit: what it sends next is refused and costs reads only.
  for (let i = 0; i < LOGIN_LIMITS.address.failures; i++) await throttle.begin(`spread${i}@limit.example`, '10.7.7.7');
  const before = await repo.count();
  for (let i = 0; i < 50; i++) t.false((await throttle.begin(`more${i}@limit.example`, '10.7.7.7')).allowed);
  t.is(await repo.count(), before);

  clock.advance(WINDOW_MS + 1);
  t.true((await throttle.begin('later@limit.example', '10.6.6.6')).allowed);
  t.is(await repo.count(), 2, 'only the newest attempt is left');
});

// Several nodes are PostgreSQL only (docs/scaling.md): on the SQLite run this one is skipped.
(testStoreKind() === 'postgres' ? test.serial : test.serial.skip)('two nodes on one PostgreSQL database share the counts: guesses spread over both get five tries in all', async (t) => {
  const url = await createTestDatabase();
  const a = await startTestApp({ clock, overrides: { store: { url }, cluster: { nodeName: 'node-a' } } });
  const b = await startTestApp({ clock, zone: a.zone, overrides: { store: { url }, cluster: { nodeName: 'node-b' } } });
  try {
    const email = await user(a);
    const nodes = [a, b];
    for (let i = 0; i < 5; i++) t.is((await new ConsoleClient(nodes[i % 2]!.baseUrl).signIn(email, `guess ${i}`)).status, 401);
    for (const node of nodes) {
      const refused = await new ConsoleClient(node.baseUrl).signIn(email);
      t.is(refused.status, 429, node.config.cluster.nodeName);
      t.regex(refused.text, /for this account/);
    }
    // The address limit too: 15 more failures on other accounts, spread, make 20.
    for (let i = 0; i < 15; i++) t.is((await new ConsoleClient(nodes[i % 2]!.baseUrl).signIn(`nobody${i}@two-nodes.example`, 'x')).status, 401);
    const other = await user(b);
    for (const node of nodes) t.regex((await new ConsoleClient(node.baseUrl).signIn(other)).text, /from your network address/);
    // And at once: a parallel burst over both nodes for a fresh account gets five tries in all.
    clock.advance(WINDOW_MS + 1000);
    const burst = await user(a);
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => new ConsoleClient(nodes[i % 2]!.baseUrl).signIn(burst, `parallel ${i}`)));
    t.is(results.filter((r) => r.status === 401).length, 5);
    t.is(results.filter((r) => r.status === 429).length, 7);
  } finally {
    await b.close();
    await a.close();
    await dropTestDatabase(url);
  }
});
