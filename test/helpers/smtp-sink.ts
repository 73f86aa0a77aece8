// A programmable SMTP server (RFC 5321) that the test suite uses as the
// recipients' MX. Built on smtp-server; every hook can answer with an
// arbitrary reply code or drop the TCP connection on the spot, so tests can
// exercise the sender's handling of 4xx/5xx replies and broken connections.
import { EventEmitter, once } from 'node:events';
import type { Socket } from 'node:net';
import { SMTPServer, type SMTPServerError, type SMTPServerSession } from 'smtp-server';
import { SMTPConnection } from 'smtp-server/lib/smtp-connection.js';
import { testCert } from './test-keys.js';

/** 'drop' = destroy the socket right there (simulates a connection drop). */
export type SinkReply = { code: number; message: string } | 'drop';

export interface SinkMessage {
  mailFrom: string;
  rcptTo: string[];
  raw: Buffer;
  secure: boolean;
  heloName: string;
  connectionId: string;
  /** The client's address (which local address the sender bound to). */
  remoteAddress: string;
}

export interface SinkBehaviour {
  /** Offer STARTTLS (RFC 3207). Default true. */
  starttls: boolean;
  /** e.g. {code: 421, ...} or 'drop'; undefined = send the 220 greeting. */
  onConnect?: () => SinkReply | undefined;
  onMailFrom?: (address: string) => SinkReply | undefined;
  /** e.g. {code: 550, message: '5.1.1 User unknown'}; undefined = accept. */
  onRcpt?: (address: string) => SinkReply | undefined;
  /** Called after the whole message arrived; undefined = 250, accept and record it. */
  onData?: (msg: SinkMessage) => SinkReply | undefined;
  /** When set, the reply to DATA waits for the promise it returns (a session held busy on purpose). */
  holdData?: () => Promise<void>;
}

export interface SmtpSink {
  readonly port: number;
  readonly host: string;
  /** PEM of the sink's certificate, for clients to trust. */
  readonly ca: string;
  /** Name in the certificate, default 'mx.sink.test'. */
  readonly hostname: string;
  /** Accepted messages, in order. */
  readonly messages: SinkMessage[];
  /** TCP connections accepted so far (for connection-reuse tests). */
  readonly connectionCount: number;
  /** The most TCP connections that were open at once (connection-limit tests). */
  readonly peakConnections: number;
  setBehaviour(b: Partial<SinkBehaviour>): void;
  /** Resolves once messages.length >= count; rejects on timeout (default 10 s). */
  waitForMessages(count: number, timeoutMs?: number): Promise<SinkMessage[]>;
  close(): Promise<void>;
}

export type SmtpSinkOptions = Partial<SinkBehaviour> & {
  hostname?: string;
  cert?: { key: string; cert: string };
  /** RFC 1870 SIZE limit in bytes; no limit by default. */
  size?: number;
  /** Offer SMTPUTF8 (RFC 6531); default true (smtp-server's default). */
  smtputf8?: boolean;
  /** Loopback address to bind (another 127.x address lets a second sink share the port). */
  host?: string;
  /** Port to bind; 0 (default) picks a free one. */
  port?: number;
};

const SINK_HOST = '127.0.0.1';
const DEFAULT_SINK_HOSTNAME = 'mx.sink.test';
const DEFAULT_WAIT_TIMEOUT_MS = 10_000;
// Upper bound for a client to read our 421 and close its side during close();
// after that the socket is destroyed. Only reached by clients that never read.
const CLOSE_GRACE_MS = 1_000;

function defaultCert(hostname: string): Promise<{ key: string; cert: string }> {
  return testCert({ hostnames: [hostname], ips: [SINK_HOST] });
}

function smtpError(reply: { code: number; message: string }): SMTPServerError {
  const err: SMTPServerError = new Error(reply.message);
  // smtp-server answers a failed DATA with 450 and a refused connection with
  // 554 unless told otherwise; the test asked for this exact code.
  err.responseCode = reply.code;
  return err;
}

function isPositive(reply: { code: number }): boolean {
  return reply.code >= 200 && reply.code < 300;
}

/**
 * Runs a test-supplied hook. A hook that throws (e.g. a failed assertion)
 * answers 451 with the error text instead of crashing the test worker from
 * inside a socket callback; the client sees a transient failure and the test
 * sees the message.
 */
function consult<A extends unknown[]>(hook: ((...args: A) => SinkReply | undefined) | undefined, ...args: A): SinkReply | undefined {
  if (!hook) return undefined;
  try {
    return hook(...args);
  } catch (err) {
    return { code: 451, message: `4.3.0 smtp sink hook threw: ${err instanceof Error ? err.message : String(err)}` };
  }
}

function disabledCommandsFor(b: SinkBehaviour): string[] {
  // AUTH off: the MX role never authenticates peers (RFC 5321 relay-in).
  return b.starttls ? ['AUTH'] : ['AUTH', 'STARTTLS'];
}

/**
 * smtp-server holds every greeting back by a hard-coded 100 ms to catch early
 * talkers (no option turns that off). The suite opens many connections, so for
 * this server instance only, connections are started the way init() does it
 * minus the timer. Uses smtp-server internals, hence the feature check: if a
 * later version renames them the sink silently falls back to the slow greeting.
 */
function skipGreetingDelay(server: SMTPServer): void {
  const proto = SMTPConnection.prototype as Partial<SMTPConnection>;
  if (typeof proto._setListeners !== 'function' || typeof proto.connectionReady !== 'function') return;
  server.connect = (socket, socketOptions) => {
    const connection = new SMTPConnection(server, socket, socketOptions);
    server.connections.add(connection);
    connection.on('error', (err: Error) => server._onError(err));
    connection.on('connect', (data) => server._onClientConnect(data));
    // Still no input is processed before the greeting (_ready stays false until
    // connectionReady sends it), so early-talker detection keeps working.
    connection._setListeners(() => connection.connectionReady());
  };
}

export async function startSmtpSink(opts: SmtpSinkOptions = {}): Promise<SmtpSink> {
  const { hostname = DEFAULT_SINK_HOSTNAME, cert: ownCert, size, smtputf8 = true, host = SINK_HOST, port: bindPort = 0, ...initialBehaviour } = opts;
  const { key, cert } = ownCert ?? (await defaultCert(hostname));

  let behaviour: SinkBehaviour = { ...initialBehaviour, starttls: initialBehaviour.starttls ?? true };
  const messages: SinkMessage[] = [];
  const events = new EventEmitter();
  let connectionCount = 0;
  // Open sessions, counted from the TCP accept to smtp-server's onClose (a socket upgraded to
  // TLS no longer reports its own close).
  let openConnections = 0;
  let peakConnections = 0;
  // Raw TCP sockets by client port: the SMTP session only knows the peer
  // address, and 'drop' must kill the TCP connection even under TLS.
  const rawSockets = new Map<string, Socket>();
  const socketKey = (address: string | undefined, port: number | undefined): string => `${address}:${port}`;

  const drop = (session: SMTPServerSession): void => {
    rawSockets.get(socketKey(session.remoteAddress, session.remotePort))?.destroy();
  };

  const server = new SMTPServer({
    name: hostname,
    key,
    cert,
    logger: false,
    authOptional: true,
    disabledCommands: disabledCommandsFor(behaviour),
    // 127.0.0.1 has no useful PTR and a lookup would only slow the greeting.
    disableReverseLookup: true,
    ...(size !== undefined ? { size } : {}),
    ...(smtputf8 ? {} : { hideSMTPUTF8: true }),

    onClose() {
      openConnections--;
    },

    onConnect(session, callback) {
      // Read per connection so setBehaviour({starttls}) applies to the next
      // connection without restarting the sink (this also drives EHLO).
      session.disabledCommands = disabledCommandsFor(behaviour);
      const reply = consult(behaviour.onConnect);
      if (reply === 'drop') {
        drop(session);
        return callback(new Error('dropped'));
      }
      if (reply && !isPositive(reply)) return callback(smtpError(reply));
      callback();
    },

    onMailFrom(address, session, callback) {
      const reply = consult(behaviour.onMailFrom, address.address);
      if (reply === 'drop') return drop(session);
      if (reply && !isPositive(reply)) return callback(smtpError(reply));
      callback();
    },

    onRcptTo(address, session, callback) {
      const reply = consult(behaviour.onRcpt, address.address);
      if (reply === 'drop') return drop(session);
      if (reply && !isPositive(reply)) return callback(smtpError(reply));
      callback();
    },

    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => {
        if (stream.sizeExceeded) {
          // RFC 1870 section 6.1 / RFC 3463 X.3.4: message too big for system.
          return callback(smtpError({ code: 552, message: `5.3.4 Message exceeds fixed maximum size of ${size} bytes` }));
        }
        const envelope = session.envelope;
        const msg: SinkMessage = {
          mailFrom: envelope.mailFrom ? envelope.mailFrom.address : '',
          rcptTo: envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks),
          secure: session.secure,
          heloName: session.hostNameAppearsAs || '',
          connectionId: session.id,
          remoteAddress: session.remoteAddress.replace(/^::ffff:/, ''),
        };
        const answer = () => {
          const reply = consult(behaviour.onData, msg);
          if (reply === 'drop') return drop(session);
          if (reply && !isPositive(reply)) return callback(smtpError(reply));
          // Any 2xx means the client has handed the message over: record it.
          messages.push(msg);
          events.emit('message');
          callback(null, reply ? reply.message : undefined);
        };
        const hold = behaviour.holdData?.();
        if (hold) void hold.then(answer, answer);
        else answer();
      });
    },
  });
  skipGreetingDelay(server);

  server.server.on('connection', (socket: Socket) => {
    connectionCount++;
    openConnections++;
    peakConnections = Math.max(peakConnections, openConnections);
    const k = socketKey(socket.remoteAddress, socket.remotePort);
    rawSockets.set(k, socket);
    socket.once('close', () => rawSockets.delete(k));
  });
  // Connection-level errors (resets from 'drop', clients vanishing mid-TLS)
  // are expected in tests; an unhandled 'error' would crash the worker.
  server.on('error', () => {});

  await new Promise<void>((resolve, reject) => {
    server.server.once('error', reject);
    server.listen(bindPort, host, () => {
      server.server.off('error', reject);
      resolve();
    });
  });
  const address = server.server.address();
  if (address === null || typeof address === 'string') throw new Error('smtp sink: unexpected listen address');
  const port = address.port;

  return {
    port,
    host,
    ca: cert,
    hostname,
    messages,
    get connectionCount() {
      return connectionCount;
    },

    get peakConnections() {
      return peakConnections;
    },

    setBehaviour(b) {
      behaviour = { ...behaviour, ...b };
      // New connections read the per-session list set in onConnect; keep the
      // server-wide one consistent for anything that consults it directly.
      server.options.disabledCommands = disabledCommandsFor(behaviour);
    },

    async waitForMessages(count, timeoutMs = DEFAULT_WAIT_TIMEOUT_MS) {
      if (messages.length >= count) return messages.slice();
      const ac = new AbortController();
      const timer = setTimeout(() => ac.abort(), timeoutMs);
      try {
        while (messages.length < count) await once(events, 'message', { signal: ac.signal });
        return messages.slice();
      } catch (err) {
        if (ac.signal.aborted) {
          throw new Error(`smtp sink: expected ${count} message(s) within ${timeoutMs} ms, got ${messages.length}`);
        }
        throw err;
      } finally {
        clearTimeout(timer);
      }
    },

    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      // smtp-server would otherwise wait 30 s for idle (e.g. pooled) clients.
      // RFC 5321 section 3.8: announce the shutdown with 421, then close.
      for (const connection of [...server.connections]) connection.send(421, `${hostname} Service shutting down`);
      const grace = setTimeout(() => {
        for (const socket of rawSockets.values()) socket.destroy();
      }, CLOSE_GRACE_MS);
      grace.unref();
      await closed;
      clearTimeout(grace);
    },
  };
}
