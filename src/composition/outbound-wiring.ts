import type { Config } from '../config/defaults.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import type { DnsResolver } from '../lib/dns/dns-client.js';
import type { createDeliveryService } from '../core/deliveries/delivery-service.js';
import type { createTrackingService } from '../core/tracking/tracking-service.js';
import type { createSandboxService } from '../core/sandbox/sandbox-service.js';
import type { createTrafficShaper } from '../core/shaping/traffic-shaper.js';
import type { createMetrics } from '../core/metrics/metrics.js';
import type { Port25Watch } from '../core/operators/port25-watch.js';
import type { createConnectionPermits } from '../core/cluster/connection-permits.js';
import type { TransportSecurity } from './transport-security-wiring.js';
import { returnPathToken } from '../core/received/return-path-token.js';
import { DeliveryEngine } from '../smtp/outbound/delivery-engine.js';
import { createMessageFactory } from '../smtp/outbound/message-factory.js';
import { createDkimSigner } from '../smtp/outbound/dkim-signer.js';
import { createMxResolver } from '../smtp/outbound/mx-resolver.js';
import { createSmtpClientPool } from '../smtp/outbound/smtp-client-pool.js';
import { createSandboxTransport, SANDBOX_HOST } from '../smtp/outbound/sandbox-transport.js';
import { createMtaStsResolver } from '../smtp/outbound/mta-sts-resolver.js';
import { createTlsaLookup } from '../smtp/outbound/dane-verifier.js';
import { createTransportPolicy } from '../smtp/outbound/transport-policy.js';
import { createTlsReportSender } from '../smtp/outbound/tls-report-sender.js';
import { createOwnMailSender } from '../smtp/outbound/own-mail-sender.js';
import { createBounceNoticeMailer } from '../smtp/outbound/bounce-notice-mail.js';
import { httpsCaList } from '../smtp/outbound/https-client.js';

// The outbound half of the composition root (src/app.ts), wired by start() (server-wiring.ts):
// the DKIM signer, the SMTP client pool (none in sandbox mode, so nothing can open a connection
// to an MX), MX resolution, transport security (MTA-STS, DANE), the delivery engine, and the mail
// Posthorn sends as itself (TLS reports, bounce notices).

export interface OutboundDeps {
  config: Config;
  logger: Logger;
  resolver: DnsResolver;
  clock: Clock;
  deliveries: ReturnType<typeof createDeliveryService>;
  tracking: ReturnType<typeof createTrackingService>;
  sandbox: ReturnType<typeof createSandboxService>;
  shaper: ReturnType<typeof createTrafficShaper>;
  metrics: ReturnType<typeof createMetrics>;
  tlsCounter: TransportSecurity['tlsCounter'];
  tlsReports: TransportSecurity['tlsReports'];
  stsPolicies: TransportSecurity['stsPolicies'];
  serverDkimKey: TransportSecurity['serverDkimKey'];
  /** On PostgreSQL: connection limits are the cluster's, counted in the store by this node. */
  permits: ReturnType<typeof createConnectionPermits> | undefined;
  /** The certificates of outbound.caFile (read by createApp, so a missing file fails every command). */
  extraCa: Buffer | undefined;
  /** Keys the return paths' transaction tags (core/received/return-path-token.ts). */
  secret: string;
  /** Told each direct connection's outcome (with a relay, the relay's failures are reported as they are). */
  port25: Port25Watch;
}

export function wireOutbound(deps: OutboundDeps) {
  const { config, logger, resolver, clock, deliveries, tracking, sandbox, shaper, metrics, tlsCounter, tlsReports, stsPolicies, serverDkimKey } = deps;
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
  const { extraCa, permits } = deps;
  const httpsCa = httpsCaList(extraCa);
  // In sandbox mode there is no SMTP client at all: nothing can open a connection to an MX.
  const pool = config.sandbox ? undefined : createSmtpClientPool({
    connectionPermits: permits,
    heloName: config.hostname,
    logger,
    resolver, // a relay given by name is resolved through our resolver, never the system's
    clock,
    ca: extraCa,
    relay,
    maxConnectionsPerHost: config.outbound.maxConnectionsPerHost,
    maxConnections: config.outbound.maxConnections,
    connectTimeoutMs: config.outbound.connectTimeoutMs,
    greetingTimeoutMs: config.outbound.greetingTimeoutMs,
    socketTimeoutMs: config.outbound.socketTimeoutMs,
    transactionTimeoutMs: config.outbound.transactionTimeoutMs,
    traces: config.outbound.traces.enabled,
    ...(relay ? {} : { onConnectOutcome: (o) => deps.port25.record(o) }),
  });
  const mx = createMxResolver(resolver, clock, { allowLoopback: config.outbound.allowLoopbackMx });
  // With a relay it is the relay that meets the MX hosts and their policies.
  const transport =
    relay || !pool
      ? undefined
      : createTransportPolicy({
        mtaSts: config.outbound.mtaSts.enabled
          ? createMtaStsResolver({
              resolver,
              clock,
              logger,
              store: stsPolicies,
              httpsPort: config.outbound.mtaSts.httpsPort,
              ca: httpsCa,
              fetchTimeoutMs: config.outbound.mtaSts.fetchTimeoutMs,
              allowPrivate: config.outbound.mtaSts.allowPrivate,
            })
          : undefined,
        dane: config.outbound.dane.enabled ? createTlsaLookup(resolver, clock) : undefined,
      });
  const engine = new DeliveryEngine({
    deliveries,
    returnPathToken: (emailId, rcptDomain, recipient) => returnPathToken(deps.secret, emailId, rcptDomain, recipient),
    messages: createMessageFactory({ signer, transformHtml: tracking.transformHtml }),
    mx,
    pool: pool ?? createSandboxTransport({ sandbox, logger }),
    clock,
    logger,
    port: config.outbound.port,
    route: pool ? relay : { host: SANDBOX_HOST, address: SANDBOX_HOST, port: 0 },
    // Enough to keep every connection a destination may have busy, with as many ready behind them.
    maxInFlightPerDomain: 2 * config.outbound.maxConnectionsPerHost,
    messageBudgetBytes: config.outbound.messageMemoryMb * 1024 * 1024,
    transport,
    onTlsVerdicts: (verdicts) => tlsCounter.record(verdicts),
    // The sandbox sends nothing anywhere: no sources, nothing to shape.
    ...(pool ? { shaper } : {}),
    onHeld: (why, source, rollup, count) => metrics.held(source, rollup, why, count),
  });
  // Sandbox mode sends nothing by SMTP, TLS reports included.
  // Mail Posthorn sends as itself (TLS reports, bounce notices); none in sandbox mode.
  const ownMail = pool && createOwnMailSender({ pool, mx, signer, serverKey: serverDkimKey, port: config.outbound.port, relay, transport });
  const tlsReportSender = ownMail && createTlsReportSender({
    reports: tlsReports,
    ownMail,
    hostname: config.hostname,
    resolver,
    https: { ca: httpsCa, timeoutMs: config.webhooks.timeoutMs, allowPrivate: config.outbound.tlsReports.allowPrivate },
    clock,
    logger,
  });
  /**
   * One report run at a time: make the due reports (daily), then send what is due (retries too);
   * once `signal` aborts (a graceful stop) no further delivery is started.
   */
  let reportRun: Promise<unknown> = Promise.resolve();
  const runTlsReports = (generate: boolean, signal?: AbortSignal) => {
    const run = reportRun.then(async () => {
      const made = generate ? await tlsReports.generateDue(signal) : undefined;
      const sent = tlsReportSender ? await tlsReportSender.runDue(signal) : undefined;
      await stsPolicies.purgeExpired(clock.nowMs());
      return { made, sent };
    });
    reportRun = run.catch(() => undefined);
    return run;
  };
  return {
    pool,
    signer,
    engine,
    /** Sends a submission's bounce notice (submission.bounceNotices); none in sandbox mode. */
    bounceNoticeMailer: ownMail && createBounceNoticeMailer({ ownMail, hostname: config.hostname, clock }),
    runTlsReports,
    /** Resolves once the report run in progress, if any, has ended (a graceful stop waits for it). */
    reportsSettled: () => reportRun,
  };
}
