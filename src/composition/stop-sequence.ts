import type { Logger } from '../lib/logger.js';
import type { AppStore } from '../store/open-store.js';
import type { ClusterService } from '../core/cluster/cluster-service.js';
import type { CoreServices } from './core-services-wiring.js';
import type { ServerWiring } from './server-wiring.js';
import type { ClusterWiring } from './cluster-wiring.js';
import type { Scheduler } from './scheduler-wiring.js';
import type { Started } from './start-sequence.js';

// App.stop() (app.ts runs it once): stop accepting, let the work under way finish, and close the
// store last, once nothing is left that writes to it.

export async function stopApp(o: {
  core: CoreServices;
  /** What start() wired (nothing, when it never ran: an admin command). */
  server: ServerWiring | undefined;
  logger: Logger;
  store: AppStore;
  scheduler: Scheduler;
  /** What start() opened (nothing, when it never ran). */
  started: Started;
  recount: ClusterWiring['recount'];
  cluster: ClusterService | undefined;
}): Promise<void> {
  const { core, server, logger, store, scheduler, started, recount, cluster } = o;
  const { contactImports, tlsCounter, webhookDispatcher, events, analytics } = core;
  scheduler.stopCron(); // no more ticks; a job under way stops at its next step (awaited below)
  await scheduler.stopCampaignRunner();
  await started.http?.close();
  await contactImports.stop(); // the chunk in progress is recorded; the rest carries on at the next start
  // Messages being stored finish and get their reply before the store closes.
  await Promise.all([started.inboundListener?.close(), started.submissionListener?.close()]);
  // No notice is started from here; the ones on the wire finish (awaited below), those waiting
  // for a connection are answered by the engine's stop and put back, like the rest, for the next start.
  const noticesStopped = core.bounceNotices?.stop();
  await server?.engine.stop();
  await scheduler.cronSettled(); // its last write (the domain a re-check was on) goes before the store closes
  await recount.settled(); // a dead node's campaign counts: ends at its next chunk
  await server?.outbound.reportsSettled();
  await tlsCounter.stop(); // the counts of the sessions just finished
  await webhookDispatcher.stop(); // unsent calls stay in the outbox for the next start
  await noticesStopped;
  await events.settled(); // after-commit handlers (campaign counters) still write to the store
  await analytics.flush();
  await server?.pool?.close();
  await server?.outbound.signer.close();
  // Last before the store: the node leaves the cluster once its work is put down.
  await cluster?.stop();
  await store.close();
  logger.info('stopped');
}
