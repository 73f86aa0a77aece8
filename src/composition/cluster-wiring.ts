import { hostname as osHostname } from 'node:os';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import { createClusterService, type ClusterService } from '../core/cluster/cluster-service.js';
import type { JobMonitor } from '../core/operators/job-monitor.js';
import type { CoreServices } from './core-services-wiring.js';
import { deadNodeRecount } from './dead-node-recount.js';
import type { Listeners } from './listener-states.js';

// The node's membership of the cluster (PostgreSQL only; architecture.md, Growing past one
// server): its heartbeat and sweep, and what it takes up when another node dies (the campaign
// counts that node never made, the contact imports it was running, the bounce notices it was
// sending). On SQLite there is no cluster service and the node is the only member.

export function wireCluster(
  o: Pick<CoreServices, 'clusterRepo' | 'nodeId' | 'permits' | 'campaigns' | 'contactImports' | 'bounceNotices' | 'webhookDispatcher'> & {
    clock: Clock;
    logger: Logger;
    /** Read at each heartbeat: the addresses the node listens on. */
    listeners: Listeners;
    jobs: JobMonitor;
    /** True once stop() has begun: no more work is taken up. */
    stopping: () => boolean;
    /** After every sweep: carries on the cron runs nodes that are gone left unfinished. */
    onOrphanedRuns: () => Promise<unknown>;
    /** Another process took this node's name over while it was silent: the node must stop (cluster-service.ts). */
    onNameLost: (err: Error) => void;
  },
) {
  const { clusterRepo, nodeId, permits, campaigns, contactImports, bounceNotices, webhookDispatcher, clock, logger, listeners, jobs, stopping, onOrphanedRuns, onNameLost } = o;
  const recount = deadNodeRecount({ campaigns, jobs, logger, stopping });
  const cluster: ClusterService | undefined =
    clusterRepo &&
    createClusterService({
      repo: clusterRepo,
      clock,
      logger,
      node: { id: nodeId, hostname: osHostname(), pid: process.pid },
      listeners: () => ({ ...listeners }),
      writeConnections: permits?.writeHeld,
      // Webhook calls per endpoint and per host are counted in memory: each node takes its share.
      onLiveNodes: (n) => webhookDispatcher.setLiveNodes(n),
      onNodeDied: async () => recount.start(),
      onOrphanedImports: async () => {
        if (stopping()) return;
        const resumed = await contactImports.adoptUnowned();
        if (resumed) logger.info({ event: 'cluster.imports_taken_over', resumed }, `took up ${resumed} contact import(s) a dead node was running`);
      },
      onOrphanedRuns,
      onBounceNoticesFreed: async () => bounceNotices?.claimNow(),
      onNameLost,
    });
  /** The node and the members it sees: itself alone on SQLite. */
  const clusterView = async () =>
    cluster
      ? { node: nodeId, members: (await cluster.members()).map((m) => ({ node: m.node, hostname: m.hostname, lastSeenSeconds: Math.round(m.lastSeenMs / 100) / 10 })) }
      : { node: nodeId, members: [{ node: nodeId, hostname: osHostname(), lastSeenSeconds: 0 }] };
  return { recount, cluster, clusterView };
}

export type ClusterWiring = ReturnType<typeof wireCluster>;
