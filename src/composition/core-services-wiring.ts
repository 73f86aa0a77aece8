import type { Config } from '../config/defaults.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import type { DnsResolver } from '../lib/dns/dns-client.js';
import type { AppStore } from '../store/open-store.js';
import type { SettingsRepository } from '../store/repositories/settings-repository.js';
import { createTeamsRepository } from '../store/repositories/teams-repository.js';
import { createApiKeysRepository } from '../store/repositories/api-keys-repository.js';
import { createDomainsRepository } from '../store/repositories/domains-repository.js';
import { createEmailsRepository } from '../store/repositories/emails-repository.js';
import { createDeliveriesRepository } from '../store/repositories/deliveries-repository.js';
import { createIdempotencyRepository } from '../store/repositories/idempotency-repository.js';
import { createSuppressionsRepository } from '../store/repositories/suppressions-repository.js';
import { createTemplatesRepository } from '../store/repositories/templates-repository.js';
import { EventBus } from '../core/events.js';
import { createBounceNoticeJob, type BounceNotice, type BounceNoticeOutcome } from '../core/emails/bounce-notice-service.js';
import { createBounceNoticesRepository } from '../store/repositories/bounce-notices-repository.js';
import { createApiKeyService } from '../core/api-keys/api-key-service.js';
import { createTeamService } from '../core/teams/team-service.js';
import { createRateLimiter } from '../core/rate-limit/rate-limiter.js';
import { createSharedRateLimiter } from '../core/rate-limit/shared-rate-limiter.js';
import { createRateLimitsRepository } from '../store/repositories/rate-limits-repository.js';
import { createLoginFailuresRepository } from '../store/repositories/login-failures-repository.js';
import { createClusterRepository } from '../store/repositories/cluster-repository.js';
import { createJobRunsRepository } from '../store/repositories/job-runs-repository.js';
import { createCronRuns } from '../core/cluster/cron-runs.js';
import { createDomainService, type DkimKeyPair } from '../core/domains/domain-service.js';
import { createEmailService } from '../core/emails/email-service.js';
import { createTemplateService } from '../core/templates/template-service.js';
import { createDeliveryService } from '../core/deliveries/delivery-service.js';
import type { DeliveryEngine } from '../smtp/outbound/delivery-engine.js';
import type { SmtpClientPool } from '../smtp/outbound/smtp-client-pool.js';
import { createContactBooksRepository } from '../store/repositories/contact-books-repository.js';
import { createContactsRepository } from '../store/repositories/contacts-repository.js';
import { createSegmentsRepository } from '../store/repositories/segments-repository.js';
import { createContactBookService } from '../core/contacts/contact-book-service.js';
import { createContactService } from '../core/contacts/contact-service.js';
import { createSegmentService } from '../core/segments/segment-service.js';
import { createSuppressionService } from '../core/suppressions/suppression-service.js';
import { createCampaignService } from '../core/campaigns/campaign-service.js';
import { verifyUnsubscribeToken } from '../core/campaigns/unsubscribe-token.js';
import { createCampaignsRepository } from '../store/repositories/campaigns-repository.js';
import { createReceivedEmailsRepository } from '../store/repositories/received-emails-repository.js';
import { createInboundReportsRepository } from '../store/repositories/inbound-reports-repository.js';
import { createInboundRouter } from '../core/received/inbound-router.js';
import { createReportService } from '../core/received/report-service.js';
import { createReceivedEmailService } from '../core/received/received-email-service.js';
import { createWebhooksRepository } from '../store/repositories/webhooks-repository.js';
import { createAnalyticsRepository } from '../store/repositories/analytics-repository.js';
import { createTrackingRepository } from '../store/repositories/tracking-repository.js';
import { createWebhookEndpointsService } from '../core/webhooks/webhook-endpoints-service.js';
import { createWebhookOutbox } from '../core/webhooks/webhook-outbox.js';
import { createAnalyticsService } from '../core/analytics/analytics-service.js';
import { createTrackingService } from '../core/tracking/tracking-service.js';
import { WebhookDispatcher } from '../http-out/webhook-dispatcher.js';
import { createOperatorKeysRepository } from '../store/repositories/operator-keys-repository.js';
import { createOperatorAuditRepository } from '../store/repositories/operator-audit-repository.js';
import { createQueueRepository } from '../store/repositories/queue-repository.js';
import { createOperatorKeyService } from '../core/operators/operator-key-service.js';
import { createAuditService } from '../core/operators/audit-service.js';
import { createQueueService } from '../core/queue/queue-service.js';
import type { Metrics } from '../core/metrics/metrics.js';
import { createTrafficShaper } from '../core/shaping/traffic-shaper.js';
import { createShapingOperator } from '../core/shaping/shaping-view.js';
import { createShapingRepository } from '../store/repositories/shaping-repository.js';
import { createSandboxMessagesRepository } from '../store/repositories/sandbox-messages-repository.js';
import { createContentRetentionService } from '../core/retention/content-retention-service.js';
import { createRetentionRepository } from '../store/repositories/retention-repository.js';
import { createSandboxService } from '../core/sandbox/sandbox-service.js';
import { createConsoleUsersRepository } from '../store/repositories/console-users-repository.js';
import { createContactImportsRepository } from '../store/repositories/contact-imports-repository.js';
import { createUserService } from '../core/users/user-service.js';
import { createSessionService } from '../core/users/session-service.js';
import { createLoginThrottle } from '../core/users/login-throttle.js';
import { createContactImportService } from '../core/contacts/contact-import-service.js';
import { createOverviewService } from '../core/overview/overview-service.js';
import { createPort25Watch } from '../core/operators/port25-watch.js';
import { wireTransportSecurity } from './transport-security-wiring.js';
import { nodeIdOf } from './store-opening.js';
import { createConnectionPermits } from '../core/cluster/connection-permits.js';
import { BodyIntake } from '../lib/body-intake.js';

// The services half of the composition root (src/app.ts): the repositories and the core
// services, built once per process; nothing here listens or runs yet (composition/start-sequence.ts
// starts them). The outbound side they feed is wired by start() (composition/server-wiring.ts).

/**
 * What the services call on the server side, once start() has wired it (server-wiring.ts): the
 * delivery engine, the SMTP client pool, the metrics, the mail Posthorn sends as itself. An app
 * that is not started (an admin command) has none: a wake-up or a count there has no one to reach.
 */
export interface ServerHooks {
  engine: Pick<DeliveryEngine, 'wake' | 'start'>;
  pool: Pick<SmtpClientPool, 'openByHost'> | undefined;
  metrics: Pick<Metrics, 'accepted' | 'outcome' | 'webhookCall' | 'webhookAutoDisabled'>;
  /** Sends a submission's bounce notice; none in sandbox mode. */
  bounceNoticeMailer: ((notice: BounceNotice) => Promise<BounceNoticeOutcome>) | undefined;
}

export function wireCoreServices(o: {
  config: Config;
  clock: Clock;
  logger: Logger;
  resolver: DnsResolver;
  store: AppStore;
  settings: SettingsRepository;
  /** Signs tracking, unsubscribe and confirmation links. */
  secret: string;
  /** New domains' DKIM keys (AppOptions.dkimKeyPair). */
  dkimKeyPair?: () => Promise<DkimKeyPair>;
  /** New console passwords' scrypt cost (AppOptions.passwordHashCost). */
  passwordHashCost?: number;
}) {
  const { config, clock, logger, resolver, store, settings, secret } = o;
  let server: ServerHooks | undefined;
  const serverHooks = (what: string): ServerHooks => {
    if (!server) throw new Error(`${what} needs the server side, which start() wires`);
    return server;
  };

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
    dkimKeyPair: o.dkimKeyPair,
  });
  const apiKeys = createApiKeyService({ apiKeys: createApiKeysRepository(store.db), clock, domainBelongsToTeam: domains.belongsToTeam, audit });
  // One node per SQLite file; with PostgreSQL any number of nodes share the store
  // (architecture.md, Growing past one server): the node's id owns its leases, the rate limit
  // is counted in the store, cron runs and connection counts are the cluster's.
  const nodeId = nodeIdOf(config);
  const clusterRepo = store.kind === 'postgres' ? createClusterRepository(store.db) : undefined;
  const cronRuns = createCronRuns({ repo: createJobRunsRepository(store.db), clock, node: nodeId, cluster: store.kind === 'postgres' });
  const rateLimiter =
    store.kind === 'postgres'
      ? createSharedRateLimiter({ windows: createRateLimitsRepository(store.db), clock, onPruneError: (err) => logger.warn({ err }, 'pruning rate-limit windows failed') })
      : createRateLimiter(clock);

  const emailsRepo = createEmailsRepository(store.db);
  const deliveriesRepo = createDeliveriesRepository(store.db);
  const queueRepo = createQueueRepository(store.db);
  const bounceNoticesRepo = config.submission.bounceNotices ? createBounceNoticesRepository(store.db) : undefined;
  // Whether this node's outbound port looks blocked: fed by the SMTP client pool with each direct
  // connection's outcome (none with a relay or in sandbox mode: it stays ok).
  const port25 = createPort25Watch({ clock, logger, port: config.outbound.port });
  const suppressionsRepo = createSuppressionsRepository(store.db);
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
    onQueued: () => server?.engine.wake(),
    onAccepted: (count) => server?.metrics.accepted(count),
    logger,
    sandbox: config.sandbox,
  });
  const deliveries = createDeliveryService({
    deliveries: deliveriesRepo,
    emails: emailsRepo,
    domains: domainsRepo,
    suppressions: suppressionsRepo,
    events,
    clock,
    logger,
    maxAgeMs: Math.round(config.outbound.maxAgeHours * 3_600_000), // whole milliseconds, as the due times it caps
    // Renewed while the attempt is under way (a backlog behind a slow host can outlast it): it
    // runs out only when its holder died or could not record the result.
    leaseMs: config.outbound.leaseMs,
    owner: nodeId,
    observe: (samples) => samples.forEach((s) => server?.metrics.outcome(s)),
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
    wake: () => server?.engine.wake(),
    // Another node's engine may hold the lifted hold for a few seconds more: only a lone node's own engine forgets it at once.
    engineHere: () => engineRunning && store.kind !== 'postgres',
  });
  const queue = createQueueService({
    shaping,
    teams: teamsRepo,
    queue: queueRepo,
    deliveriesRepo,
    emails: emailsRepo,
    deliveries,
    audit,
    clock,
    owner: `${nodeId}:operator`,
    leaseMs: config.outbound.leaseMs,
    openConnections: () => server?.pool?.openByHost() ?? new Map(),
    wake: () => server?.engine.wake(),
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
    // Due times are whole milliseconds in the store (a bigint on PostgreSQL); the setting takes fractions.
    batchWindowMs: Math.round(config.campaigns.batchWindowSeconds * 1000),
    owner: nodeId,
    sandbox: config.sandbox,
  });
  // Campaign counters follow the status events of campaign emails.
  events.on('*', (e) => (e.type.startsWith('email.') ? campaigns.onEmailEvent(e) : undefined));
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
    disableAfterFailures: config.webhooks.disableAfterFailures,
    onAutoDisabled: () => server?.metrics.webhookAutoDisabled(),
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
  const webhookDispatcher = new WebhookDispatcher({ outbox: webhookOutbox, clock, logger, timeoutMs: config.webhooks.timeoutMs, maxInFlight: config.webhooks.maxInFlight, maxInFlightPerHost: config.webhooks.maxInFlightPerHost, onAttempt: (outcome) => server?.metrics.webhookCall(outcome) });
  const analytics = createAnalyticsService({ analytics: createAnalyticsRepository(store.db), clock, logger, domainBelongsToTeam: domains.belongsToTeam });
  const tracking = createTrackingService({ emails: emailsRepo, tracking: createTrackingRepository(store.db), events, clock, logger, secret, publicUrl: config.publicUrl, machineWindowSeconds: config.tracking.machineWindowSeconds, machineNetworks: config.tracking.machineNetworks });
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
    clock,
    lateReportDays: config.inbound.lateReportDays,
    complaintAddress: config.inbound.complaintAddress || `complaints@${config.hostname}`,
    unsubscribeHost: config.hostname,
    isUnsubscribeToken: (token) => verifyUnsubscribeToken(secret, token) !== null,
  });
  const receivedRepo = createReceivedEmailsRepository(store.db);
  const inbound = {
    router: inboundRouter,
    reports: createReportService({ router: inboundRouter, emails: emailsRepo, deliveries: deliveriesRepo, reports: inboundReportsRepo, events, clock, logger }),
    received: createReceivedEmailService({ received: receivedRepo, events, clock }),
    reportsRepo: inboundReportsRepo,
  };

  // The web console's people and its background imports (docs/console.md).
  const consoleUsersRepo = createConsoleUsersRepository(store.db);
  // Failed sign-ins are rows, so the limits hold for the cluster and across restarts.
  const loginThrottle = createLoginThrottle({ failures: createLoginFailuresRepository(store.db), clock, onPruneError: (err) => logger.warn({ err }, 'pruning failed sign-ins failed') });
  const users = createUserService({ users: consoleUsersRepo, clock, teamExists: async (id) => !!(await teams.get(id)), onPasswordReset: (email) => loginThrottle.forgetAccount(email), audit, passwordHashCost: o.passwordHashCost });
  const sessions = createSessionService({
    users: consoleUsersRepo,
    clock,
    policy: { idleMs: config.console.sessionIdleMinutes * 60_000, absoluteMs: config.console.sessionMaxHours * 3_600_000 },
  });
  const contactImports = createContactImportService({ imports: createContactImportsRepository(store.db), contacts, clock, logger, node: nodeId, cluster: store.kind === 'postgres' });
  const overview = createOverviewService({ domains, webhooks, analytics, port25: () => port25.state() });

  // Sandbox mode (architecture.md, Decisions: sandbox mode): the capture mailbox the engine delivers to instead of any MX.
  const sandboxRepo = createSandboxMessagesRepository(store.db);
  const sandbox = createSandboxService({ messages: sandboxRepo, clock, enabled: config.sandbox });

  // Content retention (retention.contentDays): the daily job that empties old mail of its bodies.
  const contentRetention = createContentRetentionService({ emails: emailsRepo, kept: createRetentionRepository(store.db), received: receivedRepo, reports: inboundReportsRepo, sandbox: sandboxRepo, settings, clock });

  // Transport security (docs/outbound.md): MTA-STS and DANE per destination, TLS reporting both ways.
  const { tlsCounter, tlsReports, receivedTlsReports, stsPolicies, serverDkimKey } = wireTransportSecurity({ config, logger, resolver, clock, store, settings });

  const services = { campaigns, templates, teams, apiKeys, events, domains, emails, deliveries, contactBooks, contacts, segments, suppressions, webhooks, webhookOutbox, analytics, tracking, sandbox, tlsReports, operatorKeys, audit, queue, contactImports, users, sessions, overview, shaping };

  // On PostgreSQL the outbound connection limits are the cluster's, counted in the store by this node.
  const permits = clusterRepo && createConnectionPermits({ repo: clusterRepo, node: nodeId, logger });
  // Bounce notices to the senders of submitted mail (submission.bounceNotices): queued with the
  // outcome (an admin command's operator bounce too), sent from the store once started. Not
  // subscribed at all when off (nothing written) or in sandbox mode (nothing is sent by SMTP).
  const bounceNotices =
    bounceNoticesRepo && !config.sandbox
      ? createBounceNoticeJob({
          events,
          repo: bounceNoticesRepo,
          emails: emailsRepo,
          domains: domainsRepo,
          clock,
          send: (notice) => serverHooks('sending a bounce notice').bounceNoticeMailer!(notice),
          logger,
          owner: nodeId,
          cluster: store.kind === 'postgres',
          maxAgeMs: Math.round(config.outbound.maxAgeHours * 3_600_000),
        })
      : undefined;

  return {
    services,
    events, templates, shaper, audit, teams, domains, apiKeys, nodeId, clusterRepo, cronRuns, rateLimiter, queueRepo, bounceNoticesRepo, intake,
    emails, deliveries, operatorKeys, shaping, queue, contacts, contactBooks, segments, campaigns, suppressions, webhookOutbox, webhooks,
    webhookDispatcher, analytics, tracking, inbound, loginThrottle, users, sessions, contactImports, overview, sandbox, contentRetention,
    tlsCounter, tlsReports, receivedTlsReports, stsPolicies, serverDkimKey, permits, bounceNotices, port25,
    /** start(): the server side is wired (server-wiring.ts); from here the services reach it. */
    attachServer(side: ServerHooks): void {
      server = side;
    },
    /** Starts the delivery engine; from then a lone node's engine forgets a lifted hold at once (shaping). */
    startEngine(): void {
      serverHooks('starting the delivery engine').engine.start();
      engineRunning = true;
    },
  };
}

export type CoreServices = ReturnType<typeof wireCoreServices>;
