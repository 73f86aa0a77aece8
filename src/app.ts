import { randomBytes } from 'node:crypto';
import { hostname as osHostname } from 'node:os';
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
import { createTeamsRepository } from './store/repositories/teams-repository.js';
import { createApiKeysRepository } from './store/repositories/api-keys-repository.js';
import { createSettingsRepository } from './store/repositories/settings-repository.js';
import { createDomainsRepository } from './store/repositories/domains-repository.js';
import { createEmailsRepository } from './store/repositories/emails-repository.js';
import { createDeliveriesRepository } from './store/repositories/deliveries-repository.js';
import { createIdempotencyRepository } from './store/repositories/idempotency-repository.js';
import { createSuppressionsRepository } from './store/repositories/suppressions-repository.js';
import { createTemplatesRepository } from './store/repositories/templates-repository.js';
import { EventBus } from './core/events.js';
import { createApiKeyService } from './core/api-keys/api-key-service.js';
import { createTeamService } from './core/teams/team-service.js';
import { createRateLimiter } from './core/rate-limit/rate-limiter.js';
import { createSharedRateLimiter } from './core/rate-limit/shared-rate-limiter.js';
import { createRateLimitsRepository } from './store/repositories/rate-limits-repository.js';
import { createLoginFailuresRepository } from './store/repositories/login-failures-repository.js';
import { createClusterRepository } from './store/repositories/cluster-repository.js';
import { createClusterService, type ClusterService } from './core/cluster/cluster-service.js';
import { createDomainService } from './core/domains/domain-service.js';
import { createEmailService } from './core/emails/email-service.js';
import { createTemplateService } from './core/templates/template-service.js';
import { createDeliveryService } from './core/deliveries/delivery-service.js';
import { DeliveryEngine } from './smtp/outbound/delivery-engine.js';
import { createHttpApp, listenHttp, type RunningHttpServer } from './api/http-server.js';
import { startCronJobs, type CronJobs } from './scheduler/cron-jobs.js';
import type { RouteDef } from './api/route-types.js';
import { createContactBooksRepository } from './store/repositories/contact-books-repository.js';
import { createContactsRepository } from './store/repositories/contacts-repository.js';
import { createSegmentsRepository } from './store/repositories/segments-repository.js';
import { createContactBookService } from './core/contacts/contact-book-service.js';
import { createContactService } from './core/contacts/contact-service.js';
import { createSegmentService } from './core/segments/segment-service.js';
import { createSuppressionService } from './core/suppressions/suppression-service.js';
import { unsubscribeRoutes } from './api/unsubscribe-routes.js';
import { createCampaignService } from './core/campaigns/campaign-service.js';
import { verifyUnsubscribeToken } from './core/campaigns/unsubscribe-token.js';
import { createCampaignsRepository } from './store/repositories/campaigns-repository.js';
import { startCampaignRunner, type CampaignRunner } from './scheduler/campaign-runner.js';
import { contactConfirmationPages } from './api/routes/contacts-routes.js';
import { toNodeStyleResolver } from './lib/dns/node-style-resolver.js';
import { createReceivedEmailsRepository } from './store/repositories/received-emails-repository.js';
import { createInboundReportsRepository } from './store/repositories/inbound-reports-repository.js';
import { createInboundRouter } from './core/received/inbound-router.js';
import { createReportService } from './core/received/report-service.js';
import { createReceivedEmailService } from './core/received/received-email-service.js';
import { createListenerTlsSource } from './smtp/listener-tls.js';
import type { SmtpListener } from './smtp/smtp-listener.js';
import { createWebhooksRepository } from './store/repositories/webhooks-repository.js';
import { createAnalyticsRepository } from './store/repositories/analytics-repository.js';
import { createTrackingRepository } from './store/repositories/tracking-repository.js';
import { createWebhookEndpointsService } from './core/webhooks/webhook-endpoints-service.js';
import { createWebhookOutbox } from './core/webhooks/webhook-outbox.js';
import { createAnalyticsService } from './core/analytics/analytics-service.js';
import { createTrackingService } from './core/tracking/tracking-service.js';
import { WebhookDispatcher } from './http-out/webhook-dispatcher.js';
import { trackingRoutes } from './api/tracking-routes.js';
import { OPERATOR_API, openApiRoute } from './api/openapi-document.js';
import { publicApiRoutes } from './composition/api-routes.js';
import { operatorRoutes } from './api/admin/operator-routes.js';
import { metricsRoute } from './api/admin/metrics-route.js';
import { healthRoute } from './api/health-route.js';
import { createOperatorKeysRepository } from './store/repositories/operator-keys-repository.js';
import { createOperatorAuditRepository } from './store/repositories/operator-audit-repository.js';
import { createQueueRepository } from './store/repositories/queue-repository.js';
import { createOperatorKeyService } from './core/operators/operator-key-service.js';
import { createAuditService } from './core/operators/audit-service.js';
import { createAdminHealth } from './core/operators/admin-health.js';
import { JobMonitor } from './core/operators/job-monitor.js';
import { createQueueService } from './core/queue/queue-service.js';
import { createMetrics } from './core/metrics/metrics.js';
import { createTrafficShaper } from './core/shaping/traffic-shaper.js';
import { createShapingOperator } from './core/shaping/shaping-view.js';
import { createShapingRepository } from './store/repositories/shaping-repository.js';
import { createSandboxMessagesRepository } from './store/repositories/sandbox-messages-repository.js';
import { createSandboxService } from './core/sandbox/sandbox-service.js';
import { mtaStsRoutes } from './api/mta-sts-routes.js';
import { createConsoleUsersRepository } from './store/repositories/console-users-repository.js';
import { createContactImportsRepository } from './store/repositories/contact-imports-repository.js';
import { createUserService } from './core/users/user-service.js';
import { createSessionService } from './core/users/session-service.js';
import { createLoginThrottle } from './core/users/login-throttle.js';
import { createContactImportService } from './core/contacts/contact-import-service.js';
import { createOverviewService } from './core/overview/overview-service.js';
import { mountConsole } from './console/console-module.js';
import { openStoreOf } from './composition/store-opening.js';
import { wireOutbound, wireTransportSecurity } from './composition/outbound-wiring.js';
import { announceSettings } from './composition/start-notices.js';
import { listenerStatesOf, startSmtpListeners, type Listeners } from './composition/smtp-listeners.js';
import { closingOnFailure } from './composition/close-on-failure.js';
import { deadNodeRecount } from './composition/dead-node-recount.js';
import { BodyIntake } from './lib/body-intake.js';

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

  const events = new EventBus(logger);
  const teamsRepo = createTeamsRepository(store.db);
  const templates = createTemplateService({ templates: createTemplatesRepository(store.db), clock });
  // Egress sources and pools, traffic shaping, holds from replies and warm-up (core/shaping/).
  let engineRunning = false;
  const shapingRepo = createShapingRepository(store.db);
  const shaper = createTrafficShaper({
    sources: config.outbound.sources,
    pools: config.outbound.pools,
    rules: config.outbound.shaping,
    replyRules: config.outbound.replyRules,
    builtinShaping: config.outbound.builtinShaping,
    builtinReplyRules: config.outbound.builtinReplyRules,
    hostname: config.hostname,
    repo: shapingRepo,
    // Several nodes may share PostgreSQL: rates and warm-up budgets are taken in the store.
    shared: store.kind === 'postgres',
    clock,
    logger,
  });
  // The operator audit log: each operator change writes its entry inside its own transaction.
  const audit = createAuditService({ audit: createOperatorAuditRepository(store.db), clock });
  const teams = createTeamService({ teams: teamsRepo, clock, onTeamCreated: (teamId) => templates.seedDefaults(teamId), isPool: shaper.hasPool, audit });
  const domainsRepo = createDomainsRepository(store.db);
  const domains = createDomainService({
    isPool: shaper.hasPool,
    domains: domainsRepo,
    resolver,
    clock,
    events,
    logger,
    hostname: config.hostname,
    dkimSelector: config.domains.dkimSelector,
    bounceLabel: config.domains.bounceLabel,
    sandbox: config.sandbox,
    audit,
  });
  const apiKeys = createApiKeyService({ apiKeys: createApiKeysRepository(store.db), clock, domainBelongsToTeam: domains.belongsToTeam, audit });
  // One node per SQLite file; with PostgreSQL any number of nodes share the store
  // (architecture.md, Growing past one server): the node's id owns its leases, the rate limit
  // is counted in the store, cron runs and connection counts are the cluster's.
  const nodeId = config.cluster.nodeName || `${osHostname()}:${process.pid}`;
  const clusterRepo = store.kind === 'postgres' ? createClusterRepository(store.db) : undefined;
  const rateLimiter =
    store.kind === 'postgres'
      ? createSharedRateLimiter({ windows: createRateLimitsRepository(store.db), clock, onPruneError: (err) => logger.warn({ err }, 'pruning rate-limit windows failed') })
      : createRateLimiter(clock);

  const emailsRepo = createEmailsRepository(store.db);
  const deliveriesRepo = createDeliveriesRepository(store.db);
  const queueRepo = createQueueRepository(store.db);
  // Sources read at scrape time; the pool is built further down.
  const metrics = createMetrics({
    queue: () => queueRepo.countsForMetrics(clock.nowMs()),
    connections: () => pool?.openByHost() ?? new Map(),
    storeFiles: () => store.fileSizes(),
    shaping: () => shaping.state(),
    messageMemory: () => ({ bytes: engine?.budget.inUse ?? 0, waiting: engine?.budget.queued ?? 0 }),
    intakeMemory: () => ({ bytes: intake.budget.inUse, waiting: intake.budget.queued, receiving: intake.spool.memoryBytes, spooled: intake.spool.filesOpen }),
  });
  const suppressionsRepo = createSuppressionsRepository(store.db);
  let engine: DeliveryEngine | undefined;
  /** The memory of bodies being received and processed, API and SMTP alike (intakeMemoryMb). */
  const intake = BodyIntake.open(config.dataDir, config.intakeMemoryMb * 1024 * 1024);
  const emails = createEmailService({
    emails: emailsRepo,
    idempotency: createIdempotencyRepository(store.db, { owner: nodeId }),
    suppressions: suppressionsRepo,
    domains,
    events,
    clock,
    renderTemplate: (teamId, templateId, variables) => templates.renderForSend(teamId, templateId, variables),
    onQueued: () => engine?.wake(),
    onAccepted: (count) => metrics.accepted(count),
    logger,
  });
  const deliveries = createDeliveryService({
    deliveries: deliveriesRepo,
    emails: emailsRepo,
    domains: domainsRepo,
    suppressions: suppressionsRepo,
    events,
    clock,
    logger,
    maxAgeMs: config.outbound.maxAgeHours * 3_600_000,
    // Renewed while the attempt is under way (a backlog behind a slow host can outlast it): it
    // runs out only when its holder died or could not record the result.
    leaseMs: config.outbound.leaseMs,
    owner: nodeId,
    observe: (samples) => samples.forEach((s) => metrics.outcome(s)),
    sandbox: config.sandbox,
  });

  // The operator's side: operator keys, the audit log, the queue (suspensions, retry, bounce, traces).
  const operatorKeys = createOperatorKeyService({ keys: createOperatorKeysRepository(store.db), clock, audit });
  const shaping = createShapingOperator({
    shaper,
    repo: shapingRepo,
    rules: config.outbound.shaping,
    builtinShaping: config.outbound.builtinShaping,
    audit,
    clock,
    wake: () => engine?.wake(),
    // Another node's engine may hold the lifted hold for a few seconds more: only a lone node's own engine forgets it at once.
    engineHere: () => engineRunning && store.kind !== 'postgres',
  });
  const queue = createQueueService({
    shaping,
    queue: queueRepo,
    deliveriesRepo,
    emails: emailsRepo,
    deliveries,
    audit,
    clock,
    owner: `${nodeId}:operator`,
    leaseMs: config.outbound.leaseMs,
    openConnections: () => pool?.openByHost() ?? new Map(),
    wake: () => engine?.wake(),
  });

  // Audience: contact books, contacts (with double opt-in through the send path), segments, suppressions.
  const contactBooksRepo = createContactBooksRepository(store.db);
  const contactsRepo = createContactsRepository(store.db);
  const contacts = createContactService({ books: contactBooksRepo, contacts: contactsRepo, domains, emails, events, clock, logger, secret, publicUrl: config.publicUrl });
  const contactBooks = createContactBookService({ books: contactBooksRepo, domains, clock, contacts, events });
  const segmentsRepo = createSegmentsRepository(store.db);
  const segments = createSegmentService({ segments: segmentsRepo, books: contactBooksRepo, contacts: contactsRepo, clock });
  const campaigns = createCampaignService({
    campaigns: createCampaignsRepository(store.db),
    contactBooks: contactBooksRepo,
    segments: segmentsRepo,
    contacts,
    emails,
    domains,
    events,
    clock,
    logger,
    secret,
    publicUrl: config.publicUrl,
    hostname: config.hostname,
    batchWindowMs: config.campaigns.batchWindowSeconds * 1000,
    owner: nodeId,
  });
  // Campaign counters follow the status events of campaign emails.
  events.on('*', (e) => (e.type.startsWith('email.') ? campaigns.onEmailEvent(e) : undefined));
  let campaignRunner: CampaignRunner | undefined;
  const suppressions = createSuppressionService({ suppressions: suppressionsRepo, clock });

  // Events out: the webhook outbox and its dispatcher, open/click tracking, analytics rollups.
  const webhooksRepo = createWebhooksRepository(store.db);
  const webhookOutbox = createWebhookOutbox({
    webhooks: webhooksRepo,
    resolver,
    clock,
    logger,
    allowPrivate: config.webhooks.allowPrivate,
    leaseMs: config.webhooks.leaseMs,
    owner: nodeId,
    onDue: (due) => {
      for (const [id, dueMs] of due) webhookDispatcher.noteDue(id, dueMs);
      webhookDispatcher.wake();
    },
  });
  const webhooks = createWebhookEndpointsService({
    webhooks: webhooksRepo,
    outbox: webhookOutbox,
    resolver,
    clock,
    allowPrivate: config.webhooks.allowPrivate,
    domainBelongsToTeam: domains.belongsToTeam,
  });
  const webhookDispatcher = new WebhookDispatcher({ outbox: webhookOutbox, clock, logger, timeoutMs: config.webhooks.timeoutMs, onAttempt: (outcome) => metrics.webhookCall(outcome) });
  const analytics = createAnalyticsService({ analytics: createAnalyticsRepository(store.db), clock, logger, domainBelongsToTeam: domains.belongsToTeam });
  const tracking = createTrackingService({ emails: emailsRepo, tracking: createTrackingRepository(store.db), events, clock, logger, secret, publicUrl: config.publicUrl });
  // Every event's outbox rows commit with the write that emits it (transactional outbox, see
  // core/events.ts); after the commit the dispatcher is woken for them.
  events.onInTransaction((batch) => batch.forEach((event) => webhookOutbox.handleInTransaction(event)));
  // Analytics rollups likewise commit with the status change they count.
  events.onInTransaction((batch) => analytics.handleInTransaction(batch));
  events.on('*', (event) => webhookOutbox.afterCommit(event));
  events.on('*', (event) => analytics.handleBusEvent(event));

  // Mail in (architecture.md, Outbound, inbound, tracking): inbound SMTP for bounces, complaints and receiving domains; submission.
  const inboundReportsRepo = createInboundReportsRepository(store.db);
  const inboundRouter = createInboundRouter({
    domains: domainsRepo,
    emails: emailsRepo,
    deliveries: deliveriesRepo,
    secret,
    complaintAddress: config.inbound.complaintAddress || `complaints@${config.hostname}`,
    unsubscribeHost: config.hostname,
    isUnsubscribeToken: (token) => verifyUnsubscribeToken(secret, token) !== null,
  });
  const inbound = {
    router: inboundRouter,
    reports: createReportService({ router: inboundRouter, emails: emailsRepo, deliveries: deliveriesRepo, reports: inboundReportsRepo, events, clock, logger }),
    received: createReceivedEmailService({ received: createReceivedEmailsRepository(store.db), events, clock }),
    reportsRepo: inboundReportsRepo,
  };
  const listenerTls = createListenerTlsSource({ dataDir, hostname: config.hostname, logger });
  let inboundListener: SmtpListener | undefined;
  let submissionListener: SmtpListener | undefined;

  // The web console's people and its background imports (docs/console.md).
  const consoleUsersRepo = createConsoleUsersRepository(store.db);
  // Failed sign-ins are rows, so the limits hold for the cluster and across restarts.
  const loginThrottle = createLoginThrottle({ failures: createLoginFailuresRepository(store.db), clock, onPruneError: (err) => logger.warn({ err }, 'pruning failed sign-ins failed') });
  const users = createUserService({ users: consoleUsersRepo, clock, teamExists: async (id) => !!(await teams.get(id)), onPasswordReset: (email) => loginThrottle.forgetAccount(email), audit });
  const sessions = createSessionService({
    users: consoleUsersRepo,
    clock,
    policy: { idleMs: config.console.sessionIdleMinutes * 60_000, absoluteMs: config.console.sessionMaxHours * 3_600_000 },
  });
  const contactImports = createContactImportService({ imports: createContactImportsRepository(store.db), contacts, clock, logger, node: nodeId, cluster: store.kind === 'postgres' });
  const overview = createOverviewService({ domains, webhooks, analytics });

  // Sandbox mode (architecture.md, Decisions: sandbox mode): the capture mailbox the engine delivers to instead of any MX.
  const sandbox = createSandboxService({ messages: createSandboxMessagesRepository(store.db), clock, enabled: config.sandbox });

  // Transport security (docs/outbound.md): MTA-STS and DANE per destination, TLS reporting both ways.
  const { tlsCounter, tlsReports, receivedTlsReports, stsPolicies, serverDkimKey } = wireTransportSecurity({ config, logger, resolver, clock, store, settings });
  const tlsReportConfig = config.outbound.tlsReports;

  const services = { campaigns, templates, teams, apiKeys, events, domains, emails, deliveries, contactBooks, contacts, segments, suppressions, webhooks, webhookOutbox, analytics, tracking, sandbox, tlsReports, operatorKeys, audit, queue, contactImports, users, sessions, overview, shaping };

  const routes = publicApiRoutes({ apiKeys, domains, emails, templates, campaigns, contactBooks, contacts, segments, suppressions, received: inbound.received, webhooks, analytics, sandbox, receivedTlsReports });
  let cron: CronJobs | undefined;
  // The outbound side: the SMTP client pool (none in sandbox mode), transport security, the
  // delivery engine and the TLS reports it sends (composition/outbound-wiring.ts).
  const outbound = wireOutbound({ config, logger, resolver, clock, deliveries, tracking, sandbox, shaper, metrics, tlsCounter, tlsReports, stsPolicies, serverDkimKey, secret, cluster: clusterRepo && { repo: clusterRepo, node: nodeId } });
  const { pool, signer, permits, runTlsReports } = outbound;
  onFailure(() => signer.close());
  engine = outbound.engine;
  const listeners: Listeners = {};
  /** Listeners that were configured but failed to start. */
  const failedListeners = new Set<string>();
  let http: RunningHttpServer | undefined;
  let stopping = false;
  const storeOk = () => store.ping();
  const listenerStates = () => listenerStatesOf(listeners, failedListeners);
  const recount = deadNodeRecount({ campaigns, jobs, logger, stopping: () => stopping });
  const cluster: ClusterService | undefined =
    clusterRepo &&
    createClusterService({
      repo: clusterRepo,
      clock,
      logger,
      node: { id: nodeId, hostname: osHostname(), pid: process.pid },
      listeners: () => ({ ...listeners }),
      writeConnections: permits?.writeHeld,
      onNodeDied: async () => recount.start(),
      onOrphanedImports: async () => {
        if (stopping) return;
        const resumed = await contactImports.adoptUnowned();
        if (resumed) logger.info({ event: 'cluster.imports_taken_over', resumed }, `took up ${resumed} contact import(s) a dead node was running`);
      },
    });
  /** The node and the members it sees: itself alone on SQLite. */
  const clusterView = async () =>
    cluster
      ? { node: nodeId, members: (await cluster.members()).map((m) => ({ node: m.node, hostname: m.hostname, lastSeenSeconds: Math.round(m.lastSeenMs / 100) / 10 })) }
      : { node: nodeId, members: [{ node: nodeId, hostname: osHostname(), lastSeenSeconds: 0 }] };
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
    runCampaigns: () => campaignRunner?.tickNow() ?? campaigns.tick(),
    /** Resolves once the campaign recount a dead node's sweep started, if any, has ended (tests). */
    campaignRecount: () => recount.settled(),
    /** Runs a cron job now as its tick would (tests); false before start() or for an unknown name. */
    runCronJob: (name: string) => cron?.runNow(name) ?? Promise.resolve(false),
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
      engine!.start();
      engineRunning = true;
      if (!cluster) {
        const releasedCalls = await webhookOutbox.releaseStaleLeases();
        if (releasedCalls) logger.info({ released: releasedCalls }, 'released webhook call leases left by a previous run');
      }
      webhookDispatcher.start();
      const resumedImports = await contactImports.resume();
      if (resumedImports) logger.info({ resumed: resumedImports }, 'contact imports a previous run left unfinished carry on');
      cron = startCronJobs({ logger, domains, emails, queue, config, jobs, claimRun: cluster && ((job, period) => cluster.claimRun(job, period)), tlsReports: tlsReportConfig.enabled ? { daily: (signal) => runTlsReports(true, signal), retries: (signal) => runTlsReports(false, signal) } : undefined });
      campaignRunner = startCampaignRunner({ campaigns, logger, jobs });
      return listeners;
    },

    /** Graceful: stop accepting, let in-flight work finish, close the database. */
    async stop(): Promise<void> {
      if (stopping) return;
      stopping = true;
      cron?.stop(); // no more ticks; a job under way stops at its next step (awaited below)
      await campaignRunner?.stop();
      await http?.close();
      await contactImports.stop(); // the chunk in progress is recorded; the rest carries on at the next start
      // Messages being stored finish and get their reply before the store closes.
      await Promise.all([inboundListener?.close(), submissionListener?.close()]);
      await engine!.stop();
      await cron?.settled(); // its last write (the domain a re-check was on) goes before the store closes
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
