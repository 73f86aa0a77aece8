import type { ExecutionContext } from 'ava';
import type { HttpMethod, RouteDef } from '../../../src/api/route-types.js';
import type { TestResponse } from '../../helpers/test-app.js';
import type { Ids, IsolationWorld } from './isolation-world.js';
import { bodyText, isErrorBody, leakedMarkers, normalizeIds, structuralLeaks } from './leak-check.js';

// One probe = one request aimed at a route with ids from the victim, plus the expectation.
// The runner adds the checks every response gets: no 5xx, the spec's error body on any
// error, no victim marker, no foreign teamId or forbidden domain id; and for refusals the
// same request with made-up ids of the same shape must get the very same answer.

export interface Req {
  method: HttpMethod;
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
}

/**
 * hidden: 404 or 403, indistinguishable from a nonexistent id.
 * refused: 400, 403 or 404, indistinguishable from a nonexistent id.
 * ghostEqual: any status, indistinguishable from a nonexistent id (e.g. "count: 0").
 * clean: 200 (lists and analytics: the marker checks do the work).
 * forbidden: exactly 403 FORBIDDEN.
 * ok: 200 (an allowed use).
 */
export type Expect = 'hidden' | 'refused' | 'ghostEqual' | 'clean' | 'forbidden' | 'ok';

export interface Made {
  [k: string]: any;
}

export interface Probe {
  label: string;
  req(v: Ids, me: Ids, made: Made): Req;
  expect: Expect;
  /** For refusals: the same request with the caller's own ids succeeds (so the victim's id is the only reason). */
  control?: boolean;
  /** Runs after every probe without it: probes that make the caller's own objects. */
  late?: boolean;
  /** Check victim markers (default true). */
  markers?: boolean;
  before?(env: ProbeEnv): Promise<Made | void>;
  check?(res: TestResponse, env: ProbeEnv, made: Made): unknown;
  /** Clean-up; `control` is the control response when there was one. */
  after?(env: ProbeEnv, o: { res: TestResponse; control?: TestResponse; made: Made }): Promise<void>;
}

export interface RouteCase {
  /** Team B's keys against team A (victim: A's first domain; me: B's first domain). */
  cross(): Probe[];
  /** A SENDING key of team A on an email route: the allowed uses. */
  sending?(): Probe[];
  /** A key bound to A's first domain (me) against A's second domain (victim) and the team. */
  restricted(): Probe[];
}

export interface Role {
  name: string;
  key: string;
  teamId: number;
  victim: Ids;
  me: Ids;
  ghost: Ids;
  /** Victim text that must not appear (unless the request carried it). */
  markers: readonly string[];
  /** Whether the victim markers apply to a route (a domain-bound key sees team-wide resources). */
  markersApply?(routePath: string): boolean;
  /** The other team's text: never in any answer to this key. */
  foreignMarkers: readonly string[];
  forbiddenDomainIds: readonly number[];
}

export interface ProbeEnv {
  t: ExecutionContext;
  world: IsolationWorld;
  role: Role;
  /**
   * A request with the role's key, counted and checked like the probe itself. `knows`: text
   * the caller chose earlier (a name it gave), which may come back without being a leak.
   */
  call(req: Req, what?: string, knows?: string): Promise<TestResponse>;
  /** A request with another key (set-up and clean-up), counted apart; throws unless 200. */
  as(key: string, req: Req): Promise<any>;
}

export class Counter {
  readonly byRole = new Map<string, number>();
  add(name: string) {
    this.byRole.set(name, (this.byRole.get(name) ?? 0) + 1);
  }
  get total() {
    return [...this.byRole.values()].reduce((a, b) => a + b, 0);
  }
}

export function routePattern(route: Pick<RouteDef, 'path'>): RegExp {
  return new RegExp(`^${route.path.replace(/:[A-Za-z]+/g, '[^/]+')}$`);
}

/**
 * Victim value -> placeholder, and the ghost value of the same field -> the same placeholder.
 * Placeholders are named by the victim's value (in letters, so no later number replacement
 * can touch them): two fields with the same victim value (domain 2, key 2) stay unambiguous.
 */
function idPairs(v: Ids, ghost: Ids): [string | number, string][] {
  const names = new Map<string, string>();
  const nameOf = (value: string | number) => {
    const k = `${typeof value}:${value}`;
    if (!names.has(k)) names.set(k, `<id-${names.size.toString(26).replace(/[0-9]/g, (d) => 'qrstuvwxyz'[Number(d)]!)}>`);
    return names.get(k)!;
  };
  return (Object.keys(v) as (keyof Ids)[])
    .filter((k) => k !== 'teamId')
    .flatMap((k) => [
      [v[k], nameOf(v[k])] as [string | number, string],
      [ghost[k], nameOf(v[k])] as [string | number, string],
    ]);
}

export function makeEnv(t: ExecutionContext, world: IsolationWorld, role: Role, counter: Counter, routePath: string, probeMarkers = true): ProbeEnv {
  const applyMarkers = probeMarkers && (role.markersApply ? role.markersApply(routePath) : true);
  const env: ProbeEnv = {
    t,
    world,
    role,
    async call(req, what = '', knows = '') {
      const res = await world.request(req.method, `/v1${req.path}`, role.key, req.body, req.headers);
      counter.add(role.name);
      const label = `[${role.name}] ${req.method} ${req.path}${what ? ` (${what})` : ''}`;
      const sent = `${req.path} ${JSON.stringify(req.body ?? null)} ${JSON.stringify(req.headers ?? {})} ${knows}`;
      t.true(res.status < 500, `${label}: ${res.status} ${bodyText(res)}`);
      if (res.status >= 400) t.true(isErrorBody(res.body), `${label}: not the spec error body: ${bodyText(res)}`);
      const leaks = [...leakedMarkers(res, sent, role.foreignMarkers), ...(applyMarkers ? leakedMarkers(res, sent, role.markers) : [])];
      t.deepEqual(leaks, [], `${label}: leaks ${leaks.join(', ')} in ${bodyText(res).slice(0, 400)}`);
      if (typeof res.body === 'object') {
        const s = structuralLeaks(res.body, { teamId: role.teamId, forbiddenDomainIds: role.forbiddenDomainIds });
        t.deepEqual(s, [], `${label}: ${s.join(', ')}`);
      }
      return res;
    },
    async as(key, req) {
      const res = await world.request(req.method, `/v1${req.path}`, key, req.body, req.headers);
      counter.add('set-up and clean-up');
      if (res.status !== 200) throw new Error(`set-up ${req.method} ${req.path} -> ${res.status} ${bodyText(res)}`);
      return res.body;
    },
  };
  return env;
}

/** Runs one probe as `role` and asserts its expectation. */
export async function runProbe(env: ProbeEnv, route: RouteDef, probe: Probe): Promise<void> {
  const { t, role } = env;
  const made = (await probe.before?.(env)) ?? {};
  const req = probe.req(role.victim, role.me, made);
  const label = `[${role.name}] ${route.method} ${route.path} — ${probe.label}`;
  // The probe must really hit the route it is filed under.
  t.is(req.method, route.method, `${label}: filed under the wrong route`);
  t.regex(req.path.split('?')[0]!, routePattern(route), `${label}: ${req.path} is not ${route.path}`);

  const res = await env.call(req, probe.label);
  const ghostAnswer = async () => {
    const g = await env.call(probe.req(role.ghost, role.me, made), `${probe.label}, ghost ids`);
    t.is(res.status, g.status, `${label}: status differs from a nonexistent id (${res.status} vs ${g.status}): ${bodyText(res)} / ${bodyText(g)}`);
    const pairs = idPairs(role.victim, role.ghost);
    t.deepEqual(normalizeIds(res.body, pairs), normalizeIds(g.body, pairs), `${label}: answer differs from a nonexistent id`);
  };
  switch (probe.expect) {
    case 'hidden':
      t.true(res.status === 404 || res.status === 403, `${label}: expected 404/403, got ${res.status} ${bodyText(res)}`);
      await ghostAnswer();
      break;
    case 'refused':
      t.true([400, 403, 404].includes(res.status), `${label}: expected a refusal, got ${res.status} ${bodyText(res)}`);
      await ghostAnswer();
      break;
    case 'ghostEqual':
      await ghostAnswer();
      break;
    case 'forbidden':
      t.is(res.status, 403, `${label}: ${bodyText(res)}`);
      t.is(res.body?.error?.code, 'FORBIDDEN', label);
      break;
    case 'clean':
    case 'ok':
      t.is(res.status, 200, `${label}: ${bodyText(res)}`);
      break;
  }
  let control: TestResponse | undefined;
  if (probe.control) {
    control = await env.call(probe.req(role.me, role.me, made), `${probe.label}, control with own ids`);
    t.is(control.status, 200, `${label}: the control request with the caller's own ids failed: ${bodyText(control)}`);
  }
  await probe.check?.(res, env, made);
  await probe.after?.(env, { res, control, made });
}

/**
 * A probe reduced to "this key may not use this route": the same request must be refused
 * with 403 before anything happens, so there is nothing to check and nothing to clean up.
 */
export function asForbidden(p: Probe): Probe {
  return { label: p.label, req: p.req, expect: 'forbidden', before: p.before };
}
