import type { Config } from '../config/defaults.js';
import type { BodyIntake } from '../lib/body-intake.js';
import type { Logger } from '../lib/logger.js';
import type { createListenerTlsSource } from '../smtp/listener-tls.js';
import { startOrReport, type SmtpListener } from '../smtp/smtp-listener.js';
import { listenNamed } from './listen-failure.js';
import type { Listeners } from './listener-states.js';
import { startInboundServer } from '../smtp/inbound/inbound-server.js';
import { startSubmissionServer } from '../smtp/submission/submission-server.js';

// Starting the two SMTP listeners of `posthorn serve`: inbound (bounces, complaints, receiving
// domains) and authenticated submission. A port that cannot be bound is logged as an error and
// that listener stays off; the other one and the HTTP API run on.

type InboundOptions = Parameters<typeof startInboundServer>[0];
type SubmissionOptions = Parameters<typeof startSubmissionServer>[0];
/** What each server takes besides its configuration section, TLS, host name and logger. */
type Own<T> = Omit<T, 'tls' | 'hostname' | 'logger' | 'intake' | keyof Config['inbound'] | keyof Config['submission']>;

export async function startSmtpListeners(o: {
  config: Config;
  logger: Logger;
  listenerTls: ReturnType<typeof createListenerTlsSource>;
  /** Filled in with each listener's address once it listens. */
  listeners: Listeners;
  /** Gets the name of each listener that was configured but failed to start. */
  failed: Set<string>;
  /** Shared with the HTTP API: the memory of bodies being received and processed (intakeMemoryMb). */
  intake: BodyIntake;
  inbound: Own<InboundOptions>;
  submission: Own<SubmissionOptions>;
}): Promise<{ inbound: SmtpListener | undefined; submission: SmtpListener | undefined }> {
  const { config, logger, listeners } = o;
  const [inboundTls, submissionTls] = await Promise.all([o.listenerTls(config.inbound), o.listenerTls(config.submission)]);
  const common = { hostname: config.hostname, logger, intake: o.intake };
  const inbound = await startOrReport('inbound', config.inbound, logger, () =>
    listenNamed('inbound', config.inbound, () => startInboundServer({ ...common, ...config.inbound, tls: inboundTls, ...o.inbound } as InboundOptions)),
  );
  if (inbound) {
    listeners.inbound = { host: config.inbound.host, port: inbound.port };
    logger.info({ listener: 'inbound', ...listeners.inbound }, `inbound SMTP listening on ${config.inbound.host}:${inbound.port}`);
  } else o.failed.add('inbound');
  const submission = await startOrReport('submission', config.submission, logger, () =>
    listenNamed('submission', config.submission, () => startSubmissionServer({ ...common, ...config.submission, tls: submissionTls, ...o.submission } as SubmissionOptions)),
  );
  if (submission) {
    listeners.submission = { host: config.submission.host, port: submission.port };
    logger.info({ listener: 'submission', ...listeners.submission }, `submission SMTP listening on ${config.submission.host}:${submission.port}`);
  } else o.failed.add('submission');
  // Only when every one of them listens: a port that could not be bound was logged as an error.
  if (inbound && submission) logger.info({ inbound: listeners.inbound, submission: listeners.submission }, 'SMTP listeners started');
  return { inbound, submission };
}
