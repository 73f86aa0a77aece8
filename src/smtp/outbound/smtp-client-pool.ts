/**
 * Outbound SMTP sessions (RFC 5321), pooled and reused, with per-destination
 * and global connection limits and the per-domain TLS policy.
 *
 * One send() = one mail transaction: MAIL FROM, one RCPT TO per recipient
 * (each reply recorded: a refused recipient gets its own outcome while the
 * others go on), DATA once for the accepted ones. The client is nodemailer's
 * low-level SMTPConnection; this module adds what an MTA needs around it:
 *
 * - Reuse (ZoneMTA's connection cache, KumoMTA's max_deliveries_per_connection):
 *   an idle session is reused after RSET (RFC 5321 §4.1.1.5) up to
 *   maxMessagesPerConnection transactions, then QUIT; idle sessions are
 *   closed after idleTimeoutMs.
 * - Limits: at most maxConnectionsPerHost per address:port and maxConnections
 *   in total, counted from the first SYN until the socket is closed. Requests
 *   over a limit wait in one FIFO queue; a waiter blocked only by the global
 *   limit may evict an idle session of another destination.
 * - TLS policy: OPPORTUNISTIC uses STARTTLS when offered without insisting on
 *   a valid certificate (RFC 7435: any encryption beats none) and, when the
 *   handshake itself fails, reconnects once in plaintext (Postal, ZoneMTA,
 *   KumoMTA's opportunistic_tls_reconnect_on_failed_handshake), remembering the
 *   host for a while (Haraka's "TLS NO-GO", KumoMTA's remember_broken_tls).
 *   ENFORCED requires STARTTLS and a certificate that verifies for the MX
 *   name; otherwise the session is not used at all, so nothing is ever sent
 *   in the clear.
 * - Relay (smarthost) mode: every transaction goes to one upstream server with
 *   implicit TLS (port 465, RFC 8314) or STARTTLS, always verified, and AUTH.
 *
 * Outcome per recipient:
 *
 *   what happened                              outcome
 *   RCPT refused                               classifyReply(RCPT reply)
 *   MAIL FROM refused                          classifyReply(MAIL reply), never hard: it is about the sender
 *   DATA or the final dot refused              classifyReply(that reply), hard only with one recipient
 *   2yz after the final dot                    delivered
 *   session lost before the final reply        deferred (other RCPT refusals keep their own outcome)
 *   no session (refused, timeout, greeting,    deferred, connected=false: the caller tries the next MX
 *     TLS required but not possible, AUTH)
 *
 * A reused session that fails before any RCPT got a reply (it died while
 * idle, or the server caps messages per connection with a 421 to MAIL FROM)
 * cannot have delivered anything, so the transaction is retried once on a
 * fresh session instead of deferring.
 */
import { isAscii } from 'node:buffer';
import { isIP } from 'node:net';
import tls from 'node:tls';
import SMTPConnection from 'nodemailer/lib/smtp-connection';
import type { SMTPConnectionEnvelope, SMTPConnectionOptions, SMTPConnectionSendInfo, SMTPEnvelope } from 'nodemailer/lib/smtp-connection';
import { systemClock, type Clock } from '../../lib/clock.js';
import type { DnsResolver } from '../../lib/dns/dns-client.js';
import type { Logger } from '../../lib/logger.js';
import { classifyConnectionFailure, classifyReply, type ReplyCategory } from './classify-reply.js';

export type TlsPolicy = 'OPPORTUNISTIC' | 'ENFORCED';

export interface RelayConfig {
  host: string;
  /** IP to connect to; when absent, host is resolved through options.resolver (never the system resolver). */
  address?: string;
  port: number;
  secure: 'implicit' | 'starttls' | 'none';
  user?: string;
  password?: string;
}

export interface DeliveryTarget {
  /** MX name: TLS servername and the name the certificate must match. */
  host: string;
  /** IP address to connect to. */
  address: string;
  port: number;
}

export interface TransactionRequest {
  /** Envelope sender; "" is the null reverse-path (RFC 5321 §4.5.5). */
  mailFrom: string;
  recipients: string[];
  /** The message as is (already DKIM-signed); CRLF line ends expected, dot-stuffing is done here. */
  message: Buffer;
  tlsPolicy: TlsPolicy;
  /** SIZE= parameter (RFC 1870); defaults to message.length. */
  envelopeSize?: number;
}

export interface RecipientResult {
  recipient: string;
  outcome: 'delivered' | 'deferred' | 'bounced';
  code?: number;
  response: string;
  hardBounce: boolean;
  retryAfterMs?: number;
  /** Why, from the reply classification (for logs and the delivery row). */
  reason?: string;
  /** The classification's category (mailbox-full, policy, ...): a bounce's subType. */
  category?: ReplyCategory;
}

export interface TransactionResult {
  /** false when no SMTP session could be used (connect refused/timeout, 421 greeting, TLS required but unavailable or invalid): the caller tries the next MX host. */
  connected: boolean;
  /** The message went over TLS. */
  secure: boolean;
  remoteHost: string;
  /** "ip:port" actually connected to. */
  remoteAddress?: string;
  /** Connection-level problem: always set when connected is false; also set when the session dropped mid-transaction. */
  error?: string;
  /**
   * Connected, but the host failed the session before it said anything about any recipient:
   * a 421 at any stage, a 4xx to MAIL FROM, a connection dropped before the RCPT replies. Like
   * a refused connection it says nothing about the message (RFC 5321 §5.1): the caller tries
   * the next MX host. Every recipient is then deferred.
   */
  hostFailure?: boolean;
  /**
   * The pool was closed (shutdown) before this transaction got a session: nothing went out and
   * nothing was learnt. The caller puts the work back unattempted instead of recording a deferral.
   */
  notAttempted?: boolean;
  /** One per requested recipient, always, in request order. */
  recipients: RecipientResult[];
}

export interface SmtpClientPoolOptions {
  /** EHLO name (RFC 5321 §4.1.1.1): our FQDN, matching our PTR. */
  heloName: string;
  logger: Logger;
  /** Extra trusted CAs (tests trust their sink's cert); system CAs otherwise. */
  ca?: string | Buffer | (string | Buffer)[];
  /** When set, every transaction goes to it (still with our message as is). */
  relay?: RelayConfig;
  /** Default 5 (ZoneMTA's per-domain default; KumoMTA ships 10). */
  maxConnectionsPerHost?: number;
  /** Global, default 100. */
  maxConnections?: number;
  /** Default 100 (KumoMTA's shipped max_deliveries_per_connection), then QUIT and reconnect. */
  maxMessagesPerConnection?: number;
  /** Close idle pooled connections after this, default 5000 (ZoneMTA's cache TTL). */
  idleTimeoutMs?: number;
  /** TCP connect, default 30 s. */
  connectTimeoutMs?: number;
  /** 220 greeting, default 30 s. */
  greetingTimeoutMs?: number;
  /** Inactivity during a session, default 5 min (RFC 5321 §4.5.3.2 per-command minimums). */
  socketTimeoutMs?: number;
  /**
   * Longest one transaction (MAIL FROM to the reply after the final dot) may take, default
   * 15 min. Inactivity timeouts cannot end a reply that never finishes while bytes keep
   * coming (a tarpit dribbling "250-" continuation lines); this deadline does.
   */
  transactionTimeoutMs?: number;
  /** Only for a relay given by name without address. */
  resolver?: DnsResolver;
  /** Time source for remembering hosts with broken TLS; default the system clock. */
  clock?: Clock;
}

export interface SmtpClientPool {
  /** Every outcome, connection failures included, is a value; it rejects only on a bug. */
  send(target: DeliveryTarget, req: TransactionRequest): Promise<TransactionResult>;
  /** Refuses queued and new sends, lets transactions in flight finish, QUITs every session and waits for the sockets to close. */
  close(): Promise<void>;
  /**
   * Answers every send still waiting for a session `notAttempted` (the caller's shutdown); the
   * pool stays open. Returns how many there were.
   */
  abandonQueued(): number;
  /** connectionsOpened: SMTP sessions established (after EHLO/STARTTLS/AUTH); transactions: MAIL FROM commands issued. */
  readonly stats: { connectionsOpened: number; transactions: number };
}

// ------------------------------------------------------------ constants

const DEFAULT_MAX_CONNECTIONS_PER_HOST = 5;
const DEFAULT_MAX_CONNECTIONS = 100;
const DEFAULT_MAX_MESSAGES_PER_CONNECTION = 100;
const DEFAULT_IDLE_TIMEOUT_MS = 5_000;
const DEFAULT_CONNECT_TIMEOUT_MS = 30_000;
const DEFAULT_GREETING_TIMEOUT_MS = 30_000;
/** RFC 5321 §4.5.3.2.6: 10 minutes for the reply to the final dot, the longest of its waits. */
const DEFAULT_SOCKET_TIMEOUT_MS = 10 * 60_000;
/** RFC 5321 §4.5.3.2's waits for one message add up to about this (MAIL, RCPT, DATA, blocks, the final 10 min). */
const DEFAULT_TRANSACTION_TIMEOUT_MS = 15 * 60_000;
/** How long we wait for the 221 after QUIT before closing anyway (RFC 5321 §4.1.1.10 lets us). */
const QUIT_REPLY_TIMEOUT_MS = 2_000;
/** How long nodemailer waits for the peer's FIN after ours before destroying the socket. */
const SOCKET_CLOSE_TIMEOUT_MS = 2_000;
/** An OPPORTUNISTIC host whose TLS handshake failed gets plaintext directly for this long. */
const BROKEN_TLS_MEMORY_MS = 60 * 60_000;
const MAX_BROKEN_TLS_ENTRIES = 10_000;
/** Idle sessions found dead at RSET before we stop trying idle ones and open a fresh session. */
const MAX_STALE_REUSES = 3;
/** RFC 3207 §4 / RFC 8996: TLS 1.0 and 1.1 are deprecated; ENFORCED means a modern handshake. */
const MIN_TLS_VERSION = 'TLSv1.2';

// ------------------------------------------------------------ internals

/** The error fields nodemailer's SMTPConnection sets (errors.js / _formatError). */
interface SmtpError extends Error {
  code?: string;
  response?: string;
  responseCode?: number;
  command?: string;
  recipient?: string;
  originalCode?: string;
  timeoutType?: string;
}

type TlsPlan =
  | 'opportunistic' // STARTTLS if offered, certificate not required to verify
  | 'plain' // never STARTTLS (fallback after a failed handshake, relay secure=none)
  | 'starttls-verified' // STARTTLS required, certificate must verify (ENFORCED, relay starttls)
  | 'implicit-verified'; // TLS from the first byte (relay secure=implicit)

interface Route {
  /** Limit and reuse key: address:port. */
  key: string;
  /** IP, or for a relay given by name, that name (resolved at connect time). */
  address: string;
  port: number;
  /** Certificate name and remoteHost. */
  host: string;
  relay: boolean;
}

interface PooledConnection {
  id: number;
  key: string;
  conn?: SMTPConnection;
  state: 'opening' | 'busy' | 'idle' | 'closing';
  secure: boolean;
  /** The name the peer's certificate verified for, when it did. */
  verifiedFor?: string;
  remoteAddress?: string;
  transactions: number;
  idleTimer?: NodeJS.Timeout;
  /** Set by the connection's 'end': it can no longer be used. */
  dead: boolean;
  /** First error the connection reported. */
  lastError?: SmtpError;
  /** The first error happened during a STARTTLS/implicit TLS handshake. */
  tlsFailed: boolean;
  /** Resolves once the socket is closed and the slot is free. */
  closed?: Promise<void>;
  /**
   * The last transaction ended with the server's 250 to the message: the server is back in
   * its initial state (RFC 5321 4.1.1.4), so the next transaction needs no RSET first.
   */
  cleanSlate?: boolean;
}

interface OpenFailure {
  message: string;
  /** The pool is closed: no connection was tried. */
  poolClosed?: boolean;
  code?: number;
  response?: string;
  remoteAddress?: string;
}

type Lease = { pc: PooledConnection; fresh: boolean } | { failure: OpenFailure };

interface Waiter {
  route: Route;
  req: TransactionRequest;
  allowIdle: boolean;
  resolve: (lease: Lease) => void;
}

const CERTIFICATE_ERROR = /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|UNABLE_TO_GET_ISSUER|HOSTNAME|ALTNAME/i;
const TLS_ERROR = /TLS|SSL|handshake|CERT|SELF_SIGNED|UNABLE_TO_VERIFY/i;

function positiveInteger(value: number | undefined, fallback: number, what: string): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value <= 0) throw new RangeError(`createSmtpClientPool: ${what} must be a positive integer, got ${value}`);
  return value;
}

function replyCodeOf(response: string | undefined): number | undefined {
  const m = /^(\d{3})/.exec(response ?? '');
  return m ? Number(m[1]) : undefined;
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

/** nodemailer refuses the whole envelope for one address with CR, LF or angle brackets; we refuse only that recipient. */
function invalidAddress(address: string): boolean {
  return /[\r\n<>]/.test(address);
}

/** Resolves once the connection's socket is closed: only then is the slot really free. */
function socketGone(conn: SMTPConnection | undefined): Promise<void> {
  const socket = conn?._socket;
  if (!socket || socket.closed) return Promise.resolve();
  return new Promise((resolve) => socket.once('close', () => resolve()));
}

/**
 * Runs one nodemailer operation and settles on its callback, or on the
 * connection's 'end' when nodemailer forgets the callback (a reply action
 * dropped by close()). nodemailer emits 'end' just before it calls back with
 * the error, so 'end' waits a turn for the callback to win.
 */
function onSession<T>(
  conn: SMTPConnection,
  closedError: () => SmtpError,
  start: (done: (err: SmtpError | null | undefined, value?: T) => void) => void,
): Promise<{ err?: SmtpError; value?: T }> {
  return new Promise((resolve) => {
    let settled = false;
    const onEnd = (): void => {
      setImmediate(() => settle(closedError()));
    };
    const settle = (err: SmtpError | null | undefined, value?: T): void => {
      if (settled) return;
      settled = true;
      conn.off('end', onEnd);
      resolve(err ? { err } : { value: value as T });
    };
    conn.once('end', onEnd);
    try {
      start((err, value) => settle(err, value));
    } catch (err) {
      settle(err as SmtpError);
    }
  });
}

// ------------------------------------------------------------ the pool

export function createSmtpClientPool(opts: SmtpClientPoolOptions): SmtpClientPool {
  const log = opts.logger.child({ component: 'smtp-client-pool' });
  const clock = opts.clock ?? systemClock;
  const maxPerHost = positiveInteger(opts.maxConnectionsPerHost, DEFAULT_MAX_CONNECTIONS_PER_HOST, 'maxConnectionsPerHost');
  const maxTotal = positiveInteger(opts.maxConnections, DEFAULT_MAX_CONNECTIONS, 'maxConnections');
  const maxMessages = positiveInteger(opts.maxMessagesPerConnection, DEFAULT_MAX_MESSAGES_PER_CONNECTION, 'maxMessagesPerConnection');
  const idleTimeoutMs = positiveInteger(opts.idleTimeoutMs, DEFAULT_IDLE_TIMEOUT_MS, 'idleTimeoutMs');
  const connectTimeoutMs = positiveInteger(opts.connectTimeoutMs, DEFAULT_CONNECT_TIMEOUT_MS, 'connectTimeoutMs');
  const greetingTimeoutMs = positiveInteger(opts.greetingTimeoutMs, DEFAULT_GREETING_TIMEOUT_MS, 'greetingTimeoutMs');
  const socketTimeoutMs = positiveInteger(opts.socketTimeoutMs, DEFAULT_SOCKET_TIMEOUT_MS, 'socketTimeoutMs');
  const transactionTimeoutMs = positiveInteger(opts.transactionTimeoutMs, DEFAULT_TRANSACTION_TIMEOUT_MS, 'transactionTimeoutMs');
  const relay = opts.relay;

  // One context for every connection: building one per connection would
  // re-parse the whole CA bundle each time. With extra CAs, Node's bundled
  // roots are added explicitly (passing `ca` replaces the defaults).
  const extraCa = opts.ca === undefined ? [] : Array.isArray(opts.ca) ? opts.ca : [opts.ca];
  const secureContext = tls.createSecureContext({
    minVersion: MIN_TLS_VERSION,
    ...(extraCa.length > 0 ? { ca: [...tls.rootCertificates, ...extraCa] } : {}),
  });

  const stats = { connectionsOpened: 0, transactions: 0 };
  const all = new Set<PooledConnection>();
  const byKey = new Map<string, Set<PooledConnection>>();
  /** Idle sessions per key, most recently used last. */
  const idleByKey = new Map<string, PooledConnection[]>();
  /** Every idle session, least recently idle first (eviction order). */
  const idleLru = new Set<PooledConnection>();
  const queue: Waiter[] = [];
  /** Sessions in 'closing' state, per key and in total: slots that are about to free up. */
  const closingByKey = new Map<string, number>();
  let closingTotal = 0;
  const brokenTls = new Map<string, number>();
  const activeOps = new Set<Promise<unknown>>();
  let nextId = 1;
  let closed = false;
  let closing: Promise<void> | undefined;

  // ---------------------------------------------------------- routes and policy

  function routeFor(target: DeliveryTarget): Route {
    if (relay) {
      const address = relay.address ?? relay.host;
      return { key: `${address}:${relay.port}`, address, port: relay.port, host: relay.host, relay: true };
    }
    return { key: `${target.address}:${target.port}`, address: target.address, port: target.port, host: target.host, relay: false };
  }

  function planFor(route: Route, req: TransactionRequest): TlsPlan {
    if (relay) {
      if (relay.secure === 'implicit') return 'implicit-verified';
      if (relay.secure === 'starttls') return 'starttls-verified';
      return 'plain';
    }
    if (req.tlsPolicy === 'ENFORCED') return 'starttls-verified';
    const until = brokenTls.get(route.key);
    if (until !== undefined && until > clock.nowMs()) return 'plain';
    return 'opportunistic';
  }

  function rememberBrokenTls(key: string): void {
    brokenTls.delete(key);
    brokenTls.set(key, clock.nowMs() + BROKEN_TLS_MEMORY_MS);
    while (brokenTls.size > MAX_BROKEN_TLS_ENTRIES) brokenTls.delete(brokenTls.keys().next().value as string);
  }

  /** Whether an idle session may carry this request. */
  function accepts(pc: PooledConnection, w: Waiter): boolean {
    if (!w.allowIdle || pc.dead) return false;
    if (w.route.relay) return true;
    // ENFORCED needs a session whose certificate verified for this very MX name.
    if (w.req.tlsPolicy === 'ENFORCED') return pc.verifiedFor === w.route.host;
    return true;
  }

  // ---------------------------------------------------------- slots

  function countFor(key: string): number {
    return byKey.get(key)?.size ?? 0;
  }

  function hasRoom(key: string): boolean {
    return countFor(key) < maxPerHost && all.size < maxTotal;
  }

  function addConnection(key: string): PooledConnection {
    const pc: PooledConnection = { id: nextId++, key, state: 'opening', secure: false, transactions: 0, dead: false, tlsFailed: false };
    all.add(pc);
    let set = byKey.get(key);
    if (!set) {
      set = new Set();
      byKey.set(key, set);
    }
    set.add(pc);
    return pc;
  }

  function removeConnection(pc: PooledConnection): void {
    if (!all.has(pc)) return;
    if (pc.state === 'closing') {
      closingTotal--;
      const n = (closingByKey.get(pc.key) ?? 1) - 1;
      if (n > 0) closingByKey.set(pc.key, n);
      else closingByKey.delete(pc.key);
    }
    all.delete(pc);
    const set = byKey.get(pc.key);
    set?.delete(pc);
    if (set && set.size === 0) byKey.delete(pc.key);
    leaveIdle(pc);
  }

  function enterIdle(pc: PooledConnection): void {
    pc.state = 'idle';
    let list = idleByKey.get(pc.key);
    if (!list) {
      list = [];
      idleByKey.set(pc.key, list);
    }
    list.push(pc);
    idleLru.add(pc);
    pc.idleTimer = setTimeout(() => void retire(pc, true), idleTimeoutMs);
    pc.idleTimer.unref();
  }

  function leaveIdle(pc: PooledConnection): void {
    if (pc.idleTimer) clearTimeout(pc.idleTimer);
    pc.idleTimer = undefined;
    idleLru.delete(pc);
    const list = idleByKey.get(pc.key);
    if (!list) return;
    const i = list.indexOf(pc);
    if (i >= 0) list.splice(i, 1);
    if (list.length === 0) idleByKey.delete(pc.key);
  }

  /**
   * Ends a session and frees its slot once the socket is really closed, so the
   * limits hold on the wire too. graceful = QUIT first (RFC 5321 §4.1.1.10).
   */
  function retire(pc: PooledConnection, graceful: boolean): Promise<void> {
    if (pc.closed) return pc.closed;
    pc.state = 'closing';
    closingTotal++;
    closingByKey.set(pc.key, (closingByKey.get(pc.key) ?? 0) + 1);
    leaveIdle(pc);
    const conn = pc.conn;
    let quitTimer: NodeJS.Timeout | undefined;
    if (conn && !conn.destroyed) {
      if (graceful && !pc.dead) {
        conn.quit();
        quitTimer = setTimeout(() => conn.close(), QUIT_REPLY_TIMEOUT_MS);
        quitTimer.unref();
      } else {
        conn.close();
      }
    }
    pc.closed = socketGone(conn).then(() => {
      if (quitTimer) clearTimeout(quitTimer);
      removeConnection(pc);
      log.debug({ connection: pc.id, key: pc.key, transactions: pc.transactions }, 'smtp session closed');
      pump();
    });
    return pc.closed;
  }

  function release(pc: PooledConnection): void {
    const conn = pc.conn;
    const usable = !!conn && !conn.destroyed && !pc.dead;
    if (!usable || closed || pc.transactions >= maxMessages) {
      void retire(pc, usable);
    } else {
      enterIdle(pc);
    }
    pump();
  }

  // ---------------------------------------------------------- the queue

  function takeIdle(w: Waiter): PooledConnection | undefined {
    const list = idleByKey.get(w.route.key);
    if (!list) return undefined;
    // Most recently used first: the surplus ages out through the idle timer.
    for (let i = list.length - 1; i >= 0; i--) {
      const pc = list[i]!;
      if (accepts(pc, w)) {
        leaveIdle(pc);
        pc.state = 'busy';
        return pc;
      }
    }
    return undefined;
  }

  /**
   * Serves waiters in FIFO order: an idle compatible session, else a new one
   * when both limits allow, else (when the limit is full of idle sessions
   * this waiter cannot use) evict the least recently used of those. A waiter
   * that cannot go on keeps its place; later waiters for other hosts may pass.
   */
  function pump(): void {
    const blockedPerKey = new Map<string, number>();
    /**
     * Keys found at their limit with no idle session at all: every later waiter for them is
     * blocked as well (nothing to take, no room, nothing of theirs to evict) and nothing in
     * this pass can change that. Under load hundreds of waiters queue for one MX host, and
     * pump() runs on every finished transaction: skipping them keeps each pass cheap.
     */
    const saturated = new Set<string>();
    let blockedGlobal = 0;
    for (let i = 0; i < queue.length; ) {
      const w = queue[i]!;
      if (saturated.has(w.route.key)) {
        i++;
        continue;
      }
      const idle = takeIdle(w);
      if (idle) {
        queue.splice(i, 1);
        w.resolve({ pc: idle, fresh: false });
        continue;
      }
      if (hasRoom(w.route.key)) {
        queue.splice(i, 1);
        openFor(w);
        continue;
      }
      i++;
      if (countFor(w.route.key) >= maxPerHost) {
        if (!idleByKey.has(w.route.key)) {
          saturated.add(w.route.key);
          continue;
        }
        // Full of this host's sessions: only an idle one of the wrong kind (say
        // plaintext, for an ENFORCED request) can make room.
        const blocked = (blockedPerKey.get(w.route.key) ?? 0) + 1;
        blockedPerKey.set(w.route.key, blocked);
        if ((closingByKey.get(w.route.key) ?? 0) >= blocked) continue;
        const victim = idleByKey.get(w.route.key)?.[0];
        if (victim) void retire(victim, true);
      } else {
        blockedGlobal++;
        if (closingTotal >= blockedGlobal) continue;
        const victim = idleLru.values().next().value as PooledConnection | undefined;
        if (victim) void retire(victim, true);
      }
    }
  }

  function acquire(route: Route, req: TransactionRequest, allowIdle: boolean): Promise<Lease> {
    if (closed) return Promise.resolve({ failure: { message: 'connection pool is closed', poolClosed: true } });
    return new Promise((resolve) => {
      queue.push({ route, req, allowIdle, resolve });
      // A host at its limit with nothing idle: pump() would only walk the queue to pass this
      // waiter by, and nothing else changed. It runs again when one of the host's sessions is
      // released or closes.
      if (countFor(route.key) >= maxPerHost && !idleByKey.has(route.key)) return;
      pump();
    });
  }

  // ---------------------------------------------------------- opening sessions

  function connectionOptions(route: Route, address: string, plan: TlsPlan): SMTPConnectionOptions {
    // SNI must not carry an IP address (RFC 6066 §3); Node then checks the certificate against the IP.
    const servername = isIP(route.host) === 0 ? route.host : undefined;
    const base: SMTPConnectionOptions = {
      host: address,
      port: route.port,
      name: opts.heloName,
      // nodemailer applies one deadline to the whole setup (connect, greeting,
      // STARTTLS), so it gets both budgets; the greeting keeps its own bound.
      connectionTimeout: connectTimeoutMs + greetingTimeoutMs,
      greetingTimeout: greetingTimeoutMs,
      socketTimeout: socketTimeoutMs,
      socketCloseTimeout: SOCKET_CLOSE_TIMEOUT_MS,
      logger: false,
      ...(servername ? { servername } : {}),
    };
    const tlsOptions = (verify: boolean): tls.ConnectionOptions => ({
      secureContext,
      rejectUnauthorized: verify,
      ...(servername ? { servername } : {}),
    });
    switch (plan) {
      case 'opportunistic':
        // opportunisticTLS: a refused STARTTLS command continues in plaintext.
        return { ...base, opportunisticTLS: true, tls: tlsOptions(false) };
      case 'plain':
        return { ...base, ignoreTLS: true };
      case 'starttls-verified':
        // requireTLS sends STARTTLS even when not advertised and fails the session if refused.
        return { ...base, requireTLS: true, tls: tlsOptions(true) };
      case 'implicit-verified':
        return { ...base, secure: true, tls: tlsOptions(true) };
    }
  }

  function closedError(pc: PooledConnection): SmtpError {
    const err: SmtpError = new Error(pc.lastError ? pc.lastError.message : 'Connection closed unexpectedly');
    if (pc.lastError) {
      if (pc.lastError.code !== undefined) err.code = pc.lastError.code;
      if (pc.lastError.response !== undefined) err.response = pc.lastError.response;
      if (pc.lastError.responseCode !== undefined) err.responseCode = pc.lastError.responseCode;
    } else {
      err.code = 'ECONNECTION';
    }
    return err;
  }

  /** One SMTPConnection on the slot: connect, greeting, EHLO, STARTTLS. Returns the error, if any. */
  async function connectOnce(pc: PooledConnection, options: SMTPConnectionOptions): Promise<SmtpError | undefined> {
    const conn = new SMTPConnection(options);
    pc.conn = conn;
    pc.lastError = undefined;
    pc.tlsFailed = false;
    pc.dead = false;
    // Always listen: an EventEmitter 'error' without a listener throws.
    conn.on('error', (err: SmtpError) => {
      if (pc.conn !== conn) return;
      if (!pc.lastError) {
        pc.lastError = err;
        // Implicit TLS fails inside connect, so there the error text tells a handshake from a refused TCP connect.
        pc.tlsFailed =
          conn.upgrading === true ||
          err.code === 'ETLS' ||
          (options.secure === true && conn.stage === 'init' && TLS_ERROR.test(`${err.originalCode ?? ''} ${err.message}`));
      }
      log.debug({ connection: pc.id, key: pc.key, err: err.message, code: err.code }, 'smtp session error');
    });
    conn.once('end', () => {
      if (pc.conn !== conn) return;
      pc.dead = true;
      if (pc.state === 'idle') void retire(pc, false);
    });
    const outcome = await onSession<void>(conn, () => closedError(pc), (done) => conn.connect((err) => done(err)));
    return outcome.err ? (pc.lastError ?? outcome.err) : undefined;
  }

  function describeOpenFailure(err: SmtpError, route: Route, plan: TlsPlan, tlsFailed: boolean): OpenFailure {
    const where = `${route.host} [${route.address}]:${route.port}`;
    const response = err.response ? oneLine(err.response) : undefined;
    const code = err.responseCode;
    const failure = (message: string): OpenFailure => ({ message, ...(code !== undefined ? { code } : {}), ...(response ? { response } : {}) });
    const verified = plan === 'starttls-verified' || plan === 'implicit-verified';
    if (verified && err.command === 'STARTTLS' && response) {
      return failure(`TLS required but ${where} refused STARTTLS (${response}); not sending in plaintext`);
    }
    if (verified && (tlsFailed || CERTIFICATE_ERROR.test(`${err.originalCode ?? ''} ${err.message}`))) {
      const what = CERTIFICATE_ERROR.test(`${err.originalCode ?? ''} ${err.message}`) ? `certificate did not verify for ${route.host}` : 'TLS handshake failed';
      return failure(`TLS required but at ${where} the ${what}: ${err.message}; not sending in plaintext`);
    }
    if (response && code !== undefined) {
      const stage = err.command === 'CONN' || err.command === undefined ? 'greeting' : err.command;
      return failure(`${where} refused the session at ${stage}: ${response}`);
    }
    if (err.code === 'ETIMEDOUT') return failure(`${where}: ${err.timeoutType ?? 'timeout'}: ${err.message}`);
    return failure(`${where}: ${err.message}`);
  }

  async function resolveRelayAddress(route: Route): Promise<string> {
    if (isIP(route.address) !== 0) return route.address;
    const resolver = opts.resolver;
    // Never the system resolver (DESIGN §2: node:dns stays behind lib's resolver).
    if (!resolver) throw new Error('a relay given by name needs relay.address or the pool option resolver');
    const [v4, v6] = await Promise.allSettled([resolver.resolve4(route.address), resolver.resolve6(route.address)]);
    // IPv4 first, as for MX hosts (mx-resolver.ts).
    for (const answer of [v4, v6]) if (answer.status === 'fulfilled' && answer.value.records.length > 0) return answer.value.records[0]!;
    const why = [v4, v6].map((a) => (a.status === 'rejected' ? String((a.reason as Error).message ?? a.reason) : 'no records')).join('; ');
    throw new Error(why);
  }

  async function openSession(pc: PooledConnection, route: Route, req: TransactionRequest): Promise<OpenFailure | undefined> {
    let address: string;
    try {
      address = await resolveRelayAddress(route);
    } catch (err) {
      return { message: `cannot resolve relay ${route.address}: ${err instanceof Error ? err.message : String(err)}` };
    }
    pc.remoteAddress = `${address}:${route.port}`;
    let plan = planFor(route, req);
    let err = await connectOnce(pc, connectionOptions(route, address, plan));
    if (err && plan === 'opportunistic' && pc.tlsFailed) {
      // RFC 7435 §6: a failed upgrade must not make delivery worse than no TLS at all.
      log.warn({ connection: pc.id, key: route.key, host: route.host, err: err.message }, 'STARTTLS handshake failed; retrying in plaintext (opportunistic TLS)');
      rememberBrokenTls(route.key);
      await socketGone(pc.conn);
      plan = 'plain';
      err = await connectOnce(pc, connectionOptions(route, address, plan));
    }
    if (err) {
      const failure = describeOpenFailure(err, route, plan, pc.tlsFailed);
      log.debug({ connection: pc.id, key: route.key, host: route.host, err: failure.message }, 'smtp session could not be opened');
      return failure;
    }
    const conn = pc.conn!;

    if (relay?.user) {
      if (!conn.secure && relay.secure === 'none') {
        log.warn({ relay: relay.host }, 'authenticating to the relay without TLS (relay.secure = none)');
      }
      const auth = await onSession<boolean>(conn, () => closedError(pc), (done) =>
        conn.login({ user: relay.user, pass: relay.password ?? '' }, (e, ok) => done(e, ok)),
      );
      if (auth.err) {
        const response = auth.err.response ? oneLine(auth.err.response) : undefined;
        return {
          message: `relay ${route.host} refused AUTH: ${response ?? auth.err.message}`,
          ...(auth.err.responseCode !== undefined ? { code: auth.err.responseCode } : {}),
          ...(response ? { response } : {}),
        };
      }
    }

    pc.secure = conn.secure;
    const socket = conn._socket;
    if (conn.secure && socket instanceof tls.TLSSocket && socket.authorized) pc.verifiedFor = route.host;
    stats.connectionsOpened++;
    log.debug({ connection: pc.id, key: route.key, host: route.host, secure: pc.secure, verified: pc.verifiedFor !== undefined }, 'smtp session open');
    return undefined;
  }

  function openFor(w: Waiter): void {
    const pc = addConnection(w.route.key);
    openSession(pc, w.route, w.req).then(
      (failure) => {
        if (failure) {
          void retire(pc, true);
          w.resolve({ failure: pc.remoteAddress ? { ...failure, remoteAddress: pc.remoteAddress } : failure });
        } else {
          pc.state = 'busy';
          w.resolve({ pc, fresh: true });
        }
      },
      (err: unknown) => {
        void retire(pc, false);
        w.resolve({ failure: { message: `unexpected error opening a session: ${err instanceof Error ? err.message : String(err)}` } });
      },
    );
  }

  // ---------------------------------------------------------- transactions

  function failedResult(route: Route, req: TransactionRequest, failure: OpenFailure): TransactionResult {
    const verdict = classifyConnectionFailure(failure.message, failure.response);
    return {
      connected: false,
      ...(failure.poolClosed ? { notAttempted: true } : {}),
      secure: false,
      remoteHost: route.host,
      ...(failure.remoteAddress ? { remoteAddress: failure.remoteAddress } : {}),
      error: failure.message,
      recipients: req.recipients.map((recipient) => ({
        recipient,
        outcome: 'deferred' as const,
        ...(failure.code !== undefined ? { code: failure.code } : {}),
        response: failure.response ?? failure.message,
        hardBounce: false,
        ...(verdict.retryAfterMs !== undefined ? { retryAfterMs: verdict.retryAfterMs } : {}),
        reason: verdict.reason,
      })),
    };
  }

  function fromReply(recipient: string, code: number, response: string, opts2: { neverHard?: boolean; mailFrom?: string } = {}): RecipientResult {
    const verdict = classifyReply(code, response, { ...(opts2.mailFrom ? { mailFrom: opts2.mailFrom } : {}), relay: relay !== undefined });
    return {
      recipient,
      outcome: verdict.kind,
      code,
      response: oneLine(response),
      hardBounce: verdict.hardBounce && !opts2.neverHard,
      ...(verdict.retryAfterMs !== undefined ? { retryAfterMs: verdict.retryAfterMs } : {}),
      reason: verdict.reason,
      ...(verdict.category ? { category: verdict.category } : {}),
    };
  }

  interface TransactionOutcome {
    byRecipient: Map<string, RecipientResult>;
    /** The session died during the transaction; why. */
    dropped?: string;
    /**
     * The session failed before any RCPT got a reply (dead socket, or 421 to
     * MAIL FROM from a server that caps messages per connection): no recipient
     * can have received the message, so it is safe to try again at once.
     */
    untouched: boolean;
    /** The server answered the message with 250: the session is ready for the next MAIL FROM. */
    accepted: boolean;
    /** See TransactionResult.hostFailure. */
    hostFailure: boolean;
  }

  async function transact(pc: PooledConnection, req: TransactionRequest, allRecipients: string[]): Promise<TransactionOutcome> {
    const conn = pc.conn!;
    const results = new Map<string, RecipientResult>();
    // RFC 6531 §3.2: an address with a non-ASCII local part needs the server's SMTPUTF8. Without
    // it nodemailer would send the UTF-8 anyway, and the "bad address syntax" (5.1.3) that comes
    // back reads as a dead mailbox: refuse it here, a soft bounce (5.6.7, RFC 6531 §3.5).
    // Domains are always in A-labels (punycode) by now.
    const utf8 = ((conn as unknown as { _supportedExtensions?: string[] })._supportedExtensions ?? []).includes('SMTPUTF8');
    const recipients = utf8 ? allRecipients : allRecipients.filter((r) => isAscii(Buffer.from(r)));
    for (const recipient of allRecipients) {
      if (recipients.includes(recipient)) continue;
      const response = `553 5.6.7 ${pc.remoteAddress ?? 'the server'} does not offer SMTPUTF8, which this non-ASCII address needs`;
      results.set(recipient, { recipient, outcome: 'bounced', code: 553, response, hardBounce: false, reason: `refused locally: ${response}`, category: 'message' });
    }
    // Nothing sent: the session is as clean as before.
    if (recipients.length === 0) return { byRecipient: results, untouched: false, accepted: true, hostFailure: false };
    const envelope: SMTPEnvelope = {
      from: req.mailFrom,
      to: recipients.slice(),
      size: req.envelopeSize ?? req.message.length,
      // RFC 6152: declare BODY=8BITMIME when the message is not 7-bit clean.
      use8BitMime: !isAscii(req.message),
    };
    stats.transactions++;
    pc.transactions++;
    // The deadline ends the session like a dropped connection: every recipient without a
    // final reply is deferred (and may be sent again: the server may have kept the message).
    const deadline = setTimeout(() => {
      const err: SmtpError = new Error(`the transaction took longer than ${transactionTimeoutMs} ms without a final reply; session closed`);
      err.code = 'ETIMEDOUT';
      pc.lastError = err;
      conn.close();
    }, transactionTimeoutMs);
    deadline.unref();
    const outcome = await onSession<SMTPConnectionSendInfo>(conn, () => closedError(pc), (done) => conn.send(envelope, req.message, done)).finally(() =>
      clearTimeout(deadline),
    );
    // nodemailer keeps its per-recipient bookkeeping on the envelope object it was given.
    const tracked = envelope as Partial<SMTPConnectionEnvelope>;
    const rejected = new Map<string, SmtpError>();
    for (const e of (tracked.rejectedErrors ?? []) as SmtpError[]) if (e.recipient !== undefined) rejected.set(e.recipient, e);
    const accepted = new Set(outcome.value?.accepted ?? tracked.accepted ?? []);
    const err = outcome.err;
    let dropped: string | undefined;

    for (const recipient of recipients) {
      const refused = rejected.get(recipient);
      if (err && err.command === 'MAIL FROM') {
        // The sender or the message was refused (SIZE, sender policy); any RCPT
        // replies after it (pipelined) are noise. Never a recipient's hard bounce.
        if (err.responseCode !== undefined && err.response) {
          results.set(recipient, fromReply(recipient, err.responseCode, err.response, { neverHard: true, mailFrom: req.mailFrom }));
        } else {
          // nodemailer's own SIZE check (RFC 1870 §6): the server announced a smaller limit.
          results.set(recipient, fromReply(recipient, 552, `5.3.4 ${err.message}`, { neverHard: true }));
        }
      } else if (refused && refused.responseCode !== undefined && refused.response) {
        results.set(recipient, fromReply(recipient, refused.responseCode, refused.response, { mailFrom: req.mailFrom }));
      } else if (!err && accepted.has(recipient)) {
        const response = outcome.value?.response ?? '250';
        results.set(recipient, { recipient, outcome: 'delivered', code: replyCodeOf(response) ?? 250, response: oneLine(response), hardBounce: false });
      } else if (err && err.command === 'DATA' && err.responseCode !== undefined && err.response && accepted.has(recipient)) {
        // One reply (to DATA or to the final dot) for all accepted recipients,
        // also when the server closes right after it (421). A "user unknown"
        // here cannot say which recipient, so it only suppresses when there was one.
        results.set(recipient, fromReply(recipient, err.responseCode, err.response, { neverHard: accepted.size > 1, mailFrom: req.mailFrom }));
      } else {
        // The session died before this recipient's fate was known: the message
        // was not accepted for it, so it is deferred (and retried later).
        const reason = err ? oneLine(err.response ?? err.message) : 'no reply for this recipient';
        const code = err?.responseCode;
        const verdict = code !== undefined && err?.response ? classifyReply(code, err.response, { mailFrom: req.mailFrom, relay: relay !== undefined }) : classifyConnectionFailure(reason);
        results.set(recipient, {
          recipient,
          outcome: 'deferred',
          ...(code !== undefined ? { code } : {}),
          response: reason,
          hardBounce: false,
          ...(verdict.retryAfterMs !== undefined ? { retryAfterMs: verdict.retryAfterMs } : {}),
          reason: `session lost before the message was accepted: ${reason}`,
        });
        dropped = reason;
      }
    }
    const sessionGone = conn.destroyed || pc.dead;
    if (err && !dropped && sessionGone) dropped = oneLine(err.response ?? err.message);
    const untouched =
      !!err && sessionGone && accepted.size === 0 && rejected.size === 0 && (err.command !== 'MAIL FROM' || err.responseCode === 421);
    // Nothing about any recipient, only about the host: a 4xx to MAIL FROM (the pipelined RCPT
    // replies after it are noise: "503 need MAIL"), but not a 5xx there or nodemailer's own SIZE
    // check (no reply code), which refuse the sender or the message; or no RCPT accepted and every
    // RCPT refusal a 421, with the session gone or closing.
    const mailFromTemporary = err?.command === 'MAIL FROM' && err.responseCode !== undefined && err.responseCode >= 400 && err.responseCode < 500;
    const hostFailure =
      !!err &&
      accepted.size === 0 &&
      (err.command === 'MAIL FROM'
        ? mailFromTemporary
        : [...rejected.values()].every((e) => e.responseCode === 421) && (sessionGone || err.responseCode === 421));
    return { byRecipient: results, ...(dropped ? { dropped } : {}), untouched, accepted: !err && !sessionGone && accepted.size > 0, hostFailure };
  }

  async function deliver(
    route: Route,
    req: TransactionRequest,
    recipients: string[],
  ): Promise<{ result: Omit<TransactionResult, 'recipients'>; byRecipient: Map<string, RecipientResult> } | { failure: OpenFailure }> {
    let allowIdle = true;
    let staleReuses = 0;
    for (;;) {
      const lease = await acquire(route, req, allowIdle);
      if ('failure' in lease) return { failure: lease.failure };
      const pc = lease.pc;
      const conn = pc.conn!;
      if (!lease.fresh && !pc.cleanSlate) {
        // RFC 5321 §4.1.1.5: a clean slate after a transaction that did not end with the
        // message accepted. After one that did, the RSET round trip was a third of the
        // session's round trips under load (pipelined MAIL/RCPT/DATA, then the message);
        // a session that died while idle then fails the next MAIL FROM untouched, and the
        // message is tried again on a fresh one (below).
        const reset = await onSession<boolean>(conn, () => closedError(pc), (done) => conn.reset((e, ok) => done(e, ok)));
        if (reset.err) {
          log.debug({ connection: pc.id, key: pc.key, err: reset.err.message }, 'idle smtp session is stale; trying another');
          void retire(pc, false);
          if (++staleReuses >= MAX_STALE_REUSES) allowIdle = false;
          continue;
        }
      }
      const outcome = await transact(pc, req, recipients);
      pc.cleanSlate = outcome.accepted;
      release(pc);
      if (!lease.fresh && outcome.untouched) {
        // A reused session that died under us (or a server that caps messages
        // per connection with 421) says nothing about this message: once more,
        // on a session of its own.
        log.debug({ connection: pc.id, key: pc.key, why: outcome.dropped }, 'reused smtp session failed before any reply; retrying on a fresh one');
        allowIdle = false;
        continue;
      }
      const result: Omit<TransactionResult, 'recipients'> = {
        connected: true,
        secure: conn.secure,
        remoteHost: route.host,
        ...(pc.remoteAddress ? { remoteAddress: pc.remoteAddress } : {}),
        ...(outcome.dropped ? { error: `session lost during the transaction: ${outcome.dropped}` } : {}),
        ...(outcome.hostFailure ? { hostFailure: true } : {}),
      };
      return { result, byRecipient: outcome.byRecipient };
    }
  }

  async function send(target: DeliveryTarget, req: TransactionRequest): Promise<TransactionResult> {
    const route = routeFor(target);
    if (closed) return failedResult(route, req, { message: 'connection pool is closed', poolClosed: true });
    if (relay && relay.secure === 'none' && req.tlsPolicy === 'ENFORCED') {
      return failedResult(route, req, { message: `TLS policy ENFORCED but relay ${relay.host} is configured without TLS; not sending in plaintext` });
    }
    const local = new Map<string, RecipientResult>();
    const invalidSender = invalidAddress(req.mailFrom);
    for (const recipient of req.recipients) {
      if (invalidSender || recipient.trim() === '' || invalidAddress(recipient)) {
        local.set(recipient, {
          recipient,
          outcome: 'bounced',
          response: invalidSender ? 'invalid envelope sender' : 'invalid recipient address',
          hardBounce: false,
          reason: 'refused locally: the address cannot be written into an SMTP command',
        });
      }
    }
    // nodemailer trims addresses; one RCPT per distinct address.
    const toSend = [...new Set(req.recipients.filter((r) => !local.has(r)).map((r) => r.trim()))];
    const base = { connected: true, secure: false, remoteHost: route.host };
    if (toSend.length === 0) {
      return { ...base, recipients: req.recipients.map((r) => ({ ...local.get(r)! })) };
    }

    const op = deliver(route, req, toSend);
    activeOps.add(op);
    try {
      const done = await op;
      if ('failure' in done) {
        const failed = failedResult(route, req, done.failure);
        // Locally refused addresses keep their bounce; the rest wait for another host or a retry.
        return { ...failed, recipients: failed.recipients.map((r) => local.get(r.recipient) ?? r) };
      }
      return {
        ...done.result,
        recipients: req.recipients.map((r) => ({ ...(local.get(r) ?? done.byRecipient.get(r.trim())!), recipient: r })),
      };
    } finally {
      activeOps.delete(op);
    }
  }

  function abandonQueued(): number {
    const waiting = queue.splice(0);
    for (const w of waiting) w.resolve({ failure: { message: 'not attempted: the delivery engine is stopping', poolClosed: true } });
    return waiting.length;
  }

  async function close(): Promise<void> {
    closing ??= (async () => {
      closed = true;
      // Waiters for a busy host would otherwise wait for the transactions ahead of them (each up
      // to the transaction timeout): at shutdown they go back to their callers unattempted.
      for (const w of queue.splice(0)) w.resolve({ failure: { message: 'connection pool is closed', poolClosed: true } });
      // Transactions in flight finish (bounded by socketTimeoutMs); their sessions then retire.
      await Promise.allSettled([...activeOps]);
      for (const pc of [...all]) if (pc.state === 'idle') void retire(pc, true);
      await Promise.all([...all].map((pc) => pc.closed ?? retire(pc, false)));
    })();
    return closing;
  }

  return { send, close, abandonQueued, stats };
}
