import type { DNSResolver } from 'mailauth';
import { SMTPServer, type SMTPServerSession } from 'smtp-server';
import type { Clock } from '../../lib/clock.js';
import type { InboundRoute, InboundRouter } from '../../core/received/inbound-router.js';
import type { InboundEnvelope } from '../../core/received/inbound-types.js';
import type { ReceivedEmailService } from '../../core/received/received-email-service.js';
import type { ReportService } from '../../core/received/report-service.js';
import type { ReceivedTlsReportService } from '../../core/tls-reports/received-tls-report-service.js';
import type { DomainRecord } from '../../core/domains/domain-service.js';
import { AppError } from '../../core/errors.js';
import { smtpError, toSmtpError } from '../smtp-errors.js';
import { ConnectionsPerIp } from '../client-ip-limits.js';
import { networkMatcher } from '../../lib/network-list.js';
import { receiveMessage, SMTP_SERVER_TIMEOUT_MS, SmtpListener, tooManyConnectionsReply, type SmtpListenerOptions } from '../smtp-listener.js';
import { parseMessage } from '../parsed-mail.js';
import { headerBlockProblem } from './header-block-limits.js';
import { parseReport } from './report-parser.js';
import { buildReceivedMessage, plainIp } from './received-message.js';
import { tlsReportJsonOf } from './tls-report-intake.js';
import { verifyReporterSignature } from './tls-report-signature.js';

// The MX-facing listener (port 25): bounces to return paths, ARF reports to the complaint
// address, mail for receiving domains. Anything else is refused at RCPT with 550 5.7.1, so it
// is never an open relay. Whatever is accepted is stored before the 250 (architecture.md, The process: nothing
// accepted lives only in memory); a local failure answers 451 so the sender keeps the message.

export interface InboundServerOptions extends SmtpListenerOptions {
  router: InboundRouter;
  reports: ReportService;
  received: ReceivedEmailService;
  /** mailauth-style resolver over Posthorn's DNS client (never the system resolver). */
  resolver: DNSResolver;
  clock: Clock;
  /** Unsubscribes the contact a campaign unsubscribe token names (mailto List-Unsubscribe). */
  unsubscribe?: (token: string) => Promise<boolean>;
  /** Told the kind of each message taken (bounce, complaint, received, unsubscribe), for metrics. */
  onMessage?: (kind: string) => void;
  /** Stores TLS reports (RFC 8460) mailed to a domain's tlsrpt+<id>@<hostname> mailbox. */
  tlsReports?: Pick<ReceivedTlsReportService, 'receive'>;
}

export async function startInboundServer(options: InboundServerOptions): Promise<SmtpListener> {
  const logger = options.logger.child({ listener: 'inbound' });
  const listener = new SmtpListener(logger, 'inbound');
  const perIp = new ConnectionsPerIp(options.maxConnectionsPerIp);
  const exempt = networkMatcher(options.exemptNetworks);

  const envelopeOf = (session: SMTPServerSession): InboundEnvelope => ({
    mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
    rcptTo: session.envelope.rcptTo.map((r) => r.address),
    remoteIp: plainIp(session.remoteAddress ?? null),
    helo: session.hostNameAppearsAs || null,
    tls: session.secure,
  });

  async function handleMessage(raw: Buffer, session: SMTPServerSession): Promise<string> {
    const envelope = envelopeOf(session);
    // Routes are read again now: receiving may have been turned off since RCPT.
    const routes: InboundRoute[] = [];
    for (const rcpt of envelope.rcptTo) {
      try {
        routes.push(await options.router.route(rcpt));
      } catch (err) {
        // A store failure is ours and transient (451 below); only a refusal drops the recipient.
        if (!(err instanceof AppError)) throw err;
        logger.info({ rcpt, err: err.message }, 'recipient no longer accepted at DATA; skipped');
      }
    }
    if (!routes.length) throw smtpError(550, '5.7.1', 'no recipient of this message is accepted here any more');
    // Before any parser sees it: mailauth's header handling is quadratic in a header block's shape.
    const headerProblem = headerBlockProblem(raw);
    if (headerProblem) {
      logger.info({ envelope, problem: headerProblem }, 'inbound message refused: header block out of bounds');
      throw smtpError(552, '5.6.0', `${headerProblem}; refused`);
    }

    const parsed = await parseMessage(raw);
    const ids: string[] = [];
    const reportRoutes = routes.filter((r): r is Extract<InboundRoute, { kind: 'bounce' | 'complaint' }> => r.kind === 'bounce' || r.kind === 'complaint');
    for (const r of routes) {
      if (r.kind !== 'unsubscribe') continue;
      // Done before the 250: the sender's unsubscribe is durable once we accept the message.
      const ok = (await options.unsubscribe?.(r.token)) ?? false;
      logger.info({ ok }, 'unsubscribe by mail');
      ids.push(ok ? 'unsubscribed' : 'unsubscribe-ignored');
      options.onMessage?.('unsubscribe');
    }
    const tlsReportRoutes = routes.filter((r): r is Extract<InboundRoute, { kind: 'tls-report' }> => r.kind === 'tls-report');
    if (tlsReportRoutes.length) {
      // RFC 8460 §3: without the reporter's DKIM signature a report is ignored. Alone in the
      // message it is refused so the reporter hears of it; beside other recipients it is skipped
      // and the rest taken. A key look-up failure answers 451 either way: the retry may verify.
      const signature = await verifyReporterSignature(raw, { resolver: options.resolver, submitter: parsed?.headers.get('tls-report-submitter'), now: options.clock.now() });
      if (!signature.ok) {
        const text = `TLS reports must carry a valid DKIM signature of the reporting domain (RFC 8460 section 3): ${signature.reason}`;
        logger.info({ domainIds: tlsReportRoutes.map((r) => r.domain.id), mailFrom: envelope.mailFrom, temporary: signature.temporary, reason: signature.reason }, 'TLS report without the reporter\'s DKIM signature refused');
        // RFC 3463 4.4.3 (directory server failure); RFC 7372 3.1: 5.7.20, no passing DKIM signature found.
        if (signature.temporary) throw smtpError(451, '4.4.3', text);
        if (routes.length === tlsReportRoutes.length) throw smtpError(550, '5.7.20', text);
      } else {
        const found = parsed ? await tlsReportJsonOf(parsed) : { error: 'the message could not be parsed' };
        for (const r of tlsReportRoutes) {
          try {
            if ('error' in found) throw new AppError('BAD_REQUEST', found.error);
            if (!options.tlsReports) throw new AppError('BAD_REQUEST', 'TLS reports are not taken here');
            const id = await options.tlsReports.receive(r.domain, found.json, { mailFrom: envelope.mailFrom, remoteIp: envelope.remoteIp });
            logger.info({ id, domainId: r.domain.id, duplicate: id === null, dkim: signature.domain }, 'TLS report stored');
            ids.push(id ?? 'tls-report-duplicate');
          } catch (err) {
            if (!(err instanceof AppError)) throw err;
            // Alone in the message, a report we cannot read is refused so the reporter hears of it.
            if (routes.length === tlsReportRoutes.length) throw toSmtpError(err, 'data');
            logger.info({ domainId: r.domain.id, err: err.message }, 'unreadable TLS report skipped');
          }
        }
      }
    }
    if (reportRoutes.length) {
      const outcome = await options.reports.record({ envelope, routes: reportRoutes, report: parseReport(raw, parsed, envelope.mailFrom), raw });
      logger.info({ reportId: outcome.reportId, kind: outcome.kind, emailId: outcome.emailId, duplicate: outcome.duplicate }, 'inbound report recorded');
      ids.push(`report-${outcome.reportId}`);
      options.onMessage?.(outcome.kind);
    }

    // One stored copy per receiving domain, each with the envelope recipients at that domain.
    const byDomain = new Map<number, { domain: DomainRecord; rcptTo: string[] }>();
    for (const r of routes) {
      if (r.kind !== 'receive') continue;
      for (const d of r.domains) {
        const entry = byDomain.get(d.id) ?? { domain: d, rcptTo: [] };
        entry.rcptTo.push(r.address);
        byDomain.set(d.id, entry);
      }
    }
    if (byDomain.size) {
      const message = await buildReceivedMessage(raw, parsed, {
        envelope,
        hostname: options.hostname,
        resolver: options.resolver,
        traceId: session.id,
        now: options.clock.now(),
      });
      const stored = await options.received.store(message, [...byDomain.values()]);
      logger.info({ ids: stored, rcptTo: envelope.rcptTo, spf: message.auth.spf.result, dkim: message.auth.dkim.result, dmarc: message.auth.dmarc.result }, 'received email stored');
      ids.push(...stored);
      options.onMessage?.('received');
    }
    // RFC 5321 4.5.3.1.5: a reply line is at most 512 octets; a long list is summarised.
    return ids.length > 8 ? `${ids.slice(0, 8).join(' ')} (+${ids.length - 8} more)` : ids.join(' ');
  }

  const server = new SMTPServer({
    name: options.hostname,
    key: options.tls.key,
    cert: options.tls.cert,
    logger: false,
    // An MX does not authenticate its peers (RFC 5321 relay-in); AUTH is for submission.
    disabledCommands: ['AUTH'],
    authOptional: true,
    // PTR names are chosen by whoever owns the client address; nothing here trusts them, and a
    // lookup would go through the system resolver.
    disableReverseLookup: true,
    size: options.maxMessageBytes,
    rejectOversized: true,
    maxClients: options.maxConnections,
    maxRecipients: options.maxRecipients,
    // RFC 5321 4.5.3.2.7: a server waits at least 5 minutes for the next command; this also
    // outlasts our own work on a message (DNS checks, storing) before the reply.
    socketTimeout: SMTP_SERVER_TIMEOUT_MS,
    banner: 'Posthorn ESMTP',

    onConnect(session, callback) {
      if (listener.closing) return callback(smtpError(421, '4.3.2', `${options.hostname} shutting down, try again later`));
      // An exempt client is not counted (release then finds nothing to release).
      if (!exempt(session.remoteAddress) && !perIp.admit(session.id, session.remoteAddress)) {
        logger.debug({ remote: session.remoteAddress, cap: options.maxConnectionsPerIp }, 'connection over the per-address cap refused');
        options.onRefused?.('connections_per_ip');
        return callback(tooManyConnectionsReply(options.hostname, options.maxConnectionsPerIp));
      }
      callback();
    },

    onClose(session) {
      perIp.release(session.id);
    },

    onMailFrom(_address, _session, callback) {
      if (listener.closing) return callback(smtpError(421, '4.3.2', `${options.hostname} shutting down, try again later`));
      callback();
    },

    onRcptTo(address, _session, callback) {
      options.router.route(address.address).then(
        () => callback(),
        (err) => {
          if (!(err instanceof AppError)) logger.error({ err }, 'routing a recipient failed');
          callback(toSmtpError(err, 'rcpt'));
        },
      );
    },

    onData(stream, session, callback) {
      const work = receiveMessage(stream, options.maxMessageBytes, options.intake).then(async (body) => {
        if (!body) return callback(smtpError(552, '5.3.4', `message exceeds the fixed maximum size of ${options.maxMessageBytes} bytes`));
        const stored = listener.beginStoring(session.id);
        try {
          // Parsing and storing a message takes a few times its size: it waits for room.
          const ids = await options.intake.process(body, (raw) => handleMessage(raw, session));
          callback(null, `2.0.0 Ok: queued as ${ids}`);
        } catch (err) {
          if ((err as { responseCode?: number }).responseCode) return callback(err as Error);
          logger.error({ err, rcptTo: session.envelope.rcptTo.map((r) => r.address) }, 'storing an inbound message failed; answered 451');
          callback(toSmtpError(err, 'data'));
        } finally {
          stored();
        }
      }, (err) => {
        logger.debug({ err }, 'DATA stream failed');
        callback(smtpError(451, '4.3.0', 'error reading the message, try again'));
      });
      void listener.track(work);
    },
  });

  await listener.listen(server, options.host, options.port);
  return listener;
}
