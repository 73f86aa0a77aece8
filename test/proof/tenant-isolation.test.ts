import test, { type ExecutionContext } from 'ava';
import type { RouteDef } from '../../src/api/route-types.js';
import { DOMAIN_CONFINED, isolationCases } from './helpers/isolation-cases.js';
import { buildIsolationWorld, type IsolationWorld } from './helpers/isolation-world.js';
import { bodyText, isErrorBody, leakedMarkers } from './helpers/leak-check.js';
import { asForbidden, Counter, makeEnv, runProbe, type Probe, type Role, type RouteCase } from './helpers/probe-runner.js';
import { snapshotTeam, type Snapshot } from './helpers/team-snapshot.js';

// Tenant isolation, route by route (DESIGN 7: "one team can never see or touch another
// team's data"). Two teams with data in every resource; team B's keys aim every route at
// team A's ids and must get what a nonexistent id gets; A's data is then read back whole and
// must be unchanged. A SENDING key and a key bound to one domain are held to what they may
// do, on every route; revoked and malformed keys get 401 everywhere.

let x: IsolationWorld;
let cases: Record<string, RouteCase>;
const counter = new Counter();
let routes: RouteDef[];
let snapshotBefore: Snapshot;
let acmeMailBefore = 0;
let acmeHookCallsBefore = 0;

const keyOf = (r: Pick<RouteDef, 'method' | 'path'>) => `${r.method} ${r.path}`;
// Return paths are bounces+<token>@bounces.<domain>: mail from A's domains is told by its envelope.
const acmeMail = () => x.w.sink.messages.filter((m) => /\.acme-(mail|other)\.dev$/.test(m.mailFrom)).length;
const acmeHookCalls = () => x.receiver.calls.filter((c) => c.path.startsWith('/acme-')).length;

let setupSeconds = 0;
test.before(async () => {
  const started = performance.now();
  x = await buildIsolationWorld();
  setupSeconds = (performance.now() - started) / 1000;
  cases = isolationCases(x);
  routes = x.w.t0.app.routes.filter((r) => r.access !== 'public');
});
test.after.always(async () => {
  await x?.close();
});

/** Runs every probe of `pick` for every route as `role`: early probes first, then the late ones. */
async function sweep(t: ExecutionContext, role: Role, pick: (c: RouteCase, r: RouteDef) => Probe[]) {
  for (const late of [false, true]) {
    for (const route of routes) {
      for (const p of pick(cases[keyOf(route)]!, route)) {
        if (!!p.late !== late) continue;
        await runProbe(makeEnv(t, x, role, counter, route.path, p.markers !== false), route, p);
      }
    }
  }
}

test.serial('the table has an isolation case for every API route, and none for a route that does not exist', (t) => {
  const keys = routes.map(keyOf);
  t.true(keys.length >= 69, `${keys.length} routes`);
  t.deepEqual(keys.filter((k) => !cases[k]), [], 'routes without an isolation case: add one to test/proof/helpers/isolation-cases.ts');
  t.deepEqual(Object.keys(cases).filter((k) => !keys.includes(k)), [], 'cases for routes that do not exist');
  // The OpenAPI document is the one public API route: static, the same for everyone, no team data.
  // Any other public route would need its own case.
  t.deepEqual(x.w.t0.app.routes.filter((r) => r.access === 'public').map(keyOf), ['GET /openapi.json'], 'public API routes');
  for (const route of routes) {
    const c = cases[keyOf(route)]!;
    t.true(c.cross().length > 0, `${keyOf(route)}: no cross-team probe`);
    t.true(c.restricted().length > 0, `${keyOf(route)}: no domain-bound probe`);
    if (route.access === 'sending') t.true((c.sending?.() ?? []).length > 0, `${keyOf(route)}: no SENDING-key probe`);
    else t.is(c.sending, undefined, `${keyOf(route)}: a full route has no SENDING uses`);
  }
});

test.serial("team B's FULL and SENDING keys can neither read, list, change nor delete team A's data", async (t) => {
  snapshotBefore = await snapshotTeam(x, x.a);
  acmeMailBefore = acmeMail();
  acmeHookCallsBefore = acmeHookCalls();
  const { a, b, ghost } = x;
  const base = { teamId: b.teamId, victim: a.d1, me: b.d1, ghost, markers: a.markers, foreignMarkers: [], forbiddenDomainIds: [a.d1.domainId, a.d2.domainId] };
  await sweep(t, { ...base, name: 'team B FULL key', key: b.keys.full.token }, (c) => c.cross());
  // The SENDING key: the email routes behave as for the FULL key; every other route is 403 first.
  await sweep(t, { ...base, name: 'team B SENDING key', key: b.keys.sending.token }, (c, r) => (r.access === 'full' ? c.cross().map(asForbidden) : c.cross()));
});

test.serial('revoked, malformed, tampered, unknown and missing keys get 401 on every authenticated route (revoked and malformed under /api/v1 too)', async (t) => {
  const full = x.a.keys.full.token;
  const tampered = full.slice(0, -1) + (full.endsWith('A') ? 'B' : 'A');
  const bad: [string, string | null, Record<string, string>?][] = [
    ['revoked', x.revokedKey],
    ['malformed', 'not-a-key'],
    ['tampered', tampered],
    ['unknown', `ph_000000000000_${'A'.repeat(32)}`],
    ['missing', null],
    ['basic auth', null, { authorization: `Basic ${Buffer.from(`x:${full}`).toString('base64')}` }],
  ];
  // Both prefixes mount the same middleware: every kind under /v1, the first two under /api/v1 too.
  const attempts = [...bad.map((b) => ['/v1', ...b] as const), ...bad.slice(0, 2).map((b) => ['/api/v1', ...b] as const)];
  for (const route of routes) {
    // A request that A's FULL key could make: real ids, valid body.
    const req = cases[keyOf(route)]!.cross()[0]!.req(x.a.d1, x.a.d1, {});
    for (const [prefix, kind, key, headers] of attempts) {
      const res = await x.request(req.method, prefix + req.path, key, req.body, headers);
      counter.add(`${kind} key`);
      const label = `${kind} key: ${req.method} ${prefix}${req.path}`;
      t.is(res.status, 401, `${label}: ${bodyText(res)}`);
      t.true(isErrorBody(res.body) && res.body.error.code === 'UNAUTHORIZED', `${label}: ${bodyText(res)}`);
      t.deepEqual(leakedMarkers(res, req.path + JSON.stringify(req.body ?? null), x.a.markers), [], label);
    }
  }
});

test.serial("afterwards team A's data is exactly as it was: nothing read into B, nothing changed, deleted or sent", async (t) => {
  await x.settle();
  const after = await snapshotTeam(x, x.a);
  t.deepEqual(Object.keys(after), Object.keys(snapshotBefore));
  for (const k of Object.keys(snapshotBefore)) t.deepEqual(after[k], snapshotBefore[k], `GET ${k} changed`);
  t.is(acmeMail(), acmeMailBefore, "no mail left from A's domains");
  t.is(acmeHookCalls(), acmeHookCallsBefore, "A's webhooks heard nothing of B's doings");
  // B's own emails: nothing from A's domains was accepted into team B.
  const bEmails = await x.request('GET', '/v1/emails?limit=100', x.b.keys.full.token);
  t.true((bEmails.body.data as any[]).every((e) => /@bolt-(mail|other)\.dev>?$/.test(e.from)), 'every B email is from a B domain');
});

test.serial('a SENDING key may use the email endpoints only: every other route answers 403 FORBIDDEN and changes nothing', async (t) => {
  const { a, b, ghost } = x;
  const role: Role = {
    name: 'team A SENDING key',
    key: a.keys.sending.token,
    teamId: a.teamId,
    victim: a.d1,
    me: a.d1,
    ghost,
    markers: [],
    foreignMarkers: b.markers,
    forbiddenDomainIds: [b.d1.domainId, b.d2.domainId],
  };
  const before = await snapshotTeam(x, a);
  // Every full route is tried with a request A's FULL key could make (A's own ids).
  await sweep(t, role, (c, r) => (r.access === 'full' ? c.cross().map(asForbidden) : c.sending!()));
  await x.settle();
  const after = await snapshotTeam(x, a);
  // Sending legitimately adds emails, webhook attempts and analytics; nothing else may move.
  const moved = /^\/(emails|analytics)|\/attempts/;
  for (const k of Object.keys(before).filter((k) => !moved.test(k))) t.deepEqual(after[k], before[k], `GET ${k} changed`);
});

test.serial('a key bound to one domain sends only from it and sees only its domain, its mail, webhooks, analytics and keys', async (t) => {
  const { a, b, ghost } = x;
  const role: Role = {
    name: 'team A key bound to a domain',
    key: a.keys.d1.token,
    teamId: a.teamId,
    victim: a.d2,
    me: a.d1,
    ghost,
    markers: a.d2Markers,
    markersApply: (path) => DOMAIN_CONFINED.some((p) => path.startsWith(p)),
    foreignMarkers: b.markers,
    forbiddenDomainIds: [a.d2.domainId, b.d1.domainId, b.d2.domainId],
  };
  await sweep(t, role, (c) => c.restricted());
  // The other domain's things are where they were.
  const d2 = a.d2;
  const full = a.keys.full.token;
  t.is((await x.request('GET', `/v1/domains/${d2.domainId}`, full)).body.receiving, true);
  t.is((await x.request('GET', `/v1/emails/${d2.scheduledEmailId}`, full)).body.latestStatus, 'SCHEDULED');
  t.is((await x.request('GET', `/v1/webhooks/${d2.webhookId}`, full)).status, 200);
  t.is((await x.request('GET', `/v1/webhooks/${d2.allWebhookId}`, full)).status, 200);
  t.true((await x.request('GET', '/v1/apiKeys', full)).body.some((k: any) => k.id === a.keys.full.id), 'the unrestricted key survived');
});

test.serial('request counts', (t) => {
  for (const [role, n] of counter.byRole) t.log(`${role}: ${n}`);
  t.log(`total: ${counter.total} requests over ${routes.length} routes (world built in ${setupSeconds.toFixed(1)} s)`);
  t.true(counter.total > routes.length * 10);
});
