import type { Config } from '../config/defaults.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import type { DnsResolver } from '../lib/dns/dns-client.js';
import type { AppStore } from '../store/open-store.js';
import type { SettingsRepository } from '../store/repositories/settings-repository.js';
import { createMtaStsPoliciesRepository } from '../store/repositories/mta-sts-policies-repository.js';
import { createTlsReportsRepository } from '../store/repositories/tls-reports-repository.js';
import { createReceivedTlsReportsRepository } from '../store/repositories/received-tls-reports-repository.js';
import { createStsPolicyCache } from '../core/tls-reports/sts-policy-cache.js';
import { createTlsSessionCounter } from '../core/tls-reports/tls-session-counter.js';
import { createTlsReportService } from '../core/tls-reports/tls-report-service.js';
import { createReceivedTlsReportService } from '../core/tls-reports/received-tls-report-service.js';
import { createServerDkimKeySource } from '../core/tls-reports/server-dkim-key.js';

// Transport security's core side (docs/outbound.md), wired with the core services: what the
// delivery engine (composition/outbound-wiring.ts) and the API use of MTA-STS and TLS reporting.

/**
 * MTA-STS policies, TLS session counts and the reports made from them (RFC 8460), the reports
 * other servers send us, and the server's own DKIM key that signs the reports it mails.
 */
export function wireTransportSecurity(o: { config: Config; logger: Logger; resolver: DnsResolver; clock: Clock; store: AppStore; settings: SettingsRepository }) {
  const { config, logger, resolver, clock, store } = o;
  const repo = createTlsReportsRepository(store.db);
  const tlsCounter = createTlsSessionCounter({ repo, clock, logger });
  const reportConfig = config.outbound.tlsReports;
  const tlsReports = createTlsReportService({
    repo,
    counter: tlsCounter,
    resolver,
    clock,
    logger,
    organizationName: reportConfig.organizationName || config.hostname,
    contactInfo: reportConfig.contactInfo || `postmaster@${config.hostname}`,
    hostname: config.hostname,
    // Report deliveries are leased like mail deliveries (kept while attempted).
    leaseMs: config.outbound.leaseMs,
  });
  return {
    tlsCounter,
    tlsReports,
    receivedTlsReports: createReceivedTlsReportService({ repo: createReceivedTlsReportsRepository(store.db), clock }),
    stsPolicies: createStsPolicyCache(createMtaStsPoliciesRepository(store.db)),
    // Mail Posthorn sends as itself (TLS reports) is signed with the server's own key, made on first use.
    serverDkimKey: createServerDkimKeySource({ settings: o.settings, hostname: config.hostname, selector: config.domains.dkimSelector }),
  };
}

export type TransportSecurity = ReturnType<typeof wireTransportSecurity>;
