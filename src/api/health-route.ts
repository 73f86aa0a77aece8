import type Router from '@koa/router';

export interface HealthRouteDeps {
  storeOk: () => Promise<boolean>;
  stopping: () => boolean;
  nodeId: string;
  /** The node ids this node sees in the cluster (itself alone on SQLite). */
  members: () => Promise<{ node: string }[]>;
  sandbox: boolean;
  listeners: unknown;
}

/**
 * `GET /health`, unauthenticated, for load balancers and service managers: 200 while the store
 * answers and the node is not stopping, 503 otherwise (a draining node leaves the rotation).
 */
export function healthRoute(deps: HealthRouteDeps) {
  return (router: Router): void => {
    router.get('/health', async (ctx) => {
      const ok = await deps.storeOk();
      const up = ok && !deps.stopping();
      const members = ok ? await deps.members().catch(() => []) : [];
      ctx.status = up ? 200 : 503;
      ctx.body = { status: up ? 'ok' : 'degraded', store: ok ? 'ok' : 'error', node: deps.nodeId, cluster: members.map((m) => m.node), sandbox: deps.sandbox, listeners: deps.listeners };
    });
  };
}
