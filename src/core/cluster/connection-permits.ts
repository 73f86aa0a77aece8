import type { Logger } from '../../lib/logger.js';
import type { ClusterRepository } from '../../store/repositories/cluster-repository.js';
import { STALE_MS } from './cluster-service.js';

/*
 * Per-destination connection limits for a cluster (and those of a shaped source and rollup): a
 * promise to the remote server, so they hold for all nodes together. Each node's open sessions
 * per key are a row in the store; a new session needs the cluster's total under the limit
 * (taken under a lock per key); while other nodes wait for one, a node keeps to its fair share,
 * so the node that opened its sessions first does not keep them all.
 * A node's rows are refreshed by its heartbeat and swept when it dies, so a killed node's
 * sessions stop counting once it is found dead. The SMTP client pool asks (smtp/outbound).
 */
export function createConnectionPermits(deps: { repo: ClusterRepository; node: string; logger: Logger }) {
  /** Sessions this node holds per destination: written with every heartbeat, so a lost release mends itself. */
  const held = new Map<string, number>();
  return {
    held: (): ReadonlyMap<string, number> => held,
    async acquire(key: string, limit: number): Promise<boolean> {
      const now = Date.now();
      try {
        const ok = await deps.repo.acquireConnection(key, deps.node, limit, now, now + STALE_MS);
        if (ok) held.set(key, (held.get(key) ?? 0) + 1);
        else deps.logger.debug({ event: 'cluster.connection_limit', destination: key, limit }, 'the cluster has all the sessions this destination may have, or this node its fair share of them; waiting for one');
        return ok;
      } catch (err) {
        // The store is unreachable: no new session (results could not be recorded either); asked again shortly.
        deps.logger.warn({ event: 'cluster.permit_failed', destination: key, err: (err as Error).message }, 'could not count a new connection in the store');
        return false;
      }
    },
    release(key: string): void {
      const n = (held.get(key) ?? 1) - 1;
      if (n > 0) held.set(key, n);
      else held.delete(key);
      deps.repo.releaseConnection(key, deps.node).catch((err: unknown) =>
        deps.logger.warn({ event: 'cluster.permit_release_failed', destination: key, err: (err as Error).message }, 'could not give a connection back in the store; the next heartbeat writes the true count'),
      );
    },
  };
}
