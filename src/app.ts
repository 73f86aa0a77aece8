import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import type { Config } from './config/defaults.js';
import { systemClock, type Clock } from './lib/clock.js';
import { createLogger, type Logger } from './lib/logger.js';
import { createDnsClient, type DnsResolver } from './lib/dns/dns-client.js';
import type { AppStore } from './store/open-store.js';
import { isStorageFailure } from './store/store-errors.js';
import { databaseUrlTarget } from './store/pg/pg-store.js';
import { storageUnavailable } from './core/errors.js';
import { migrateToLatest } from './store/migrate.js';
import { createSettingsRepository } from './store/repositories/settings-repository.js';
import { createHttpApp, listenHttp, type RunningHttpServer } from './api/http-server.js';
import type { RouteDef } from './api/route-types.js';
import { unsubscribeRoutes } from './api/unsubscribe-routes.js';
import { contactConfirmationPages } from './api/routes/contacts-routes.js';
import { toNodeStyleResolver } from './lib/dns/node-style-resolver.js';
import type { SmtpListener } from './smtp/smtp-listener.js';
import { trackingRoutes } from './api/tracking-routes.js';
import { OPERATOR_API, openApiRoute } from './api/openapi-document.js';
import { publicApiRoutes } from './composition/api-routes.js';
import { operatorRoutes } from './api/admin/operator-routes.js';
import { metricsRoute } from './api/admin/metrics-route.js';
import { healthRoute } from './api/health-route.js';
import { createAdminHealth } from './core/operators/admin-health.js';
import { JobMonitor } from './core/operators/job-monitor.js';
import { mtaStsRoutes } from './api/mta-sts-routes.js';
import { mountConsole } from './console/console-module.js';
import { openStoreOf } from './composition/store-opening.js';
import { announceSettings } from './composition/start-notices.js';
import { listenerStatesOf, startSmtpListeners, type Listeners } from './composition/smtp-listeners.js';
import { wireCoreServices } from './composition/core-services-wiring.js';
import { closingOnFailure } from './composition/close-on-failure.js';
import { wireCluster } from './composition/cluster-wiring.js';
import { wireScheduler } from './composition/scheduler-wiring.js';

// The one composition root: the CLI, `posthorn serve` and the tests all build the process here.

export interface AppOptions {
  config: Config;
  clock?: Clock;
  logger?: Logger;
  /** DNS resolver; tests inject one pointed at their own zone. */
  resolver?: DnsResolver;
  /**
   * A PostgreSQL store that cannot be reached is waited for (retried with a growing pause, each
   * failure logged) instead of failing: `posthorn serve`. Admin commands fail at once.
   */
  waitForStore?: boolean;
  /** `posthorn serve`: no other server may run on the same SQLite data directory. */
  serveLock?: boolean;
}

export type { Listeners } from './composition/smtp-listeners.js';

export type App = Awaited<ReturnType<typeof createApp>>;

export { copyStoreTo, migrateStore } from './composition/store-opening.js';
export type { CopyProgress, CopyReport } from './store/store-copy.js';

export function createApp(opts: AppOptions) {
  return closingOnFailure((onFailure) => buildApp(opts, onFailure));
}

async function buildApp(opts: AppOptions, onFailure: (close: () => Promise<unknown>) => void) {
  const config = opts.config;
  const clock = opts.clock ?? systemClock;
  const logger = opts.logger ?? createLogger(config.log.level);
  const resolver = opts.resolver ?? createDnsClient({ servers: config.dns.servers, timeoutMs: config.dns.timeoutMs });
  const dataDir = resolve(config.dataDir);
  // Background jobs' last outcomes, for /admin/v1/health.
  const jobs = new JobMonitor(clock);
  const store: AppStore = await openStoreOf(
    config,
    logger,
    {
      backgroundCheckpoints: true,
      serveLock: opts.serveLock,
      onCheckpointError: (message) => {
        jobs.failed('wal-checkpoint', message);
        logger.warn({ err: message }, 'WAL checkpoint failed; retried at the next interval');
      },
      onPoolError: (err) => logger.warn({ event: 'store.connection_lost', err: err.message }, 'a connection to the PostgreSQL store was lost; the pool opens a new one when needed'),
    },
    opts.waitForStore ?? false,
  );
  onFailure(() => store.close());
  if (store.kind === 'postgres') logger.info({ event: 'store.open', store: databaseUrlTarget(config.store.url) }, `store: PostgreSQL at ${databaseUrlTarget(config.store.url)}`);
  await migrateToLatest(store.db);

  const settings = createSettingsRepository(store.db);
  // Signs tracking, unsubscribe and confirmation links; kept in the store so links survive restarts.
  const secret = config.secret || (await settings.getOrInsert('link_secret', randomBytes(32).toString('hex')));

  // The repositories, the core services and the outbound side they feed (composition/core-services-wiring.ts).
  const core = wireCoreServices({ config, clock, logger, resolver, store, settings, secret, dataDir, onFailure });
  const {
    services, events, templates, shaper, audit, teams, domains, apiKeys, nodeId, clusterRepo, rateLimiter, queueRepo, metrics, engine, intake,
    emails, deliveries, operatorKeys, shaping, queue, contacts, contactBooks, segments, campaigns, suppressions, webhookOutbox, webhooks,
    webhookDispatcher, analytics, tracking, inbound, listenerTls, loginThrottle, users, sessions, contactImports, overview, sandbox,
    tlsCounter, tlsReports, receivedTlsReports, serverDkimKey, outbound, pool, signer, permits, runTlsReports,
  } = core;
  let inboundListener: SmtpListener | undefined;
  let submissionListener: SmtpListener | undefined;

  const routes = publicApiRoutes({ apiKeys, domains, emails, templates, campaigns, contactBooks, contacts, segments, suppressions, received: inbound.received, webhooks, analytics, sandbox, receivedTlsReports });
  const listeners: Listeners = {};
  /** Listeners that were configured but failed to start. */
  const failedListeners = new Set<string>();
  let http: RunningHttpServer | undefined;
  let stopping = false;
  const storeOk = () => store.ping();
  const listenerStates = () => listenerStatesOf(listeners, failedListeners);
  // Membership of the cluster on PostgreSQL (composition/cluster-wiring.ts).
  const { recount, cluster, clusterView } = wireCluster({ clusterRepo, nodeId, permits, campaigns, contactImports, clock, logger, listeners, jobs, stopping: () => stopping });
  // The cron jobs and the campaign runner (composition/scheduler-wiring.ts).
  const scheduler = wireScheduler({ domains, emails, queue, campaigns, runTlsReports, config, logger, jobs, cluster });
  const adminHealth = createAdminHealth({
    queue: queueRepo,
    jobs,
    clock,
    node: nodeId,
    dataDir,
    storeOk,
    listeners: listenerStates,
    stopping: () => stopping,
    storeKind: store.kind,
    cluster: async () => (await clusterView()).members,
  });
  const adminRoutes: RouteDef[] = operatorRoutes({ queue, teams, domains, shaping, audit, health: adminHealth });
  adminRoutes.push(openApiRoute(() => adminRoutes, OPERATOR_API));

  return {
    config,
    clock,
    logger,
    resolver,
    store,
    secret,
    services,
    listeners,
    engine,
    intake,
    /** The API route table (the OpenAPI document and route sweeps read it). */
    routes,
    /** The operator API's route table (/admin/v1). */
    adminRoutes,
    /** This node's id (cluster.nodeName or <hostname>:<pid>) and, on PostgreSQL, its cluster membership. */
    nodeId,
    cluster,
    metrics,
    /** Runs due campaign batches now (tests move their clock, then call this). */
    runCampaigns: scheduler.runCampaigns,
    /** Resolves once the campaign recount a dead node's sweep started, if any, has ended (tests). */
    campaignRecount: () => recount.settled(),
    /** Runs a cron job now as its tick would (tests); false before start() or for an unknown name. */
    runCronJob: scheduler.runCronJob,
    inbound,
    webhookDispatcher,
    /** TLS reporting (RFC 8460): run the daily reports now (tests move their clock first), the counter, the history. */
    tlsReports: {
      runNow: () => runTlsReports(true),
      sendDue: () => runTlsReports(false),
      flushCounts: () => tlsCounter.flush(),
      history: () => tlsReports.history(),
      received: receivedTlsReports,
      serverDkimKey,
    },

    /** On a store with no key at all, makes a team and a FULL key so a newcomer can call the API at once. */
    async ensureFirstKey(): Promise<string | null> {
      if ((await apiKeys.count()) > 0) return null;
      const existing = await teams.list();
      const teamId = existing[0]?.id ?? (await teams.create('Default team'));
      const key = await apiKeys.create(teamId, { name: 'first key', permission: 'FULL' });
      return key.token;
    },

    async start(): Promise<Listeners> {
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
        extra: (router) => {
          healthRoute({ storeOk, stopping: () => stopping, nodeId, members: async () => (await clusterView()).members, sandbox: config.sandbox, listeners })(router);
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
        if (releasedKeys) logger.info({ released: releasedKeys }, 'released idempotency keys left in flight by a previous run');
        await domains.clearChecksLeftBehind();
      }
      http = await listenHttp(koa, config.http.host, config.http.port);
      listeners.http = { host: config.http.host, port: http.port };
      logger.info({ listener: 'http', host: config.http.host, port: http.port }, `HTTP API listening on ${config.http.host}:${http.port}`);
      announceSettings(config, logger, http.port);
      ({ inbound: inboundListener, submission: submissionListener } = await startSmtpListeners({
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
          tlsReports: receivedTlsReports,
        },
        submission: { apiKeys, emails, rateLimiter, defaultRateLimit: config.rateLimit.perSecond },
      }));
      const recounted = await campaigns.recoverCounts();
      if (recounted) logger.info({ recounted }, 'campaign counters a previous run left behind were counted');
      if (!cluster) {
        const released = await deliveries.releaseStaleLeases();
        if (released) logger.info({ released }, 'released delivery leases left by a previous run');
        await campaigns.releaseStaleBatches();
      }
      tlsCounter.start();
      await shaper.load();
      core.startEngine();
      if (!cluster) {
        const releasedCalls = await webhookOutbox.releaseStaleLeases();
        if (releasedCalls) logger.info({ released: releasedCalls }, 'released webhook call leases left by a previous run');
      }
      webhookDispatcher.start();
      const resumedImports = await contactImports.resume();
      if (resumedImports) logger.info({ resumed: resumedImports }, 'contact imports a previous run left unfinished carry on');
      scheduler.start();
      return listeners;
    },

    /** Graceful: stop accepting, let in-flight work finish, close the database. */
    async stop(): Promise<void> {
      if (stopping) return;
      stopping = true;
      scheduler.stopCron(); // no more ticks; a job under way stops at its next step (awaited below)
      await scheduler.stopCampaignRunner();
      await http?.close();
      await contactImports.stop(); // the chunk in progress is recorded; the rest carries on at the next start
      // Messages being stored finish and get their reply before the store closes.
      await Promise.all([inboundListener?.close(), submissionListener?.close()]);
      await engine!.stop();
      await scheduler.cronSettled(); // its last write (the domain a re-check was on) goes before the store closes
      await recount.settled(); // a dead node's campaign counts: ends at its next chunk
      await outbound.reportsSettled();
      await tlsCounter.stop(); // the counts of the sessions just finished
      await webhookDispatcher.stop(); // unsent calls stay in the outbox for the next start
      await events.settled(); // after-commit handlers (campaign counters) still write to the store
      await analytics.flush();
      await pool?.close();
      await signer.close();
      // Last before the store: the node leaves the cluster once its work is put down.
      await cluster?.stop();
      await store.close();
      logger.info('stopped');
    },
  };
}
