/**
 * Shared pieces for the SMTP client pool tests: a pool with test defaults,
 * a message, a TCP proxy that counts simultaneous SMTP sessions, and a small
 * smtp-server for the relay and broken-TLS cases the sink cannot play.
 */
import { EventEmitter, once } from 'node:events';
import net from 'node:net';
import type { ExecutionContext } from 'ava';
import { SMTPServer } from 'smtp-server';
import type { SMTPServerOptions, SMTPServerSession } from 'smtp-server';
import { createLogger } from '../../../src/lib/logger.js';
import { createSmtpClientPool } from '../../../src/smtp/outbound/smtp-client-pool.js';
import type { DeliveryTarget, SmtpClientPool, SmtpClientPoolOptions, TransactionRequest } from '../../../src/smtp/outbound/smtp-client-pool.js';
import { startSmtpSink } from '../../helpers/smtp-sink.js';
import type { SmtpSink, SmtpSinkOptions } from '../../helpers/smtp-sink.js';

export const HELO_NAME = 'out.posthorn.test';
export const LOOPBACK = '127.0.0.1';
/** Generous for a loaded CI box, short enough that a hang fails fast. */
export const WAIT_TIMEOUT_MS = 10_000;

export function poolFor(t: ExecutionContext, opts: Partial<SmtpClientPoolOptions> = {}): SmtpClientPool {
  const pool = createSmtpClientPool({ heloName: HELO_NAME, logger: createLogger('silent'), ...opts });
  t.teardown(() => pool.close());
  return pool;
}

export async function sinkFor(t: ExecutionContext, opts: SmtpSinkOptions = {}): Promise<SmtpSink> {
  const sink = await startSmtpSink(opts);
  t.teardown(() => sink.close());
  return sink;
}

export function targetOf(sink: { hostname: string; port: number }, host = sink.hostname): DeliveryTarget {
  return { host, address: LOOPBACK, port: sink.port };
}

let counter = 0;

/** A small CRLF message with a unique Message-ID; a leading dot line checks dot-stuffing. */
export function messageFor(label = 'test'): Buffer {
  counter++;
  return Buffer.from(
    [
      'From: Sender <sender@posthorn.test>',
      'To: rcpt@example.test',
      `Subject: ${label} ${counter}`,
      `Message-ID: <${label}.${counter}.${process.pid}@posthorn.test>`,
      'MIME-Version: 1.0',
      'Content-Type: text/plain; charset=utf-8',
      '',
      `Body of ${label} ${counter}`,
      '.a line that starts with a dot',
      '',
    ].join('\r\n'),
  );
}

export function request(recipients: string[], extra: Partial<TransactionRequest> = {}): TransactionRequest {
  return { mailFrom: 'bounces+em_1@rp.posthorn.test', recipients, message: messageFor(), tlsPolicy: 'OPPORTUNISTIC', ...extra };
}

// ------------------------------------------------------------ counting proxy

/** Shared across proxies to count sessions to several destinations at once. */
export interface SessionCounter {
  active: number;
  maxActive: number;
}

export interface CountingProxy {
  readonly port: number;
  readonly accepted: number;
  readonly counter: SessionCounter;
  /** Resolves once `n` sessions through this proxy have ended. */
  waitForEnded(n: number): Promise<void>;
  /** Cuts every connection, like a NAT box forgetting them. */
  dropAll(): void;
  close(): Promise<void>;
}

/**
 * A TCP relay in front of a plaintext sink that counts SMTP sessions. A session
 * ends when the server's 221 reply to QUIT passes (counted before it is
 * forwarded, so before the client can know the session is over) or when the
 * client's socket closes. That makes "at most N at once" exact: a client can
 * only open its replacement after it saw its old session end.
 */
export async function startCountingProxy(t: ExecutionContext, upstreamPort: number, counter: SessionCounter = { active: 0, maxActive: 0 }): Promise<CountingProxy> {
  const events = new EventEmitter();
  const sockets = new Set<net.Socket>();
  let accepted = 0;
  let ended = 0;
  const server = net.createServer((client) => {
    accepted++;
    counter.active++;
    counter.maxActive = Math.max(counter.maxActive, counter.active);
    let open = true;
    const end = (): void => {
      if (!open) return;
      open = false;
      counter.active--;
      ended++;
      events.emit('ended');
    };
    const upstream = net.connect(upstreamPort, LOOPBACK);
    sockets.add(client);
    sockets.add(upstream);
    upstream.on('data', (chunk: Buffer) => {
      if (/^221[ -]/m.test(chunk.toString('latin1'))) end();
      client.write(chunk);
    });
    client.on('data', (chunk: Buffer) => upstream.write(chunk));
    client.on('end', () => upstream.end());
    upstream.on('end', () => client.end());
    client.on('close', () => {
      end();
      upstream.destroy();
      sockets.delete(client);
    });
    upstream.on('close', () => {
      client.destroy();
      sockets.delete(upstream);
    });
    client.on('error', () => {});
    upstream.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, LOOPBACK, () => resolve()));
  const port = (server.address() as net.AddressInfo).port;
  const proxy: CountingProxy = {
    port,
    get accepted() {
      return accepted;
    },
    counter,
    async waitForEnded(n) {
      const ac = new AbortController();
      const timer = setTimeout(() => ac.abort(), WAIT_TIMEOUT_MS);
      try {
        while (ended < n) await once(events, 'ended', { signal: ac.signal });
      } finally {
        clearTimeout(timer);
      }
    },
    dropAll() {
      for (const s of sockets) s.destroy();
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  t.teardown(() => proxy.close());
  return proxy;
}

// ------------------------------------------------------------ a scriptable smtp-server

export interface ReceivedMessage {
  mailFrom: string;
  rcptTo: string[];
  raw: Buffer;
  secure: boolean;
  user: string | undefined;
}

export interface TestServer {
  readonly port: number;
  readonly received: ReceivedMessage[];
  readonly connections: number;
  readonly authAttempts: string[];
}

/** smtp-server with AUTH (for the relay) or odd TLS settings; records what it accepts. */
export async function startTestServer(t: ExecutionContext, options: SMTPServerOptions): Promise<TestServer> {
  const received: ReceivedMessage[] = [];
  const authAttempts: string[] = [];
  let connections = 0;
  const server = new SMTPServer({
    logger: false,
    disableReverseLookup: true,
    ...options,
    onAuth(auth, session, callback) {
      authAttempts.push(auth.username ?? '');
      if (options.onAuth) return options.onAuth(auth, session, callback);
      callback(new Error('no auth here'));
    },
    onData(stream, session: SMTPServerSession, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        received.push({
          mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          rcptTo: session.envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks),
          secure: session.secure,
          user: typeof session.user === 'string' ? session.user : undefined,
        });
        callback();
      });
    },
  });
  server.on('error', () => {});
  server.server.on('connection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, LOOPBACK, () => resolve()));
  const port = (server.server.address() as net.AddressInfo).port;
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // smtp-server waits for clients otherwise; ours have all quit or been closed.
        for (const c of server.connections) c.close();
      }),
  );
  return {
    port,
    received,
    get connections() {
      return connections;
    },
    authAttempts,
  };
}
