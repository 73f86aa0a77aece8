import test from 'ava';
import fc from 'fast-check';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { buildConsoleWorld, consoleRoutes, routeKey, type ConsoleExample, type ConsoleRoute, type ConsoleWorld } from './helpers/console-examples.js';
import { consoleRequest, CSRF_SLOT, encodeForm, type ConsoleFuzzRequest } from './helpers/console-arbitraries.js';
import { consoleProblem } from './helpers/console-check.js';
import { baseSeed, checkProperty as check } from './helpers/fuzz-config.js';
import { percentEncode } from './helpers/hostile.js';
import { probe, watchProcess, type ProbeResponse } from './helpers/http-probe.js';

// Hostile input to every console page and form (fast-check), signed in as team A's member (and
// as an operator for the operator pages): query strings with unknown, repeated, %-broken, huge
// and unicode-edge values, other teams' ids, odd page numbers and dates; path ids of team B,
// malformed, traversing or with encoded slashes; forms with fields hostile, missing, repeated,
// oversized, of invalid UTF-8 or named like prototype keys; the contact import with broken CSV
// and broken multipart framing; now and then without the CSRF token, which must be a 403.
// Every answer is below 500, no page carries a planted marker as markup, a refusal says why,
// nothing pollutes Object.prototype, the process stays healthy, and no answer to team A ever
// shows team B's data (every name of B carries LEAK_MARKER). A redirect is followed once, so
// the one-time message it carries is judged on the page that shows it.

const RUNS_PER_ROUTE = 10;
/** The sign-in form's token before there is a session: any 32 characters, in its cookie and the form. */
const LOGIN_TOKEN = 'fuzzLoginToken_0123456789abcdefA';

let t0: TestApp;
let world: ConsoleWorld;
let routes: ConsoleRoute[];
let port: number;
let origin: string;
let watch: ReturnType<typeof watchProcess>;
const sessions: Record<'member' | 'operator', { token: string; csrf: string }> = { member: { token: '', csrf: '' }, operator: { token: '', csrf: '' } };
let sessionsRenewed = 0;

test.before(async () => {
  watch = watchProcess();
  t0 = await startTestApp({ overrides: { webhooks: { allowPrivate: true } } });
  port = t0.app.listeners.http!.port;
  origin = t0.baseUrl;
  world = await buildConsoleWorld(t0);
  routes = consoleRoutes();
  for (const who of ['member', 'operator'] as const) {
    const s = await t0.app.services.sessions.create(world[who].id);
    sessions[who] = { token: s.token, csrf: s.csrfToken };
  }
});
test.after.always(async () => {
  watch?.stop();
  await t0?.close();
});

const cookieOf = (token: string) => `posthorn_session=${encodeURIComponent(token)}`;

function setCookies(res: ProbeResponse): Map<string, string> {
  const out = new Map<string, string>();
  for (const c of [res.headers['set-cookie'] ?? []].flat()) {
    const m = /^([^=]+)=([^;]*)/.exec(c);
    if (m) out.set(m[1]!, /Max-Age=0/i.test(c) ? '' : m[2]!);
  }
  return out;
}

/** A session's CSRF token, read from a page (a changed password gives the member a new session). */
async function csrfOf(token: string): Promise<string> {
  const page = await probe(port, { method: 'GET', path: '/console/account', headers: { cookie: cookieOf(token) } });
  const m = /name="_csrf" value="([^"]+)"/.exec(page.text);
  if (!m) throw new Error(`no CSRF token for the session (status ${page.status})`);
  return m[1]!;
}

/** The session a request goes with: cookie and CSRF token. */
async function credentials(ex: ConsoleExample): Promise<{ cookie: string; token: string }> {
  if (ex.actor === 'anonymous') return { cookie: `posthorn_login=${LOGIN_TOKEN}`, token: LOGIN_TOKEN };
  if (ex.actor === 'throwaway') {
    const s = await t0.app.services.sessions.create(world.member.id);
    return { cookie: cookieOf(s.token), token: s.csrfToken };
  }
  const s = sessions[ex.actor];
  return { cookie: cookieOf(s.token), token: s.csrf };
}

async function send(route: ConsoleRoute, ex: ConsoleExample, req: ConsoleFuzzRequest): Promise<{ res: ProbeResponse; cookie: string }> {
  const { cookie, token } = await credentials(ex);
  const headers: Record<string, string> = { origin, cookie, ...req.headers };
  if (req.contentType) headers['content-type'] = req.contentType;
  if (req.csrf === 'header') headers['x-csrf-token'] = token;
  const slot = req.csrf === 'missing' ? '' : req.csrf === 'wrong' ? 'y'.repeat(32) : token;
  const body = req.body && (req.body.includes(CSRF_SLOT) ? Buffer.from(req.body.toString('latin1').split(CSRF_SLOT).join(slot), 'latin1') : req.body);
  const res = await probe(port, { method: route.method, path: req.path, headers, body });
  // A changed password ends the member's old session and hands it a new one.
  const renewed = setCookies(res).get('posthorn_session');
  if (ex.actor === 'member' && renewed) {
    const fresh = decodeURIComponent(renewed);
    sessions.member = { token: fresh, csrf: await csrfOf(fresh) };
  }
  return { res, cookie };
}

/** Sends, judges, and follows a redirect within the console once (its message is shown there); throws on any problem. */
async function judged(route: ConsoleRoute, ex: ConsoleExample, req: ConsoleFuzzRequest): Promise<ProbeResponse> {
  let sent: Awaited<ReturnType<typeof send>>;
  try {
    sent = await send(route, ex, req);
  } catch (err) {
    throw new Error(`no answer (${(err as Error).message}) to ${req.describe}`);
  }
  const { res, cookie } = sent;
  const teamView = ex.actor !== 'operator';
  const asksJson = /application\/json/.test(req.headers.accept ?? '') || /\.json(\?|$)/.test(req.path);
  const problem = consoleProblem(res, teamView, asksJson);
  if (problem) throw new Error(`${problem}\n  request: ${req.describe}`);
  if (route.method === 'POST' && (req.csrf === 'missing' || req.csrf === 'wrong')) {
    // The import's body is read before the token is checked: broken framing is a 400 or 413 first.
    // An address with NUL in it is refused before the token is looked at (404 or 400), as is the import's broken framing (400, 413).
    const allowed = [431, ...(/%00/.test(req.path) ? [400, 403, 404] : ex.csv !== undefined ? [400, 403, 413] : [403])];
    if (!allowed.includes(res.status)) throw new Error(`without a valid CSRF token: ${res.status}, not 403\n  request: ${req.describe}`);
  }
  const polluted = watch.prototypePolluted();
  if (polluted) throw new Error(`${polluted}\n  request: ${req.describe}`);
  if (watch.problems.length) throw new Error(`${watch.problems.join('\n')}\n  request: ${req.describe}`);
  const location = String(res.headers.location ?? '');
  if (res.status >= 300 && res.status < 400 && location.startsWith('/console')) {
    const flash = setCookies(res).get('posthorn_flash');
    const next = await probe(port, { method: 'GET', path: location, headers: { cookie: flash ? `${cookie}; posthorn_flash=${flash}` : cookie } });
    const after = consoleProblem(next, teamView);
    if (after) throw new Error(`${after}\n  on the page redirected to (${location.slice(0, 300)})\n  request: ${req.describe}`);
  }
  return res;
}

/** A mangled id that parses (as the route parses ids) to one the suite needs: deleting it would end the run. */
function hitsProtected(ex: ConsoleExample, route: ConsoleRoute, path: string): boolean {
  if (!ex.protect) return false;
  const segments = path.split('?')[0]!.split('/');
  const at = route.path.split('/').indexOf(':id');
  let raw = segments[at] ?? '';
  try {
    raw = decodeURIComponent(raw);
  } catch {
    return false;
  }
  return ex.protect.includes(Number.parseInt(raw, 10) || 0);
}

const examplePath = (route: ConsoleRoute, ex: ConsoleExample) => route.path.replace(/:([A-Za-z]+)/g, (_m, n: string) => percentEncode(ex.params[n]!));

test.serial('every console route (read from its router) has a valid example, and every example a route', (t) => {
  const keys = routes.map(routeKey);
  t.true(keys.length >= 81, `${keys.length} routes`);
  t.deepEqual(keys.filter((k) => !world.examples.has(k)), [], 'routes without an example (add one to test/proof/helpers/console-examples.ts)');
  t.deepEqual([...world.examples.keys()].filter((k) => !keys.includes(k)), [], 'examples for routes that no longer exist');
});

test.serial('the valid examples are valid: every page answers 200 to its user, and team B\'s marker shows on team B\'s own pages', async (t) => {
  for (const route of routes.filter((r) => r.method === 'GET')) {
    const ex = world.examples.get(routeKey(route))!;
    const query = ex.query.length ? `?${encodeForm(ex.query)}` : '';
    const { cookie } = await credentials(ex);
    const res = await probe(port, { method: 'GET', path: examplePath(route, ex) + query, headers: { cookie } });
    t.is(res.status, 200, `${routeKey(route)}: ${res.text.slice(0, 300)}`);
    t.is(consoleProblem(res, ex.actor !== 'operator'), null, routeKey(route));
  }
  // The leak check can fail: team B's member sees the marker on B's pages.
  const b = await t0.app.services.users.list().then((users) => users.find((u) => u.teamId === world.teamB)!);
  const s = await t0.app.services.sessions.create(b.id);
  for (const path of ['/console/contacts', `/console/contacts/${world.b.book}`, '/console/templates', '/console/domains']) {
    const res = await probe(port, { method: 'GET', path, headers: { cookie: cookieOf(s.token) } });
    t.regex(consoleProblem(res, true) ?? '', /team B's data/, path);
  }
});

test.serial('CSRF: every form without its token, with a wrong one or with another session\'s is refused with 403, and nothing changes', async (t) => {
  const snapshot = async () => {
    const lists = ['/v1/domains', '/v1/apiKeys', '/v1/contactBooks', '/v1/templates', '/v1/campaigns', '/v1/segments', '/v1/webhooks', '/v1/suppressions', `/v1/contactBooks/${world.a.book}/contacts`, `/v1/emails/${world.a.scheduledEmail}`];
    const bodies = await Promise.all(lists.map(async (p) => (await t0.request('GET', p)).body));
    return { bodies, teams: await t0.app.services.teams.list(), suspensions: await t0.app.services.queue.listSuspensions(), audit: (await t0.app.services.audit.list(1)).entries[0]?.id, users: await t0.app.services.users.list() };
  };
  const before = await snapshot();
  let requests = 0;
  for (const route of routes.filter((r) => r.method === 'POST')) {
    const ex = world.examples.get(routeKey(route))!;
    for (const variant of ['missing', 'wrong', 'other session'] as const) {
      const { cookie, token } = await credentials(ex);
      const other = ex.actor === 'operator' ? sessions.member.csrf : sessions.operator.csrf;
      const form = variant === 'missing' ? ex.form : [['_csrf', variant === 'wrong' ? token.slice(0, -1) + (token.endsWith('A') ? 'B' : 'A') : other] as [string, string], ...ex.form];
      const body = ex.csv !== undefined ? undefined : Buffer.from(encodeForm(form), 'latin1');
      const res = await probe(port, { method: 'POST', path: examplePath(route, ex), headers: { origin, cookie, 'content-type': 'application/x-www-form-urlencoded' }, body });
      requests++;
      t.is(res.status, 403, `${routeKey(route)} with the token ${variant}: ${res.status} ${res.text.slice(0, 200)}`);
      t.false(setCookies(res).has('posthorn_session') && !!setCookies(res).get('posthorn_session'), `${routeKey(route)} made a session`);
      if (ex.actor === 'throwaway') t.is((await probe(port, { method: 'GET', path: '/console/account', headers: { cookie } })).status, 200, 'the session refused its sign-out is still alive');
    }
  }
  t.deepEqual(await snapshot(), before);
  t.log(`${requests} refused forms`);
});

test.serial(`fast-check over every console route: mutated ids, queries, forms and uploads (${RUNS_PER_ROUTE} runs per route by default)`, async (t) => {
  const failures: string[] = [];
  const statuses = new Map<number, number>();
  let total = 0;
  for (const route of routes) {
    const key = routeKey(route);
    const ex = world.examples.get(key)!;
    const property = fc.asyncProperty(consoleRequest(route, ex), async (req) => {
      fc.pre(!hitsProtected(ex, route, req.path));
      const res = await judged(route, ex, req);
      total++;
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    });
    const failure = await check(`console ${key}`, property, RUNS_PER_ROUTE);
    if (failure) failures.push(failure);
    // Nothing the fuzzer may send ends these sessions behind the suite's back; if one ended, say so.
    for (const who of ['member', 'operator'] as const) {
      const alive = await probe(port, { method: 'GET', path: '/console/account', headers: { cookie: cookieOf(sessions[who].token) } });
      if (alive.status !== 200) {
        failures.push(`the ${who}'s session ended after ${key} (${alive.status})`);
        const s = await t0.app.services.sessions.create(world[who].id);
        sessions[who] = { token: s.token, csrf: s.csrfToken };
        sessionsRenewed++;
      }
    }
  }
  t.log(`base seed ${baseSeed()}: ${total} requests over ${routes.length} routes; statuses ${JSON.stringify(Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])))}; sessions renewed ${sessionsRenewed}`);
  t.deepEqual(failures, []);
});
