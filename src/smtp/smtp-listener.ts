import type { AddressInfo } from 'node:net';
import type { SMTPServer, SMTPServerDataStream, SMTPServerError } from 'smtp-server';
import type { BodyIntake } from '../lib/body-intake.js';
import type { SpooledBody } from '../lib/body-spool.js';
import type { Logger } from '../lib/logger.js';
import type { PemKeyPair } from '../lib/tls-cert.js';
import { smtpError } from './smtp-errors.js';

// Lifecycle shared by the inbound and submission listeners: listen, count in-flight message
// handling, and a graceful close that lets every message already being stored finish (so a
// 250 is never promised for something we did not keep, and nothing kept is answered 421 and
// sent again) before telling idle clients 421.

/** What every SMTP listener (inbound, submission) is started with. */
export interface SmtpListenerOptions {
  /** Bounds the memory of messages being received, parsed and stored (intakeMemoryMb), with the API's bodies. */
  intake: BodyIntake;
  host: string;
  port: number;
  hostname: string;
  tls: PemKeyPair;
  maxMessageBytes: number;
  maxConnections: number;
  /** Connections at once from one client address (client-ip-limits.ts); 0 is no cap. */
  maxConnectionsPerIp: number;
  /** Addresses and networks (checked by the config schema) the per-client limits leave alone. */
  exemptNetworks: readonly string[];
  maxRecipients: number;
  logger: Logger;
  /** Told each connection or AUTH refused by a per-client limit, for metrics. */
  onRefused?: (reason: ClientRefusal) => void;
}

/** Why a per-client limit refused a client: too many connections from its address, or its address locked out after failed AUTHs. */
export type ClientRefusal = 'connections_per_ip' | 'auth_lockout';

/**
 * The reply to a connection over its address's cap. 421 at connect (RFC 5321 3.8) closes it;
 * 4.7.0 (RFC 3463: security or policy status): the client may come back once one closes.
 */
export function tooManyConnectionsReply(hostname: string, cap: number): SMTPServerError {
  return smtpError(421, '4.7.0', `${hostname} too many connections from your address (at most ${cap} at once), try again later`);
}

/** Idle time allowed between client commands (RFC 5321 4.5.3.2.7: at least 5 minutes). */
export const SMTP_SERVER_TIMEOUT_MS = 5 * 60_000;
/** smtp-server's default closeTimeout: how long close() lets clients still sending carry on. */
const DEFAULT_CLOSE_GRACE_MS = 30_000;
/** The longest a Node timer can be: smtp-server's own close timer, pushed out of the way. */
const MAX_TIMER_MS = 2_147_483_647;

export class SmtpListener {
  private readonly inFlight = new Set<Promise<unknown>>();
  /** Connections (by session id) whose message is in whole and being stored, until they are answered. */
  private readonly storing = new Set<string>();
  private server: SMTPServer | undefined;
  private closed: Promise<void> | undefined;
  port = 0;
  closing = false;

  constructor(
    private readonly logger: Logger,
    private readonly name: string,
  ) {}

  /** Runs one message handler; close() waits for it. */
  track<T>(work: Promise<T>): Promise<T> {
    this.inFlight.add(work);
    const done = () => this.inFlight.delete(work);
    void work.then(done, done);
    return work;
  }

  /** Marks a connection as having its message stored; the returned function ends that, after the reply. */
  beginStoring(sessionId: string): () => void {
    this.storing.add(sessionId);
    return () => this.storing.delete(sessionId);
  }

  async listen(server: SMTPServer, host: string, port: number): Promise<number> {
    this.server = server;
    // Connection-level errors (resets, TLS failures, clients vanishing) are routine on a
    // public port; smtp-server reports them here and an unhandled 'error' would end the process.
    server.on('error', (err: Error & { code?: string }) => this.logger.debug({ err: err.message, code: err.code, listener: this.name }, 'SMTP connection error'));
    await new Promise<void>((resolve, reject) => {
      server.server.once('error', reject);
      server.listen(port, host, () => {
        server.server.off('error', reject);
        resolve();
      });
    });
    this.port = (server.server.address() as AddressInfo).port;
    return this.port;
  }

  /** Stops accepting, lets messages being stored finish and answer, then says 421 to the rest. */
  async close(): Promise<void> {
    if (this.closed) return this.closed;
    this.closing = true;
    const server = this.server;
    if (!server) return;
    this.closed = (async () => {
      // smtp-server's own timer would say 421 to every connection when the grace ends, one whose
      // message is being stored too: that message is kept and the client sends it again. The
      // grace is run here instead, sparing those.
      const graceMs = server.options.closeTimeout ?? DEFAULT_CLOSE_GRACE_MS;
      server.options.closeTimeout = MAX_TIMER_MS;
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      let timer: NodeJS.Timeout | undefined;
      const graceOver = new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)));
      await Promise.race([Promise.allSettled([...this.inFlight]), graceOver]);
      clearTimeout(timer);
      // Idle clients and those still sending a message go now (a message cut off is not kept).
      this.sayClosing(server, (id) => !this.storing.has(id));
      await Promise.allSettled([...this.inFlight]);
      this.sayClosing(server, () => true);
      await stopped;
    })();
    return this.closed;
  }

  /** RFC 5321 3.8: announces the shutdown with 421, then closes. */
  private sayClosing(server: SMTPServer, which: (sessionId: string) => boolean): void {
    for (const connection of [...server.connections]) {
      if (!which(connection.id)) continue;
      connection.send(421, `${server.options.name ?? 'posthorn'} Service shutting down`);
      connection.close();
    }
  }
}

/**
 * Starts a listener; a port we may not bind (25 and 587 need privileges) or one already taken
 * is logged loudly and leaves that listener off, rather than taking the HTTP API down with it
 * (a fresh `npm start` as an ordinary user must still run). /health lists only what listens.
 */
export async function startOrReport(name: string, where: { host: string; port: number }, logger: Logger, start: () => Promise<SmtpListener>): Promise<SmtpListener | undefined> {
  try {
    return await start();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const advice = code === undefined ? undefined : listenAdvice(name, code);
    if (!advice) throw err;
    logger.error({ listener: name, host: where.host, port: where.port, code }, `${name} SMTP cannot listen on ${where.host}:${where.port} (${code}): ${advice}; it stays off until restarted`);
    return undefined;
  }
}

/** What to change when a listener cannot bind, by cause (as the HTTP API says for its own). */
function listenAdvice(name: string, code: string): string | undefined {
  const env = `POSTHORN_${name.toUpperCase()}`;
  switch (code) {
    case 'EADDRINUSE':
      return `another process is listening there (a mail server such as Postfix, or another posthorn serve?): stop it, or set ${name}.port (${env}_PORT) to a free port`;
    case 'EACCES':
      return `ports below 1024 need CAP_NET_BIND_SERVICE: grant it, or set ${name}.port (${env}_PORT) to a port above 1023`;
    case 'EADDRNOTAVAIL':
      return `no interface of this host has that address: set ${name}.host (${env}_HOST) to one of its addresses, or 0.0.0.0`;
    default:
      return undefined;
  }
}

/**
 * Reads the DATA stream whole through the intake's spool (in memory or in a file); null when the
 * message is over `limit`: nothing of it is kept, and smtp-server reads the rest before it sends
 * the 552 the caller answers with.
 */
export async function receiveMessage(stream: SMTPServerDataStream, limit: number, intake: BodyIntake): Promise<SpooledBody | null> {
  const received = await intake.receive(stream, limit);
  if (received.oversized) return null;
  if (stream.sizeExceeded) {
    received.body.release();
    return null;
  }
  return received.body;
}
