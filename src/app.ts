import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname as osHostname } from 'node:os';
import { join, resolve } from 'node:path';
import type Router from '@koa/router';
import type { Config } from './config/defaults.js';
import { systemClock, type Clock } from './lib/clock.js';
import { createLogger, type Logger } from './lib/logger.js';
import { createDnsClient, type DnsResolver } from './lib/dns/dns-client.js';
import { openStore, type Store } from './store/db.js';
import { isStorageFailure } from './store/store-errors.js';
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
import { createDomainService } from './core/domains/domain-service.js';
import { createEmailService } from './core/emails/email-service.js';
import { createTemplateService } from './core/templates/template-service.js';
import { createDeliveryService } from './core/deliveries/delivery-service.js';
import { DeliveryEngine } from './smtp/outbound/delivery-engine.js';
import { createMessageFactory } from './smtp/outbound/message-factory.js';
import { createDkimSigner } from './smtp/outbound/dkim-signer.js';
import { createMxResolver } from './smtp/outbound/mx-resolver.js';
import { createSmtpClientPool } from './smtp/outbound/smtp-client-pool.js';
import { createHttpApp, listenHttp, type RunningHttpServer } from './api/http-server.js';
import { apiKeysRoutes } from './api/routes/api-keys-routes.js';
import { emailsRoutes } from './api/routes/emails-routes.js';
import { templatesRoutes } from './api/routes/templates-routes.js';
import { domainsRoutes } from './api/routes/domains-routes.js';
import { startCronJobs, type CronJobs } from './scheduler/cron-jobs.js';
import type { RouteDef } from './api/route-types.js';
import { createContactBooksRepository } from './store/repositories/contact-books-repository.js';
import { createContactsRepository } from './store/repositories/contacts-repository.js';
import { createSegmentsRepository } from './store/repositories/segments-repository.js';
import { createContactBookService } from './core/contacts/contact-book-service.js';
import { createContactService } from './core/contacts/contact-service.js';
import { createSegmentService } from './core/segments/segment-service.js';
import { createSuppressionService } from './core/suppressions/suppression-service.js';
import { contactBooksRoutes } from './api/routes/contact-books-routes.js';
import { campaignsRoutes } from './api/routes/campaigns-routes.js';
import { unsubscribeRoutes } from './api/unsubscribe-routes.js';
import { createCampaignService } from './core/campaigns/campaign-service.js';
import { verifyUnsubscribeToken } from './core/campaigns/unsubscribe-token.js';
import { createCampaignsRepository } from './store/repositories/campaigns-repository.js';
import { startCampaignRunner, type CampaignRunner } from './scheduler/campaign-runner.js';
import { contactConfirmationPages, contactsRoutes } from './api/routes/contacts-routes.js';
import { segmentsRoutes } from './api/routes/segments-routes.js';
import { suppressionsRoutes } from './api/routes/suppressions-routes.js';
import { toNodeStyleResolver } from './lib/dns/dns-client.js';
import { createReceivedEmailsRepository } from './store/repositories/received-emails-repository.js';
import { createInboundReportsRepository } from './store/repositories/inbound-reports-repository.js';
import { createInboundRouter } from './core/received/inbound-router.js';
import { createReportService } from './core/received/report-service.js';
import { createReceivedEmailService } from './core/received/received-email-service.js';
import { receivedEmailsRoutes } from './api/routes/received-emails-routes.js';
import { createListenerTlsSource } from './smtp/listener-tls.js';
import { startOrReport, type SmtpListener } from './smtp/smtp-listener.js';
import { startInboundServer } from './smtp/inbound/inbound-server.js';
import { startSubmissionServer } from './smtp/submission/submission-server.js';
import { createWebhooksRepository } from './store/repositories/webhooks-repository.js';
import { createAnalyticsRepository } from './store/repositories/analytics-repository.js';
import { createTrackingRepository } from './store/repositories/tracking-repository.js';
import { createWebhookService } from './core/webhooks/webhook-service.js';
import { createAnalyticsService } from './core/analytics/analytics-service.js';
import { createTrackingService } from './core/tracking/tracking-service.js';
import { WebhookDispatcher } from './webhooks/webhook-dispatcher.js';
import { webhooksRoutes } from './api/routes/webhooks-routes.js';
import { analyticsRoutes } from './api/routes/analytics-routes.js';
import { trackingRoutes } from './api/tracking-routes.js';
import { openApiRoute } from './api/openapi-document.js';
import { createConsoleUsersRepository } from './store/repositories/console-users-repository.js';
import { createContactImportsRepository } from './store/repositories/contact-imports-repository.js';
import { createUserService } from './core/users/user-service.js';
import { createSessionService } from './core/users/session-service.js';
import { createLoginThrottle } from './core/users/login-throttle.js';
import { createContactImportService } from './core/contacts/contact-import-service.js';
import { createOverviewService } from './core/overview/overview-service.js';
import { mountConsole } from './console/console-module.js';

// The one composition root: the CLI, `posthorn serve` and the tests all build the process here.

export interface AppOptions {
  config: Config;
  clock?: Clock;
  logger?: Logger;
  /** DNS resolver; tests inject one pointed at their own zone. */
  resolver?: DnsResolver;
}

export interface Listeners {
  http?: { host: string; port: number };
  /** Inbound SMTP (bounces, complaints, receiving domains) and authenticated submission. */
  inbound?: { host: string; port: number };
  submission?: { host: string; port: number };
}

export type App = Awaited<ReturnType<typeof createApp>>;

/** The store file of a configuration. */
const storeFile = (config: Config) => join(resolve(config.dataDir), 'posthorn.db');

/** `posthorn migrate`: applies pending migrations without starting anything else. */
export async function migrateStore(config: Config): Promise<string[]> {
  const store = openStore(storeFile(config));
  try {
    return (await migrateToLatest(store.db)).applied;
  } finally {
    await store.close();
  }
}

export async function createApp(opts: AppOptions) {
  const config = opts.config;
  const clock = opts.clock ?? systemClock;
  const logger = opts.logger ?? createLogger(config.log.level);
  const resolver = opts.resolver ?? createDnsClient({ servers: config.dns.servers, timeoutMs: config.dns.timeoutMs });
  const dataDir = resolve(config.dataDir);
  const store: Store = openStore(storeFile(config), {
    backgroundCheckpoints: true,
    onCheckpointError: (message) => logger.warn({ err: message }, 'WAL checkpoint failed; retried at the next interval'),
  });
  await migrateToLatest(store.db);

  const settings = createSettingsRepository(store.db);
  // Signs tracking, unsubscribe and confirmation links; kept in the store so links survive restarts.
  const secret = config.secret || (await settings.getOrInsert('link_secret', randomBytes(32).toString('hex')));

  const events = new EventBus(logger);
  const teamsRepo = createTeamsRepository(store.db);
  const templates = createTemplateService({ templates: createTemplatesRepository(store.db), clock });
  const teams = createTeamService({ teams: teamsRepo, clock, onTeamCreated: (teamId) => templates.seedDefaults(teamId) });
  const domainsRepo = createDomainsRepository(store.db);
  const domains = createDomainService({
    domains: domainsRepo,
    resolver,
    clock,
    events,
    logger,
    hostname: config.hostname,
    dkimSelector: config.domains.dkimSelector,
    bounceLabel: config.domains.bounceLabel,
  });
  const apiKeys = createApiKeyService({ apiKeys: createApiKeysRepository(store.db), clock, domainBelongsToTeam: domains.belongsToTeam });
  const rateLimiter = createRateLimiter(clock);

  const emailsRepo = createEmailsRepository(store.db);
  const deliveriesRepo = createDeliveriesRepository(store.db);
  const suppressionsRepo = createSuppressionsRepository(store.db);
  let engine: DeliveryEngine | undefined;
  const emails = createEmailService({
    emails: emailsRepo,
    idempotency: createIdempotencyRepository(store.db),
    suppressions: suppressionsRepo,
    domains,
    events,
    clock,
    renderTemplate: (teamId, templateId, variables) => templates.renderForSend(teamId, templateId, variables),
    onQueued: () => engine?.wake(),
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
    // One still in flight when it runs out (a backlog behind a slow host) is not attempted
    // twice: the engine skips what it is already attempting.
    leaseMs: config.outbound.leaseMs,
    owner: `${osHostname()}:${process.pid}:${randomBytes(4).toString('hex')}`,
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
  });
  // Campaign counters follow the status events of campaign emails.
  events.on('*', (e) => (e.type.startsWith('email.') ? campaigns.onEmailEvent(e) : undefined));
  let campaignRunner: CampaignRunner | undefined;
  const suppressions = createSuppressionService({ suppressions: suppressionsRepo, clock });

  // Events out: the webhook outbox and its dispatcher, open/click tracking, analytics rollups.
  const webhooks = createWebhookService({
    webhooks: createWebhooksRepository(store.db, store.sqlite),
    resolver,
    clock,
    logger,
    allowPrivate: config.webhooks.allowPrivate,
    domainBelongsToTeam: domains.belongsToTeam,
    leaseMs: 5 * 60_000, // far beyond one attempt (timeout at most 60 s) plus recording it
    owner: `${osHostname()}:${process.pid}:${randomBytes(4).toString('hex')}`,
    onEnqueued: (webhookIds, dueMs) => {
      for (const id of webhookIds) webhookDispatcher.noteDue(id, dueMs);
      webhookDispatcher.wake();
    },
  });
  const webhookDispatcher = new WebhookDispatcher({ webhooks, clock, logger, timeoutMs: config.webhooks.timeoutMs });
  const analytics = createAnalyticsService({ analytics: createAnalyticsRepository(store.db), clock, logger, domainBelongsToTeam: domains.belongsToTeam });
  const tracking = createTrackingService({
    emails: emailsRepo,
    tracking: createTrackingRepository(store.db),
    events,
    clock,
    logger,
    secret,
    publicUrl: config.publicUrl,
  });
  // The outbox rows of events emitted inside a write commit with that write (transactional
  // outbox); the after-commit handler wakes the dispatcher, or writes them for other events.
  events.onInTransaction((event) => webhooks.handleInTransaction(event));
  // Analytics rollups likewise commit with the status change they count.
  events.onInTransaction((event) => analytics.handleInTransaction(event));
  events.on('*', (event) => webhooks.handleBusEvent(event));
  events.on('*', (event) => analytics.handleBusEvent(event));

  // Mail in (architecture.md, Outbound, inbound, tracking): inbound SMTP for bounces, complaints and receiving domains; submission.
  const inboundReportsRepo = createInboundReportsRepository(store.db);
  const inboundRouter = createInboundRouter({
    domains: domainsRepo,
    emails: emailsRepo,
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
  const users = createUserService({ users: consoleUsersRepo, clock, teamExists: async (id) => !!(await teams.get(id)) });
  const sessions = createSessionService({
    users: consoleUsersRepo,
    clock,
    policy: { idleMs: config.console.sessionIdleMinutes * 60_000, absoluteMs: config.console.sessionMaxHours * 3_600_000 },
  });
  const loginThrottle = createLoginThrottle(clock);
  const contactImports = createContactImportService({ imports: createContactImportsRepository(store.db), contacts, clock, logger });
  const overview = createOverviewService({ domains, webhooks, analytics });

  const services = { campaigns, templates, teams, apiKeys, events, domains, emails, deliveries, contactBooks, contacts, contactImports, segments, suppressions, webhooks, analytics, tracking, users, sessions, overview };

  const routes: RouteDef[] = [...apiKeysRoutes(apiKeys), ...domainsRoutes(domains), ...emailsRoutes(emails), ...templatesRoutes(templates)];
  routes.push(...campaignsRoutes(campaigns));
  routes.push(...contactBooksRoutes(contactBooks), ...contactsRoutes(contacts), ...segmentsRoutes(segments), ...suppressionsRoutes(suppressions));
  routes.push(...receivedEmailsRoutes(inbound.received));
  routes.push(...webhooksRoutes(webhooks), ...analyticsRoutes(analytics));
  // The machine-readable description of all of the above (and of itself), public.
  routes.push(openApiRoute(() => routes));
  let cron: CronJobs | undefined;
  const relay = config.outbound.relay.host
    ? {
        host: config.outbound.relay.host,
        port: config.outbound.relay.port,
        secure: config.outbound.relay.secure,
        user: config.outbound.relay.user || undefined,
        password: config.outbound.relay.password || undefined,
      }
    : undefined;
  const signer = createDkimSigner({ workers: config.outbound.signingWorkers });
  const pool = createSmtpClientPool({
    heloName: config.hostname,
    logger,
    resolver, // a relay given by name is resolved through our resolver, never the system's
    clock,
    ca: config.outbound.caFile ? readFileSync(config.outbound.caFile) : undefined,
    relay,
    maxConnectionsPerHost: config.outbound.maxConnectionsPerHost,
    maxConnections: config.outbound.maxConnections,
    connectTimeoutMs: config.outbound.connectTimeoutMs,
    greetingTimeoutMs: config.outbound.greetingTimeoutMs,
    socketTimeoutMs: config.outbound.socketTimeoutMs,
    transactionTimeoutMs: config.outbound.transactionTimeoutMs,
  });
  engine = new DeliveryEngine({
    deliveries,
    messages: createMessageFactory({ signer, transformHtml: tracking.transformHtml }),
    mx: createMxResolver(resolver, clock),
    pool,
    clock,
    logger,
    port: config.outbound.port,
    relay,
    // Enough to keep every connection a destination may have busy, with as many ready behind them.
    maxInFlightPerDomain: 2 * config.outbound.maxConnectionsPerHost,
  });
  const listeners: Listeners = {};
  let http: RunningHttpServer | undefined;
  let stopping = false;

  function healthRoute(router: Router) {
    router.get('/health', async (ctx) => {
      let storeOk = true;
      try {
        store.sqlite.prepare('select 1').get();
      } catch {
        storeOk = false;
      }
      ctx.status = storeOk && !stopping ? 200 : 503;
      ctx.body = { status: storeOk && !stopping ? 'ok' : 'degraded', store: storeOk ? 'ok' : 'error', listeners };
    });
  }

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
    /** The API route table (the OpenAPI document and route sweeps read it). */
    routes,
    /** Runs due campaign batches now (tests move their clock, then call this). */
    runCampaigns: () => campaignRunner?.tickNow() ?? campaigns.tick(),
    inbound,
    webhookDispatcher,

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
        apiKeys,
        rateLimiter,
        defaultRateLimit: config.rateLimit.perSecond,
        bodyLimitBytes: config.http.bodyLimitBytes,
        routes,
        translateError: (err) => (isStorageFailure(err) ? storageUnavailable() : err),
        extra: (router) => {
          healthRoute(router);
          contactConfirmationPages(router, contacts);
          unsubscribeRoutes(campaigns)(router);
          trackingRoutes(tracking, logger)(router);
          if (config.console.enabled) {
            mountConsole(router, {
              services: { emails, deliveries, domains, apiKeys, contactBooks, contacts, contactImports, segments, templates, campaigns, suppressions, webhooks, analytics, received: inbound.received, teams, overview },
              users,
              sessions,
              loginThrottle,
              // The operator queue page's source; the operator queue service can take its place.
              queue: deliveries,
              logger,
              publicUrl: config.publicUrl,
            });
          }
        },
      });
      const releasedKeys = await emails.releaseInFlightKeys();
      if (releasedKeys) logger.info({ released: releasedKeys }, 'released idempotency keys left in flight by a previous run');
      http = await listenHttp(koa, config.http.host, config.http.port);
      listeners.http = { host: config.http.host, port: http.port };
      logger.info({ listener: 'http', host: config.http.host, port: http.port }, `HTTP API listening on ${config.http.host}:${http.port}`);
      const [inboundTls, submissionTls] = await Promise.all([listenerTls(config.inbound), listenerTls(config.submission)]);
      const smtpCommon = { hostname: config.hostname, logger };
      inboundListener = await startOrReport('inbound', config.inbound, logger, () =>
        startInboundServer({
          ...smtpCommon,
          ...config.inbound,
          tls: inboundTls,
          router: inbound.router,
          reports: inbound.reports,
          received: inbound.received,
          resolver: toNodeStyleResolver(resolver) as never, // mailauth's resolver signature, typed loosely there
          clock,
          unsubscribe: (token) => campaigns.unsubscribe(token),
        }),
      );
      if (inboundListener) listeners.inbound = { host: config.inbound.host, port: inboundListener.port };
      submissionListener = await startOrReport('submission', config.submission, logger, () =>
        startSubmissionServer({ ...smtpCommon, ...config.submission, tls: submissionTls, apiKeys, emails, rateLimiter, defaultRateLimit: config.rateLimit.perSecond }),
      );
      if (submissionListener) listeners.submission = { host: config.submission.host, port: submissionListener.port };
      logger.info({ inbound: listeners.inbound, submission: listeners.submission }, 'SMTP listeners started');
      const recounted = await campaigns.recoverCounts();
      if (recounted) logger.info({ recounted }, 'campaign counters a previous run left behind were counted');
      const released = await deliveries.releaseStaleLeases();
      if (released) logger.info({ released }, 'released delivery leases left by a previous run');
      engine!.start();
      const releasedCalls = await webhooks.releaseStaleLeases();
      if (releasedCalls) logger.info({ released: releasedCalls }, 'released webhook call leases left by a previous run');
      webhookDispatcher.start();
      const resumedImports = await contactImports.resume();
      if (resumedImports) logger.info({ resumed: resumedImports }, 'contact imports a previous run left unfinished carry on');
      cron = startCronJobs({ logger, domains, emails, config });
      campaignRunner = startCampaignRunner({ campaigns, logger });
      return listeners;
    },

    /** Graceful: stop accepting, let in-flight work finish, close the database. */
    async stop(): Promise<void> {
      if (stopping) return;
      stopping = true;
      cron?.stop();
      await campaignRunner?.stop();
      await http?.close();
      await contactImports.stop(); // the chunk in progress is recorded; the rest carries on at the next start
      // Messages being stored finish and get their reply before the store closes.
      await Promise.all([inboundListener?.close(), submissionListener?.close()]);
      await engine!.stop();
      await webhookDispatcher.stop(); // unsent calls stay in the outbox for the next start
      await analytics.flush();
      await pool.close();
      await signer.close();
      await store.close();
      logger.info('stopped');
    },
  };
}
