import type { Config } from '../config/defaults.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import type { DnsResolver } from '../lib/dns/dns-client.js';
import type { AppStore } from '../store/open-store.js';
import { createMetrics } from '../core/metrics/metrics.js';
import type { createAdminHealth } from '../core/operators/admin-health.js';
import type { RouteDef } from '../api/route-types.js';
import { OPERATOR_API, openApiRoute } from '../api/openapi-document.js';
import { operatorRoutes } from '../api/admin/operator-routes.js';
import { createListenerTlsSource } from '../smtp/listener-tls.js';
import type { CoreServices } from './core-services-wiring.js';
import { publicApiRoutes } from './api-routes.js';
import { wireOutbound } from './outbound-wiring.js';

// What only a started app uses, wired by App.start() and loaded with it (src/app.ts): the
// metrics, the outbound side (outbound-wiring.ts: the delivery engine, the SMTP client, DKIM
// signing), the SMTP listeners' certificate and the API's route tables. An admin command builds
// the app without starting it, so it never loads these modules (docs/benchmarks.md, "CLI start").

export function wireServer(o: {
  core: CoreServices;
  config: Config;
  clock: Clock;
  logger: Logger;
  resolver: DnsResolver;
  store: AppStore;
  /** Signs the return paths' transaction tags. */
  secret: string;
  dataDir: string;
  /** The certificates of outbound.caFile, read by createApp. */
  extraCa: Buffer | undefined;
  /** /admin/v1/health. */
  adminHealth: ReturnType<typeof createAdminHealth>;
}) {
  const { core, config, clock, logger, resolver, store } = o;
  const { queueRepo, bounceNoticesRepo, port25, shaping, intake } = core;
  // Sources read at scrape time; the pool and the engine are built just below.
  const metrics = createMetrics({
    port25Blocked: () => port25.blocked(),
    queue: () => queueRepo.countsForMetrics(clock.nowMs()),
    connections: () => outbound.pool?.openByHost() ?? new Map(),
    storeFiles: () => store.fileSizes(),
    shaping: () => shaping.state(),
    ...(bounceNoticesRepo && !config.sandbox ? { bounceNotices: () => bounceNoticesRepo.countsForMetrics() } : {}),
    messageMemory: () => ({ bytes: outbound.engine.budget.inUse, waiting: outbound.engine.budget.queued }),
    intakeMemory: () => ({ bytes: intake.budget.inUse, waiting: intake.budget.queued, receiving: intake.spool.memoryBytes, spooled: intake.spool.filesOpen }),
  });
  // The SMTP client pool (none in sandbox mode), transport security, the delivery engine and the
  // TLS reports it sends (outbound-wiring.ts).
  const outbound = wireOutbound({
    config,
    logger,
    resolver,
    clock,
    deliveries: core.deliveries,
    tracking: core.tracking,
    sandbox: core.sandbox,
    shaper: core.shaper,
    metrics,
    tlsCounter: core.tlsCounter,
    tlsReports: core.tlsReports,
    stsPolicies: core.stsPolicies,
    serverDkimKey: core.serverDkimKey,
    permits: core.permits,
    extraCa: o.extraCa,
    secret: o.secret,
    port25,
  });

  const routes = publicApiRoutes({
    apiKeys: core.apiKeys,
    domains: core.domains,
    emails: core.emails,
    templates: core.templates,
    campaigns: core.campaigns,
    contactBooks: core.contactBooks,
    contacts: core.contacts,
    segments: core.segments,
    suppressions: core.suppressions,
    received: core.inbound.received,
    webhooks: core.webhooks,
    analytics: core.analytics,
    sandbox: core.sandbox,
    receivedTlsReports: core.receivedTlsReports,
  });
  const adminRoutes: RouteDef[] = operatorRoutes({ queue: core.queue, teams: core.teams, domains: core.domains, shaping, audit: core.audit, health: o.adminHealth, outboundPort25: () => port25.state() });
  adminRoutes.push(...openApiRoute(() => adminRoutes, OPERATOR_API));

  return {
    metrics,
    outbound,
    engine: outbound.engine,
    pool: outbound.pool,
    bounceNoticeMailer: outbound.bounceNoticeMailer,
    /** The SMTP listeners' certificate (their own files, or one made on first use). */
    listenerTls: createListenerTlsSource({ dataDir: o.dataDir, hostname: config.hostname, logger }),
    /** The API route table (the OpenAPI document and route sweeps read it). */
    routes,
    /** The operator API's route table (/admin/v1). */
    adminRoutes,
  };
}

export type ServerWiring = ReturnType<typeof wireServer>;
