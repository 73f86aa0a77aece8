import test from 'ava';
import { operatorRoutes, type OperatorRouteDeps } from '../../src/api/admin/operator-routes.js';
import { createAdminHealth } from '../../src/core/operators/admin-health.js';
import { JobMonitor } from '../../src/core/operators/job-monitor.js';
import { ManualClock } from '../../src/lib/clock.js';
import type { RouteRequest } from '../../src/api/route-types.js';

// The race behind a 500 on /admin/v1/health: the store answers its ping, then the queue read that
// follows fails (a connection cut in between, a lock timeout). The answer is degraded, 503 with
// the documented body, like a failed ping; the next call, the store back, is ok again.

function health(queueUp: () => boolean) {
  const read = <T>(value: T) => async () => {
    if (!queueUp()) throw new Error('connection terminated unexpectedly');
    return value;
  };
  const clock = new ManualClock(Date.UTC(2026, 10, 29, 9, 0, 0));
  return createAdminHealth({
    queue: { totals: read({ ready: 2, scheduled: 0, deferred: 1, inflight: 0, suspended: 0 }), oldestReadyMs: read(null) },
    jobs: new JobMonitor(clock),
    clock,
    node: 'mail-1',
    dataDir: process.cwd(),
    storeOk: async () => true,
    listeners: () => ({ http: { state: 'listening', host: '127.0.0.1', port: 3000 } }),
    stopping: () => false,
    storeKind: 'sqlite',
    cluster: async () => [],
  });
}

async function answer(h: ReturnType<typeof health>) {
  const route = operatorRoutes({ health: h } as unknown as OperatorRouteDeps).find((r) => r.method === 'GET' && r.path === '/health')!;
  const koa = { status: 404, body: undefined as unknown };
  const returned = await route.handler({ koa } as unknown as RouteRequest);
  // The route table answers 200 with what a handler returns unless the handler set the body.
  return koa.body === undefined ? { status: 200, body: returned as any } : { status: koa.status, body: koa.body as any };
}

test('a queue read that fails after the ping answers degraded with 503 and the documented body, never a 500', async (t) => {
  let up = true;
  const h = health(() => up);
  const ok = await answer(h);
  t.is(ok.status, 200);
  t.like(ok.body, { status: 'ok', store: 'ok', queue: { ready: 2, deferred: 1 } });

  up = false;
  const down = await answer(h);
  t.is(down.status, 503);
  t.like(down.body, { status: 'degraded', store: 'error', node: 'mail-1', queue: { ready: 0, oldestReadyAgeSeconds: null } });
  t.is(down.body.listeners.http.state, 'listening', 'the rest of the body is still there');

  up = true;
  t.is((await answer(h)).status, 200);
});
