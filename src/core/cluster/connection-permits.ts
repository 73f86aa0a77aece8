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
 *
 * The heartbeat writes this node's counts as they are here, so that write never overlaps an
 * acquire or release in flight: one that reached the store before the write but the count here
 * after it (or the other way round) would leave the store a session short, and the cluster would
 * open one more than the limit. Acquires and releases run alongside each other; a count write
 * waits until none is in flight and holds new ones back until it is done.
 */
export function createConnectionPermits(deps: { repo: ClusterRepository; node: string; logger: Logger }) {
  /** Sessions this node holds per destination: written with every heartbeat, so a lost release mends itself. */
  const held = new Map<string, number>();
  let inFlight = 0;
  let drained: (() => void) | undefined;
  /** A count write under way (or waiting for the operations in flight to end). */
  let writing: Promise<unknown> | undefined;

  async function enter(): Promise<void> {
    while (writing) await writing.catch(() => undefined);
    inFlight++;
  }
  function leave(): void {
    inFlight--;
    if (inFlight === 0 && drained) {
      const wake = drained;
      drained = undefined;
      wake();
    }
  }
  function count(key: string, by: number): void {
    const n = (held.get(key) ?? 0) + by;
    if (n > 0) held.set(key, n);
    else held.delete(key);
  }

  return {
    /** Runs `write` with this node's counts when no acquire or release is in flight (the heartbeat). */
    async writeHeld(write: (held: ReadonlyMap<string, number>) => Promise<void>): Promise<void> {
      while (writing) await writing.catch(() => undefined);
      const run = (async () => {
        if (inFlight > 0) await new Promise<void>((resolve) => (drained = resolve));
        await write(new Map(held));
      })();
      writing = run;
      try {
        await run;
      } finally {
        if (writing === run) writing = undefined;
      }
    },
    async acquire(key: string, limit: number): Promise<boolean> {
      await enter();
      try {
        // Held for STALE_MS by the store's clock, renewed by every heartbeat.
        const ok = await deps.repo.acquireConnection(key, deps.node, limit, STALE_MS);
        if (ok) count(key, 1);
        else deps.logger.debug({ event: 'cluster.connection_limit', destination: key, limit }, 'the cluster has all the sessions this destination may have, or this node its fair share of them; waiting for one');
        return ok;
      } catch (err) {
        // The store is unreachable: no new session (results could not be recorded either); asked again shortly.
        deps.logger.warn({ event: 'cluster.permit_failed', destination: key, err: (err as Error).message }, 'could not count a new connection in the store');
        return false;
      } finally {
        leave();
      }
    },
    release(key: string): void {
      void (async () => {
        await enter();
        try {
          await deps.repo.releaseConnection(key, deps.node);
        } catch (err) {
          deps.logger.warn({ event: 'cluster.permit_release_failed', destination: key, err: (err as Error).message }, 'could not give a connection back in the store; the next heartbeat writes the true count');
        } finally {
          count(key, -1);
          leave();
        }
      })();
    },
  };
}
