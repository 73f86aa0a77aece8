import test, { type ExecutionContext } from 'ava';
import type { RouteDef } from '../../src/api/route-types.js';
import { DOMAIN_CONFINED, isolationCases } from './helpers/isolation-cases.js';
import { buildIsolationWorld, type IsolationWorld } from './helpers/isolation-world.js';
import { bodyText, isErrorBody, leakedMarkers, structuralLeaks } from './helpers/leak-check.js';
import { asForbidden, Counter, makeEnv, runProbe, type Probe, type Role, type RouteCase } from './helpers/probe-runner.js';
import { snapshotTeam, type Snapshot } from './helpers/team-snapshot.js';

// Tenant isolation, route by route: one team can never see or touch another
// team's data. Two teams with data in every resource; team B's keys aim every route at
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
  // The OpenAPI document (also at /doc, where useSend serves its own) is the one public API
  // route: static, the same for everyone, no team data. Any other public route would need its own case.
  t.deepEqual(x.w.t0.app.routes.filter((r) => r.access === 'public').map(keyOf), ['GET /openapi.json', 'GET /doc'], 'public API routes');
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

test.serial("team B's own filters, searches and segments reach only team B's rows, and its campaign mails only its contacts", async (t) => {
  const { a, b } = x;
  const key = b.keys.full.token;
  const mine = (path: string) => x.request('GET', path, key);
  const noLeak = (res: Awaited<ReturnType<typeof mine>>, label: string) => {
    t.true(res.status === 200 || res.status === 400, `${label}: ${res.status} ${bodyText(res)}`);
    t.deepEqual(leakedMarkers(res, label, a.markers), [], label);
    t.deepEqual(structuralLeaks(res.body, { teamId: b.teamId, forbiddenDomainIds: [a.d1.domainId, a.d2.domainId] }), [], label);
  };
  // Segments on B's own book whose filters select everything they can: an OR at the top, ORs
  // nested under ANDs, negations that match missing values, LIKE wildcards taken literally.
  const everyone = { field: 'email', op: 'contains', value: '@' };
  const filters = [
    { match: 'any', conditions: [{ field: 'firstName', op: 'eq', value: 'nobody' }, everyone] },
    { match: 'any', conditions: [everyone, { field: 'subscribed', op: 'eq', value: true }, { field: 'subscribed', op: 'eq', value: false }] },
    { match: 'all', conditions: [{ match: 'any', conditions: [everyone, { field: 'email', op: 'exists' }] }, { match: 'any', conditions: [{ field: 'lastName', op: 'neq', value: 'x' }] }] },
    { match: 'any', conditions: [{ field: 'createdAt', op: 'gte', value: '2000-01-01' }, { field: 'properties.plan', op: 'notExists' }] },
    { match: 'any', conditions: [{ field: 'email', op: 'contains', value: '%' }, { field: 'email', op: 'contains', value: '_' }, { field: 'email', op: 'endsWith', value: '.net' }] },
  ];
  const bookContacts = (await mine(`/v1/contactBooks/${b.d1.bookId}/contacts?limit=100`)).body as { id: string }[];
  for (const f of filters) {
    const seg = await x.request('POST', '/v1/segments', key, { name: 'bolt wide', contactBookId: b.d1.bookId, filters: f });
    t.is(seg.status, 200, bodyText(seg));
    const members = await mine(`/v1/segments/${seg.body.id}/contacts?limit=100`);
    noLeak(members, `segment ${JSON.stringify(f)}`);
    t.true(members.body.contacts.every((c: any) => c.contactBookId === b.d1.bookId), JSON.stringify(f));
    t.true(members.body.total <= bookContacts.length, JSON.stringify(f));
  }
  // A campaign to the widest of them reaches B's contacts only.
  const wide = await x.request('POST', '/v1/segments', key, { name: 'bolt everyone', contactBookId: b.d1.bookId, filters: filters[0] });
  const before = x.w.sink.messages.length;
  const campaign = await x.request('POST', '/v1/campaigns', key, {
    name: 'bolt wide campaign',
    from: `news@${b.d1.domainName}`,
    subject: 'bolt wide',
    contactBookId: b.d1.bookId,
    segmentId: wide.body.id,
    content: JSON.stringify({ type: 'doc', content: [{ type: 'paragraph', content: [{ type: 'text', text: 'hi' }] }] }),
    sendNow: true,
    batchSize: 1000,
  });
  t.is(campaign.status, 200, bodyText(campaign));
  await x.w.t0.app.runCampaigns();
  await x.settle();
  const rcpts = x.w.sink.messages.slice(before).flatMap((m) => m.rcptTo);
  t.true(rcpts.length > 0, 'the campaign sent');
  t.deepEqual(rcpts.filter((r) => !r.startsWith('bolt-')), [], "no recipient outside B's book");
  // Searches and list filters with wildcards, quotes and SQL-looking text, and A's own words.
  const needles = ['%', '_', "' or 1=1 --", '") or ("1"="1', 'acme', a.d1.templateId, '*'];
  for (const n of needles) {
    const q = encodeURIComponent(n);
    for (const path of [`/v1/campaigns?search=${q}`, `/v1/templates?search=${q}`, `/v1/suppressions?search=${q}`, `/v1/emails?tag=${q}`]) noLeak(await mine(path), path);
  }
  for (const path of [
    '/v1/emails?limit=100',
    `/v1/emails?domainId=${b.d1.domainId}`,
    '/v1/emails?tag=acme-tag',
    '/v1/receivedEmails?limit=100',
    `/v1/receivedEmails?domainId=${b.d1.domainId}`,
    '/v1/webhooks?limit=100',
    '/v1/segments?limit=100',
    `/v1/segments?contactBookId=${b.d1.bookId}`,
    '/v1/contactBooks',
    '/v1/analytics/email-time-series?days=30',
    `/v1/analytics/email-time-series?days=30&domainId=${b.d1.domainId}`,
    '/v1/analytics/reputation-metrics',
  ]) {
    noLeak(await mine(path), path);
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
