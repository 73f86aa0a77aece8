import type { TestResponse } from '../../helpers/test-app.js';
import type { Ids, IsolationWorld } from './isolation-world.js';
import type { Made, Probe, ProbeEnv, Req } from './probe-runner.js';

// The vocabulary of the isolation table (isolation-cases.ts and its parts): probes, requests,
// bodies, and what every part of the table shares about the world.


export type Step = Omit<Probe, 'label' | 'req' | 'expect'>;
export const probe = (label: string, expect: Probe['expect'], req: (v: Ids, me: Ids, made: Made) => Req, more: Step = {}): Probe => ({ label, expect, req, ...more });
export const get = (path: string): Req => ({ method: 'GET', path });
export const post = (path: string, body?: unknown): Req => ({ method: 'POST', path, body });
export const patch = (path: string, body: unknown): Req => ({ method: 'PATCH', path, body });
export const put = (path: string, body: unknown): Req => ({ method: 'PUT', path, body });
export const del = (path: string, body?: unknown): Req => ({ method: 'DELETE', path, body });

export const doc = (text: string) => JSON.stringify({ type: 'doc', content: [{ type: 'paragraph', content: [{ type: 'text', text }] }] });
export const mail = (domain: string, extra: Record<string, unknown> = {}) => ({ from: `Probe <news@${domain}>`, to: 'probe-rcpt@example.org', subject: 'isolation probe', text: 'probe', ...extra });
export const campaignBody = (from: string, bookId: string, extra: Record<string, unknown> = {}) => ({ name: 'probe campaign', from: `news@${from}`, subject: 'probe subject', contactBookId: bookId, content: doc('probe body'), ...extra });
export const filters = { match: 'all', conditions: [{ field: 'email', op: 'contains', value: 'probe' }] };

/** Deletes what a 200 answer made (the probe's own object), by id. */
export const cleanUp = (path: (id: string) => string, pick: (b: any) => string = (b) => b.id) => async (env: ProbeEnv, o: { res: TestResponse; control?: TestResponse }) => {
  for (const r of [o.res, o.control]) if (r?.status === 200) await env.as(env.role.key, del(path(pick(r.body))));
};


/** What every part of the table closes over: team A's FULL key, a webhook URL, the clock. */
export interface IsolationContext {
  world: IsolationWorld;
  a: IsolationWorld['a'];
  fullA: string;
  hook: string;
  inDays: (n: number) => string;
  /** A request made as team A's FULL key, to set a probe up. */
  setup: (env: ProbeEnv, req: Req) => Promise<any>;
}

export function isolationContext(world: IsolationWorld): IsolationContext {
  const { a } = world;
  const fullA = a.keys.full.token;
  return {
    world,
    a,
    fullA,
    hook: `http://127.0.0.1:${world.receiver.port}/probe-hook`,
    inDays: (n) => new Date(world.clock.nowMs() + n * 86_400_000).toISOString(),
    setup: (env, req) => env.as(fullA, req),
  };
}
