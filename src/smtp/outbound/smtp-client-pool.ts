/**
 * Outbound SMTP sessions (RFC 5321), pooled and reused, with per-destination
 * and global connection limits. One send() = one mail transaction; opening a
 * session and the TLS policy are in smtp-session.ts, the transaction and its
 * per-recipient results in smtp-transaction.ts. This file is the pool:
 *
 * - Reuse (ZoneMTA's connection cache, KumoMTA's max_deliveries_per_connection):
 *   an idle session is reused after RSET (RFC 5321 §4.1.1.5) up to
 *   maxMessagesPerConnection transactions, then QUIT; idle sessions are
 *   closed after idleTimeoutMs.
 * - Limits: at most maxConnectionsPerHost per address:port and maxConnections
 *   in total, counted from the first SYN until the socket is closed. Requests
 *   over a limit wait in one FIFO queue; a waiter blocked only by the global
 *   limit may evict an idle session of another destination.
 */
import type { TlsVerdict } from '../../core/tls-reports/tls-verdict.js';
import { systemClock } from '../../lib/clock.js';
import type { DeliveryTarget, OpenFailure, PooledConnection, RecipientResult, Route, SmtpClientPool, SmtpClientPoolOptions, TlsObservation, TransactionRequest, TransactionResult } from './smtp-client-types.js';
import { closedError, createSecureContext, onSession, openSession, relayRefusal, routeFor, sessionTrace, socketGone, type SessionContext } from './smtp-session.js';
import { failedResult, refusedLocally, transact, type TransactionContext } from './smtp-transaction.js';

export type {
  DeliveryTarget,
  RecipientResult,
  RelayConfig,
  SmtpClientPool,
  SmtpClientPoolOptions,
  TlsPolicy,
  TransactionRequest,
  TransactionResult,
} from './smtp-client-types.js';

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
/** Idle sessions found dead at RSET before we stop trying idle ones and open a fresh session. */
const MAX_STALE_REUSES = 3;
/** A destination at its cluster-wide limit is asked again after this (other nodes' sessions close unseen). */
const PERMIT_RETRY_MS = 250;

// ------------------------------------------------------------ internals

type Lease = { pc: PooledConnection; fresh: boolean } | { failure: OpenFailure };

interface Waiter {
  route: Route;
  req: TransactionRequest;
  allowIdle: boolean;
  resolve: (lease: Lease) => void;
}

function positiveInteger(value: number | undefined, fallback: number, what: string): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value <= 0) throw new RangeError(`createSmtpClientPool: ${what} must be a positive integer, got ${value}`);
  return value;
}

/**
 * What a session saw of TLS, for the MX name a request goes to: sessions are shared by address,
 * and a certificate valid for one name of it need not be valid for another.
 */
function observationFor(pc: PooledConnection, host: string): TlsObservation | undefined {
  const o = pc.observation;
  if (!o || o.host === host) return o;
  return o.forHost ? o.forHost(host) : { ...o, host };
}

/** The verdict of a transaction, marked when its connection was already counted for the policy domain. */
function oncePerSession(pc: PooledConnection, verdict: TlsVerdict): TlsVerdict {
  const counted = (pc.reportedFor ??= new Set());
  if (counted.has(verdict.policy.domain)) return { ...verdict, sessionCounted: true };
  counted.add(verdict.policy.domain);
  return verdict;
}

/** Whether an idle session may carry this request. */
function accepts(pc: PooledConnection, w: Waiter): boolean {
  if (!w.allowIdle || pc.dead) return false;
  // Sessions count against the shaping of one (source, rollup): never lent to another.
  if (pc.shape?.key !== w.req.shape?.key) return false;
  if (w.route.relay) return true;
  const transport = w.req.transport;
  if (transport) {
    const observation = observationFor(pc, w.route.host);
    return !!observation && (pc.secure || !transport.requireTls) && transport.judge(observation).proceed;
  }
  // ENFORCED needs a session whose certificate verified for this very MX name.
  if (w.req.tlsPolicy === 'ENFORCED') return pc.verifiedFor === w.route.host;
  return true;
}

// ------------------------------------------------------------ the pool

export function createSmtpClientPool(options: SmtpClientPoolOptions): SmtpClientPool {
  const log = options.logger.child({ component: 'smtp-client-pool' });
  const maxPerHost = positiveInteger(options.maxConnectionsPerHost, DEFAULT_MAX_CONNECTIONS_PER_HOST, 'maxConnectionsPerHost');
  const maxTotal = positiveInteger(options.maxConnections, DEFAULT_MAX_CONNECTIONS, 'maxConnections');
  const maxMessages = positiveInteger(options.maxMessagesPerConnection, DEFAULT_MAX_MESSAGES_PER_CONNECTION, 'maxMessagesPerConnection');
  const idleTimeoutMs = positiveInteger(options.idleTimeoutMs, DEFAULT_IDLE_TIMEOUT_MS, 'idleTimeoutMs');
  const connectTimeoutMs = positiveInteger(options.connectTimeoutMs, DEFAULT_CONNECT_TIMEOUT_MS, 'connectTimeoutMs');
  const greetingTimeoutMs = positiveInteger(options.greetingTimeoutMs, DEFAULT_GREETING_TIMEOUT_MS, 'greetingTimeoutMs');
  const socketTimeoutMs = positiveInteger(options.socketTimeoutMs, DEFAULT_SOCKET_TIMEOUT_MS, 'socketTimeoutMs');
  const transactionTimeoutMs = positiveInteger(options.transactionTimeoutMs, DEFAULT_TRANSACTION_TIMEOUT_MS, 'transactionTimeoutMs');
  const relay = options.relay;
  const permits = options.connectionPermits;
  /** Destinations whose cluster-wide limit is reached: their waiters wait for the retry timer. */
  const clusterFull = new Set<string>();

  const stats = { connectionsOpened: 0, transactions: 0 };
  const sessions: SessionContext = {
    heloName: options.heloName,
    log,
    clock: options.clock ?? systemClock,
    relay,
    resolver: options.resolver,
    secureContext: createSecureContext(options.ca),
    connectTimeoutMs,
    greetingTimeoutMs,
    socketTimeoutMs,
    traces: options.traces ?? false,
    brokenTls: new Map(),
    stats,
    onConnectionEnd: (pc) => {
      if (pc.state === 'idle') void retire(pc, false);
    },
    ...(options.onConnectOutcome ? { onConnectOutcome: options.onConnectOutcome } : {}),
  };
  const transactions: TransactionContext = { relay: relay !== undefined, transactionTimeoutMs, stats };

  const all = new Set<PooledConnection>();
  const byKey = new Map<string, Set<PooledConnection>>();
  /** Idle sessions per key, most recently used last. */
  const idleByKey = new Map<string, PooledConnection[]>();
  /** Every idle session, least recently idle first (eviction order). */
  const idleLru = new Set<PooledConnection>();
  const queue: Waiter[] = [];
  /** Sessions per shaping key (source, rollup) with a connection limit or session limits. */
  const byShape = new Map<string, number>();
  /** Sessions in 'closing' state, per key and in total: slots that are about to free up. */
  const closingByKey = new Map<string, number>();
  let closingTotal = 0;
  const activeOps = new Set<Promise<unknown>>();
  let nextId = 1;
  let closed = false;
  let closing: Promise<void> | undefined;

  // ---------------------------------------------------------- slots

  function countFor(key: string): number {
    return byKey.get(key)?.size ?? 0;
  }

  function hasRoom(key: string): boolean {
    return countFor(key) < maxPerHost && all.size < maxTotal;
  }

  /** Whether the request's (source, rollup) may open another session. */
  function shapeRoom(req: TransactionRequest): boolean {
    const shape = req.shape;
    return !shape?.connectionLimit || (byShape.get(shape.key) ?? 0) < shape.connectionLimit;
  }

  function addConnection(key: string, shape: TransactionRequest['shape']): PooledConnection {
    const pc: PooledConnection = { id: nextId++, key, state: 'opening', secure: false, transactions: 0, dead: false, tlsFailed: false, ...(shape ? { shape } : {}) };
    if (shape) byShape.set(shape.key, (byShape.get(shape.key) ?? 0) + 1);
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
    for (const key of pc.permits ?? []) permits?.release(key);
    pc.permits = undefined;
    if (pc.shape) {
      const n = (byShape.get(pc.shape.key) ?? 1) - 1;
      if (n > 0) byShape.set(pc.shape.key, n);
      else byShape.delete(pc.shape.key);
    }
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
    pc.idleTimer = setTimeout(() => void retire(pc, true), pc.shape?.idleTimeoutMs ?? idleTimeoutMs);
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
    if (!usable || closed || pc.transactions >= (pc.shape?.maxDeliveriesPerConnection ?? maxMessages)) {
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
    /** Shaping keys an idle session was evicted for in this pass (one each is enough). */
    const shapeEvicted = new Set<string>();
    for (let i = 0; i < queue.length; ) {
      const w = queue[i]!;
      if (saturated.has(w.route.key) || clusterFull.has(w.route.key)) {
        i++;
        continue;
      }
      const idle = takeIdle(w);
      if (idle) {
        queue.splice(i, 1);
        w.resolve({ pc: idle, fresh: false });
        continue;
      }
      if (!shapeRoom(w.req)) {
        // The (source, rollup) is at its connection limit: only an idle session of it for
        // another MX address can make room; its slots free up as its sessions end.
        i++;
        const shapeKey = w.req.shape!.key;
        if (!shapeEvicted.has(shapeKey)) {
          shapeEvicted.add(shapeKey);
          for (const pc of idleLru) {
            if (pc.shape?.key === shapeKey) {
              void retire(pc, true);
              break;
            }
          }
        }
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

  function openFor(w: Waiter): void {
    const pc = addConnection(w.route.key, w.req.shape);
    if (!permits) return startSession(pc, w);
    takePermits(w).then(
      (held) => {
        if (held && !closed) {
          pc.permits = held;
          return startSession(pc, w);
        }
        for (const key of held ?? []) permits.release(key);
        removeConnection(pc);
        if (closed) return w.resolve({ failure: { message: 'connection pool is closed', poolClosed: true } });
        // The cluster has all the sessions this destination (or this source's rollup) may
        // have: back at the head of the line, and the destination is asked again shortly.
        queue.unshift(w);
        if (!clusterFull.has(w.route.key)) {
          clusterFull.add(w.route.key);
          setTimeout(() => {
            clusterFull.delete(w.route.key);
            pump();
          }, PERMIT_RETRY_MS).unref();
        }
        pump();
      },
      (err: unknown) => {
        removeConnection(pc);
        w.resolve({ failure: { message: `no connection permit: ${err instanceof Error ? err.message : String(err)}` } });
      },
    );
  }

  /**
   * The cluster's permits a new session needs: its destination's (maxConnectionsPerHost) and,
   * when its (source, rollup) has a connection limit, that one's. All or none.
   */
  async function takePermits(w: Waiter): Promise<string[] | undefined> {
    if (!(await permits!.acquire(w.route.key, maxPerHost))) return undefined;
    const shape = w.req.shape;
    if (!shape?.connectionLimit) return [w.route.key];
    // (source NUL rollup: PostgreSQL text holds no NUL)
    const shapeKey = `shape ${shape.key.replace(/\u0000/g, ' ')}`;
    if (await permits!.acquire(shapeKey, shape.connectionLimit)) return [w.route.key, shapeKey];
    permits!.release(w.route.key);
    return undefined;
  }

  function startSession(pc: PooledConnection, w: Waiter): void {
    openSession(sessions, pc, w.route, w.req).then(
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

  // ---------------------------------------------------------- sending

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
      pc.transcript?.beginTransaction();
      const outcome = await transact(transactions, pc, req, recipients);
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
        transactionStarted: outcome.started,
        secure: conn.secure,
        remoteHost: route.host,
        ...(pc.remoteAddress ? { remoteAddress: pc.remoteAddress } : {}),
        ...(outcome.dropped ? { error: `session lost during the transaction: ${outcome.dropped}` } : {}),
        ...(outcome.hostFailure ? { hostFailure: true } : {}),
        ...(pc.transcript ? { trace: sessionTrace(pc, route) } : {}),
        ...(req.transport && pc.observation && !route.relay ? { tls: oncePerSession(pc, req.transport.judge(observationFor(pc, route.host)!).verdict) } : {}),
      };
      return { result, byRecipient: outcome.byRecipient };
    }
  }

  async function send(target: DeliveryTarget, req: TransactionRequest): Promise<TransactionResult> {
    const route = routeFor(relay, target, req.source, options.heloName);
    if (closed) return failedResult(route, req, { message: 'connection pool is closed', poolClosed: true });
    const refusal = relayRefusal(relay, req);
    if (refusal) return failedResult(route, req, { message: refusal });
    const local = refusedLocally(req);
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

  function openByHost(): Map<string, number> {
    const out = new Map<string, number>();
    for (const pc of all) if (pc.host && (pc.state === 'busy' || pc.state === 'idle')) out.set(pc.host, (out.get(pc.host) ?? 0) + 1);
    return out;
  }

  return { send, close, abandonQueued, stats, openByHost };
}
