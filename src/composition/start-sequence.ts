import type { Config } from '../config/defaults.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import type { DnsResolver } from '../lib/dns/dns-client.js';
import { isStorageFailure } from '../store/store-errors.js';
import { storageUnavailable } from '../core/errors.js';
import type { ClusterService } from '../core/cluster/cluster-service.js';
import { createHttpApp, listenHttp, type RunningHttpServer } from '../api/http-server.js';
import { unsubscribeRoutes } from '../api/unsubscribe-routes.js';
import { contactConfirmationPages } from '../api/routes/contacts-routes.js';
import { trackingRoutes } from '../api/tracking-routes.js';
import { metricsRoute } from '../api/admin/metrics-route.js';
import { healthRoute } from '../api/health-route.js';
import { mtaStsRoutes } from '../api/mta-sts-routes.js';
import { mountConsole } from '../console/console-module.js';
import { toNodeStyleResolver } from '../lib/dns/node-style-resolver.js';
import type { SmtpListener } from '../smtp/smtp-listener.js';
import type { CoreServices } from './core-services-wiring.js';
import type { ServerWiring } from './server-wiring.js';
import type { ClusterWiring } from './cluster-wiring.js';
import type { Scheduler } from './scheduler-wiring.js';
import { announceReady, announceSettings } from './start-notices.js';
import { startSmtpListeners } from './smtp-listeners.js';
import type { Listeners } from './listener-states.js';

// App.start(): the HTTP API, joining the cluster (or, alone, freeing what a previous run left),
// the SMTP listeners, the engine, the webhook dispatcher, the contact imports, and last the
// scheduler. stop() (composition/stop-sequence.ts) puts them down.

/** What start() has opened, filled in as it goes, so that stop() closes it even after a start that failed half-way. */
export interface Started {
  http?: RunningHttpServer;
  inboundListener?: SmtpListener;
  submissionListener?: SmtpListener;
}

export async function startApp(o: {
  core: CoreServices;
  /** The outbound side, the metrics, the listeners' certificate and the route tables (server-wiring.ts). */
  server: ServerWiring;
  config: Config;
  clock: Clock;
  logger: Logger;
  resolver: DnsResolver;
  storeOk: () => Promise<boolean>;
  stopping: () => boolean;
  cluster: ClusterService | undefined;
  clusterView: ClusterWiring['clusterView'];
  /** Filled in with each listener's address once it listens. */
  listeners: Listeners;
  /** Gets the name of each listener that was configured but failed to start. */
  failedListeners: Set<string>;
  scheduler: Scheduler;
  started: Started;
}): Promise<Listeners> {
  const { core, server, config, clock, logger, resolver, storeOk, stopping, cluster, clusterView, listeners, failedListeners, scheduler, started } = o;
  const { routes, adminRoutes, metrics, listenerTls } = server;
  const { nodeId, intake, apiKeys, rateLimiter, operatorKeys, contacts, campaigns, tracking, domains, emails, deliveries, contactBooks, contactImports } = core;
  const { segments, templates, suppressions, webhooks, analytics, inbound, teams, overview, queue, audit, users, sessions, loginThrottle } = core;
  const { receivedTlsReports, tlsCounter, shaper, webhookOutbox, webhookDispatcher } = core;

  const koa = createHttpApp({
    logger,
    intake,
    apiKeys,
    rateLimiter,
    defaultRateLimit: config.rateLimit.perSecond,
    bodyLimitBytes: config.http.bodyLimitBytes,
    trustProxy: config.http.trustProxy,
    routes,
    translateError: (err) => (isStorageFailure(err) ? storageUnavailable() : err),
    adminRoutes,
    operatorKeys,
    observeRequest: (method, route, status, seconds) => metrics.http(method, route, status, seconds),
    // The console answers the NUL character with its own error page (console-module.ts).
    ownNulPages: config.console.enabled ? ['/console'] : [],
    extra: (router) => {
      healthRoute({ storeOk, stopping, nodeId, members: async () => (await clusterView()).members, sandbox: config.sandbox, listeners })(router);
      metricsRoute({ metrics, operatorKeys, apiKeys, allowFrom: config.metrics.allowFrom, trustProxy: config.http.trustProxy })(router);
      contactConfirmationPages(router, contacts);
      unsubscribeRoutes(campaigns)(router);
      trackingRoutes(tracking, logger)(router);
      mtaStsRoutes(domains, logger)(router);
      if (config.console.enabled) {
        mountConsole(router, {
          services: { emails, deliveries, domains, apiKeys, contactBooks, contacts, contactImports, segments, templates, campaigns, suppressions, webhooks, analytics, received: inbound.received, teams, overview, queue, audit },
          users,
          sessions,
          loginThrottle,
          logger,
          publicUrl: config.publicUrl,
          sandbox: config.sandbox,
        });
      }
    },
  });
  if (cluster) {
    // PostgreSQL: other nodes may be running; only what this node id held in an earlier
    // life, and what dead nodes held, is freed (the rest belongs to live nodes).
    const freed = await cluster.start();
    logger.info({ event: 'cluster.join', node: nodeId, freed }, `joined the cluster as ${nodeId}`);
  } else {
    const releasedKeys = await emails.releaseInFlightKeys();
    if (releasedKeys) logger.info({ event: 'serve.recovered', left: 'idempotency_keys', count: releasedKeys }, 'released idempotency keys left in flight by a previous run');
    await domains.clearChecksLeftBehind();
  }
  const http = (started.http = await listenHttp(koa, config.http.host, config.http.port));
  listeners.http = { host: config.http.host, port: http.port };
  logger.info({ listener: 'http', host: config.http.host, port: http.port }, `HTTP API listening on ${config.http.host}:${http.port}`);
  announceSettings(config, logger, http.port);
  ({ inbound: started.inboundListener, submission: started.submissionListener } = await startSmtpListeners({
    config,
    logger,
    listenerTls,
    listeners,
    failed: failedListeners,
    intake,
    inbound: {
      router: inbound.router,
      reports: inbound.reports,
      received: inbound.received,
      resolver: toNodeStyleResolver(resolver) as never, // mailauth's resolver signature, typed loosely there
      clock,
      unsubscribe: (token) => campaigns.unsubscribe(token),
      onMessage: (kind) => metrics.inbound(kind),
      onRefused: (reason) => metrics.smtpRefused('inbound', reason),
      tlsReports: receivedTlsReports,
    },
    submission: { apiKeys, emails, rateLimiter, defaultRateLimit: config.rateLimit.perSecond, clock, onRefused: (reason) => metrics.smtpRefused('submission', reason) },
  }));
  const recounted = await campaigns.recoverCounts();
  if (recounted) logger.info({ event: 'serve.recovered', left: 'campaign_counts', count: recounted }, 'campaign counters a previous run left behind were counted');
  if (!cluster) {
    const released = await deliveries.releaseStaleLeases();
    if (released) logger.info({ event: 'serve.recovered', left: 'delivery_leases', count: released }, 'released delivery leases left by a previous run');
    await campaigns.releaseStaleBatches();
  }
  tlsCounter.start();
  await shaper.load();
  core.startEngine();
  if (!cluster) {
    const releasedCalls = await webhookOutbox.releaseStaleLeases();
    if (releasedCalls) logger.info({ event: 'serve.recovered', left: 'webhook_leases', count: releasedCalls }, 'released webhook call leases left by a previous run');
  }
  webhookDispatcher.start();
  await core.bounceNotices?.start(); // what a previous run left is sent now
  const resumedImports = await contactImports.resume();
  if (resumedImports) logger.info({ event: 'serve.recovered', left: 'contact_imports', count: resumedImports }, 'contact imports a previous run left unfinished carry on');
  scheduler.start();
  announceReady(config, logger, http.port);
  return listeners;
}
