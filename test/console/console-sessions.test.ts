import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { ConsoleClient, consoleUser, PASSWORD } from './helpers/console-client.js';

// Console users and the life of a session, on a manual clock: idle and absolute expiry,
// password changes and resets ending sessions, Secure cookies behind https.

const MIN = 60_000;
let t0: TestApp;
const clock = new ManualClock();

test.before(async () => {
  t0 = await startTestApp({ clock, overrides: { console: { sessionIdleMinutes: 60, sessionMaxHours: 12 } } });
});
test.after.always(async () => {
  await t0?.close();
});

async function signedIn(email: string): Promise<ConsoleClient> {
  const c = new ConsoleClient(t0.baseUrl);
  const res = await c.signIn(email);
  if (res.status !== 303) throw new Error(`sign-in failed: ${res.status}`);
  return c;
}
const isIn = async (c: ConsoleClient) => (await c.get('/console/account')).status === 200;

test.serial('a session ends after 60 idle minutes, and not before; activity keeps it alive', async (t) => {
  await consoleUser(t0.app, 'idle@example.com', t0.teamId);
  const c = await signedIn('idle@example.com');
  clock.advance(59 * MIN);
  t.true(await isIn(c));
  clock.advance(59 * MIN); // 59 minutes after the last request: still fine
  t.true(await isIn(c));
  clock.advance(60 * MIN + 1);
  const res = await c.get('/console/account');
  t.is(res.status, 303);
  t.regex(res.location!, /^\/console\/login/);
  // Gone for good: coming back does not revive it.
  clock.advance(-30 * MIN);
  t.false(await isIn(c));
  clock.advance(30 * MIN);
});

test.serial('a session ends 12 hours after sign-in however active it is', async (t) => {
  await consoleUser(t0.app, 'busy@example.com', t0.teamId);
  const c = await signedIn('busy@example.com');
  for (let h = 0; h < 23; h++) {
    clock.advance(30 * MIN);
    t.true(await isIn(c), `after ${(h + 1) / 2} hours`);
  }
  clock.advance(30 * MIN); // 12 hours
  t.false(await isIn(c));
  // A new sign-in works.
  t.true(await isIn(await signedIn('busy@example.com')));
});

test.serial('resetting a password (CLI) ends every session of the user; the old password stops working', async (t) => {
  await consoleUser(t0.app, 'reset@example.com', t0.teamId);
  const one = await signedIn('reset@example.com');
  const two = await signedIn('reset@example.com');
  const { password, generated } = await t0.app.services.users.resetPassword('reset@example.com');
  t.true(generated);
  t.true(password.length >= 20);
  t.false(await isIn(one));
  t.false(await isIn(two));
  t.is((await new ConsoleClient(t0.baseUrl).signIn('reset@example.com')).status, 401);
  t.is((await new ConsoleClient(t0.baseUrl).signIn('reset@example.com', password)).status, 303);
});

test.serial('changing one\'s own password in the console keeps this session and ends the others', async (t) => {
  await consoleUser(t0.app, 'change@example.com', t0.teamId);
  const here = await signedIn('change@example.com');
  const elsewhere = await signedIn('change@example.com');
  const wrong = await here.post('/console/account/password', { currentPassword: 'nope nope nope', newPassword: 'a brand new passphrase', confirmPassword: 'a brand new passphrase' });
  t.is(wrong.status, 303);
  t.true(await isIn(elsewhere));
  const short = await here.post('/console/account/password', { currentPassword: PASSWORD, newPassword: 'short', confirmPassword: 'short' });
  t.is(short.status, 303);
  t.true(await isIn(elsewhere));
  const ok = await here.post('/console/account/password', { currentPassword: PASSWORD, newPassword: 'a brand new passphrase', confirmPassword: 'a brand new passphrase' });
  t.is(ok.status, 303);
  t.true(await isIn(here));
  t.false(await isIn(elsewhere));
  t.is((await new ConsoleClient(t0.baseUrl).signIn('change@example.com')).status, 401);
  t.is((await new ConsoleClient(t0.baseUrl).signIn('change@example.com', 'a brand new passphrase')).status, 303);
});

test.serial('deleting a user ends its sessions', async (t) => {
  await consoleUser(t0.app, 'gone@example.com', t0.teamId);
  const c = await signedIn('gone@example.com');
  await t0.app.services.users.remove('gone@example.com');
  t.false(await isIn(c));
});

test.serial('users: a clear 400 or 409 for a bad address, a short password, an unknown team, a taken address', async (t) => {
  const users = t0.app.services.users;
  const err = async (p: Promise<unknown>) => (await t.throwsAsync(p))!.message;
  t.regex(await err(users.create({ email: 'not an address', teamId: t0.teamId })), /^email: /);
  t.regex(await err(users.create({ email: 'x@example.com', teamId: t0.teamId, password: 'short' })), /at least 10 characters/);
  t.regex(await err(users.create({ email: 'x@example.com', teamId: 999 })), /team 999 not found/);
  await users.create({ email: 'Taken@Example.com', teamId: t0.teamId, password: PASSWORD });
  t.regex(await err(users.create({ email: 'taken@example.com', teamId: t0.teamId })), /already exists/);
  // Two creations of one address at once (both checked before either stored it): one user, and
  // the other gets the same 409, on either store.
  const both = await Promise.allSettled([
    users.create({ email: 'twice@example.com', teamId: t0.teamId, password: PASSWORD }),
    users.create({ email: 'twice@example.com', teamId: t0.teamId, password: PASSWORD }),
  ]);
  t.is(both.filter((r) => r.status === 'fulfilled').length, 1);
  const refused = both.find((r): r is PromiseRejectedResult => r.status === 'rejected')!.reason as { code?: string; message: string };
  t.like(refused, { code: 'NOT_UNIQUE', message: 'email: a console user twice@example.com already exists' });
  // Stored hashes are scrypt with their parameters, never the password.
  const listed = await users.list();
  t.true(listed.some((u) => u.email === 'taken@example.com'));
  t.false(JSON.stringify(listed).includes(PASSWORD));
});

test('behind an https public URL the session cookie is Secure; with the console off, /console is not served', async (t) => {
  const https = await startTestApp({ overrides: { publicUrl: 'https://mail.example.com' } });
  try {
    await consoleUser(https.app, 'tls@example.com', https.teamId);
    const c = new ConsoleClient(https.baseUrl);
    const res = await c.signIn('tls@example.com');
    t.is(res.status, 303);
    const cookie = res.headers.getSetCookie().find((x) => x.startsWith('posthorn_session='))!;
    t.regex(cookie, /; Secure/);
    // The public URL's origin is accepted on changes, as the page's own is.
    const ok = await c.post('/console/suppressions', { email: 'tls-ok@example.org' }, { origin: 'https://mail.example.com' });
    t.is(ok.status, 303);
  } finally {
    await https.close();
  }
  const off = await startTestApp({ overrides: { console: { enabled: false } } });
  try {
    t.is((await off.request('GET', '/console', { key: null })).status, 404);
    t.is((await off.request('GET', '/v1/domains')).status, 200);
  } finally {
    await off.close();
  }
});

test('a console reached over https through a trusted proxy sets Secure cookies, whatever the public URL says', async (t) => {
  // publicUrl unset (derived: http://127.0.0.1:port), http.trustProxy on, the proxy saying https.
  const proxied = await startTestApp({ overrides: { http: { trustProxy: true } } });
  try {
    await consoleUser(proxied.app, 'proxied@example.com', proxied.teamId);
    const viaTls = { 'x-forwarded-proto': 'https' };
    const origin = proxied.baseUrl.replace(/^http:/, 'https:');
    const c = new ConsoleClient(proxied.baseUrl);
    const page = await c.request('GET', '/console/login', { headers: viaTls });
    const login = page.headers.getSetCookie().find((x) => x.startsWith('posthorn_login='))!;
    t.regex(login, /; Secure/);
    const token = /name="_csrf" value="([^"]+)"/.exec(page.text)![1]!;
    const res = await c.request('POST', '/console/login', { form: { _csrf: token, email: 'proxied@example.com', password: PASSWORD, next: '' }, headers: { ...viaTls, origin } });
    t.is(res.status, 303);
    const session = res.headers.getSetCookie().find((x) => x.startsWith('posthorn_session='))!;
    t.regex(session, /; HttpOnly; SameSite=Lax; .*Secure/);
    // The one-time message of a redirect too.
    const out = await c.request('POST', '/console/logout', { form: { _csrf: await c.csrf() }, headers: { ...viaTls, origin } });
    t.is(out.status, 303);
    t.regex(out.headers.getSetCookie().find((x) => x.startsWith('posthorn_flash='))!, /; Secure/);
    // The same console over plain http (no proxy saying otherwise) keeps cookies a browser can store there.
    const plain = await new ConsoleClient(proxied.baseUrl).get('/console/login');
    t.notRegex(plain.headers.getSetCookie().find((x) => x.startsWith('posthorn_login='))!, /Secure/);
  } finally {
    await proxied.close();
  }
});

test.serial('signing in over a live session (another user, in a tab left open) ends that session on the server, not only in the cookie jar', async (t) => {
  await consoleUser(t0.app, 'first@example.com', t0.teamId);
  await consoleUser(t0.app, 'second@example.com', t0.teamId);
  const first = await signedIn('first@example.com');
  const old = first.cookies.get('posthorn_session')!;
  // The sign-in form, as a tab opened before the first user signed in shows it.
  const tab = new ConsoleClient(t0.baseUrl);
  const token = /name="_csrf" value="([^"]+)"/.exec((await tab.get('/console/login')).text)![1]!;
  tab.cookies.set('posthorn_session', old);
  const res = await tab.request('POST', '/console/login', { form: { _csrf: token, email: 'second@example.com', password: PASSWORD, next: '' }, headers: { origin: t0.baseUrl } });
  t.is(res.status, 303);
  t.not(tab.cookies.get('posthorn_session'), old);
  t.regex((await tab.get('/console/account')).text, /second@example\.com/);
  // The first user's session is over: its cookie, replayed, is dead.
  t.is((await first.get('/console/account')).status, 303);
});
