/**
 * Opening an outbound SMTP session (RFC 5321) on a pool slot: connect, 220 greeting, EHLO,
 * STARTTLS (RFC 3207) as the TLS policy says, AUTH for a relay. The client is nodemailer's
 * low-level SMTPConnection.
 *
 * - TLS policy: OPPORTUNISTIC uses STARTTLS when offered without insisting on
 *   a valid certificate (RFC 7435: any encryption beats none) and, when the
 *   handshake itself fails, reconnects once in plaintext (Postal, ZoneMTA,
 *   KumoMTA's opportunistic_tls_reconnect_on_failed_handshake), remembering the
 *   host for a while (Haraka's "TLS NO-GO", KumoMTA's remember_broken_tls).
 *   ENFORCED requires STARTTLS and a certificate that verifies for the MX
 *   name; otherwise the session is not used at all, so nothing is ever sent
 *   in the clear.
 * - A TransportRequirement (MTA-STS, DANE: transport-policy.ts) replaces the domain's policy:
 *   STARTTLS is mandatory or opportunistic as it says, the handshake accepts any certificate,
 *   and the requirement judges what the session saw (Node's PKIX verdict for the MX name, the
 *   peer's chain) before MAIL FROM. A session it refuses is closed unused.
 * - Relay (smarthost) mode: every transaction goes to one upstream server with
 *   implicit TLS (port 465, RFC 8314) or STARTTLS, always verified, and AUTH.
 */
import { X509Certificate } from 'node:crypto';
import { isIP } from 'node:net';
import tls from 'node:tls';
import SMTPConnection from 'nodemailer/lib/smtp-connection';
import type { SMTPConnectionOptions } from 'nodemailer/lib/smtp-connection';
import type { ConnectOutcome } from '../../core/operators/port25-watch.js';
import type { Clock } from '../../lib/clock.js';
import type { DnsResolver } from '../../lib/dns/dns-client.js';
import type { Logger } from '../../lib/logger.js';
import type { DeliveryTarget, EgressSourceRef, OpenFailure, PooledConnection, RelayConfig, Route, SmtpClientPool, SmtpError, TlsObservation, TransactionRequest } from './smtp-client-types.js';
import { SmtpTranscript, tlsInfoOf, type SessionTrace } from './smtp-transcript.js';
import { installDataStreamFastPath } from './data-stream-fast-path.js';

installDataStreamFastPath();

/** How long nodemailer waits for the peer's FIN after ours before destroying the socket. */
const SOCKET_CLOSE_TIMEOUT_MS = 2_000;
/** An OPPORTUNISTIC host whose TLS handshake failed gets plaintext directly for this long. */
const BROKEN_TLS_MEMORY_MS = 60 * 60_000;
const MAX_BROKEN_TLS_ENTRIES = 10_000;
/** RFC 3207 §4 / RFC 8996: TLS 1.0 and 1.1 are deprecated; ENFORCED means a modern handshake. */
const MIN_TLS_VERSION = 'TLSv1.2';

/** Node's authorizationError when the chain verified but the certificate does not name the host. */
const NAME_MISMATCH = 'ERR_TLS_CERT_ALTNAME_INVALID';
/** A chain that verified, for a name found only in the subject's CN: invalid for every name. */
const NO_ALTNAME = 'ERR_TLS_CERT_ALTNAME_MISSING';
const CERTIFICATE_ERROR = /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|UNABLE_TO_GET_ISSUER|HOSTNAME|ALTNAME/i;
const TLS_ERROR = /TLS|SSL|handshake|CERT|SELF_SIGNED|UNABLE_TO_VERIFY/i;

type TlsPlan =
  | 'opportunistic' // STARTTLS if offered, certificate not required to verify
  | 'plain' // never STARTTLS (fallback after a failed handshake, relay secure=none)
  | 'starttls-verified' // STARTTLS required, certificate must verify (ENFORCED, relay starttls)
  | 'starttls-judged' // STARTTLS required, the request's TransportRequirement judges the certificate
  | 'implicit-verified'; // TLS from the first byte (relay secure=implicit)

/** What opening sessions needs from the pool: its settings, and state shared by all its sessions. */
export interface SessionContext {
  /** EHLO name. */
  readonly heloName: string;
  readonly log: Logger;
  readonly clock: Clock;
  readonly relay: RelayConfig | undefined;
  /** Resolves a relay given by name without address. */
  readonly resolver: DnsResolver | undefined;
  /** From createSecureContext(), one for every connection. */
  readonly secureContext: tls.SecureContext;
  readonly connectTimeoutMs: number;
  readonly greetingTimeoutMs: number;
  readonly socketTimeoutMs: number;
  /** Keep a transcript of every session for the operator's trace. */
  readonly traces: boolean;
  /** Hosts whose STARTTLS handshake failed: route key -> until when they get plaintext directly. */
  readonly brokenTls: Map<string, number>;
  readonly stats: Pick<SmtpClientPool['stats'], 'connectionsOpened'>;
  /** The connection of a slot ended (closed by the peer, or after an error): the pool decides what that means for the slot. */
  readonly onConnectionEnd: (pc: PooledConnection) => void;
  /** Each new direct connection's TCP outcome (never with a relay): the port 25 watch. */
  readonly onConnectOutcome?: (o: ConnectOutcome) => void;
}

/**
 * One context for every connection: building one per connection would
 * re-parse the whole CA bundle each time. With extra CAs, Node's bundled
 * roots are added explicitly (passing `ca` replaces the defaults).
 */
export function createSecureContext(ca: string | Buffer | (string | Buffer)[] | undefined): tls.SecureContext {
  const extraCa = ca === undefined ? [] : Array.isArray(ca) ? ca : [ca];
  return tls.createSecureContext({
    minVersion: MIN_TLS_VERSION,
    ...(extraCa.length > 0 ? { ca: [...tls.rootCertificates, ...extraCa] } : {}),
  });
}

export function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

/** Resolves once the connection's socket is closed: only then is the slot really free. */
export function socketGone(conn: SMTPConnection | undefined): Promise<void> {
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
export function onSession<T>(
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

/** The error for an operation the connection's end cut short: the connection's first error, if it had one. */
export function closedError(pc: PooledConnection): SmtpError {
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

// ------------------------------------------------------------ routes and policy

export function routeFor(relay: RelayConfig | undefined, target: DeliveryTarget, source?: EgressSourceRef, heloName?: string): Route {
  // Sessions from another local address or greeting with another name are never shared, so a
  // source other than the plain default one is part of the reuse key.
  const own = source && (source.localAddress || source.ehloName !== heloName);
  const suffix = own ? `|${source.name}` : '';
  const from = own ? { ...(source.localAddress ? { localAddress: source.localAddress } : {}), ehloName: source.ehloName } : {};
  if (relay) {
    const address = relay.address ?? relay.host;
    return { key: `${address}:${relay.port}${suffix}`, address, port: relay.port, host: relay.host, relay: true, ...from };
  }
  return { key: `${target.address}:${target.port}${suffix}`, address: target.address, port: target.port, host: target.host, relay: false, ...from };
}

/** Why this request may not go to the relay at all, when it may not. */
export function relayRefusal(relay: RelayConfig | undefined, req: TransactionRequest): string | undefined {
  if (relay && relay.secure === 'none' && req.tlsPolicy === 'ENFORCED') {
    return `TLS policy ENFORCED but relay ${relay.host} is configured without TLS; not sending in plaintext`;
  }
  return undefined;
}

function planFor(ctx: SessionContext, route: Route, req: TransactionRequest): TlsPlan {
  const relay = ctx.relay;
  if (relay) {
    if (relay.secure === 'implicit') return 'implicit-verified';
    if (relay.secure === 'starttls') return 'starttls-verified';
    return 'plain';
  }
  if (req.transport?.requireTls) return 'starttls-judged';
  if (!req.transport && req.tlsPolicy === 'ENFORCED') return 'starttls-verified';
  const until = ctx.brokenTls.get(route.key);
  if (until !== undefined && until > ctx.clock.nowMs()) return 'plain';
  return 'opportunistic';
}

function rememberBrokenTls(ctx: SessionContext, key: string): void {
  const brokenTls = ctx.brokenTls;
  brokenTls.delete(key);
  brokenTls.set(key, ctx.clock.nowMs() + BROKEN_TLS_MEMORY_MS);
  while (brokenTls.size > MAX_BROKEN_TLS_ENTRIES) brokenTls.delete(brokenTls.keys().next().value as string);
}

// ------------------------------------------------------------ opening

function connectionOptions(ctx: SessionContext, route: Route, address: string, plan: TlsPlan): SMTPConnectionOptions {
  // SNI must not carry an IP address (RFC 6066 §3); Node then checks the certificate against the IP.
  const servername = isIP(route.host) === 0 ? route.host : undefined;
  const base: SMTPConnectionOptions = {
    host: address,
    port: route.port,
    name: route.ehloName ?? ctx.heloName,
    ...(route.localAddress ? { localAddress: route.localAddress } : {}),
    // nodemailer applies one deadline to the whole setup (connect, greeting,
    // STARTTLS), so it gets both budgets; the greeting keeps its own bound.
    connectionTimeout: ctx.connectTimeoutMs + ctx.greetingTimeoutMs,
    greetingTimeout: ctx.greetingTimeoutMs,
    socketTimeout: ctx.socketTimeoutMs,
    socketCloseTimeout: SOCKET_CLOSE_TIMEOUT_MS,
    logger: false,
    ...(servername ? { servername } : {}),
  };
  const tlsOptions = (verify: boolean): tls.ConnectionOptions => ({
    secureContext: ctx.secureContext,
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
    case 'starttls-judged':
      // Node still computes its PKIX verdict (socket.authorized); the requirement decides.
      return { ...base, requireTLS: true, tls: tlsOptions(false) };
    case 'implicit-verified':
      return { ...base, secure: true, tls: tlsOptions(true) };
  }
}

/** One SMTPConnection on the slot: connect, greeting, EHLO, STARTTLS. Returns the error, if any. */
async function connectOnce(ctx: SessionContext, pc: PooledConnection, options: SMTPConnectionOptions): Promise<SmtpError | undefined> {
  pc.transcript?.note(`connecting to ${options.host}:${options.port}${options.localAddress ? ` from ${options.localAddress}` : ''}${options.secure ? ' (implicit TLS)' : ''}`);
  // transactionLog reports commands and replies, never the message body, AUTH arguments masked.
  const conn = new SMTPConnection(pc.transcript ? { ...options, logger: pc.transcript.logger as never, transactionLog: true } : options);
  pc.conn = conn;
  pc.lastError = undefined;
  pc.tlsFailed = false;
  pc.starttlsCut = false;
  pc.dead = false;
  // Always listen: an EventEmitter 'error' without a listener throws.
  conn.on('error', (err: SmtpError) => {
    if (pc.conn !== conn) return;
    if (!pc.lastError) {
      pc.lastError = err;
      pc.starttlsCut = !err.response && awaitingStarttls(conn);
      // Implicit TLS fails inside connect, so there the error text tells a handshake from a refused TCP connect.
      pc.tlsFailed =
        conn.upgrading === true ||
        err.code === 'ETLS' ||
        (options.secure === true && conn.stage === 'init' && TLS_ERROR.test(`${err.originalCode ?? ''} ${err.message}`));
    }
    ctx.log.debug({ connection: pc.id, key: pc.key, err: err.message, code: err.code }, 'smtp session error');
  });
  conn.once('end', () => {
    if (pc.conn !== conn) return;
    pc.dead = true;
    ctx.onConnectionEnd(pc);
  });
  const outcome = await onSession<void>(conn, () => closedError(pc), (done) => conn.connect((err) => done(err)));
  return outcome.err ? (pc.lastError ?? outcome.err) : undefined;
}

/**
 * Why a connection never got through at the TCP level, in plain words; undefined when it did (a
 * reply, even a refusal, or none: a greeting timeout reached the server) or failed for another
 * reason (a local address that is not ours, say). What the port 25 watch counts (port25-watch.ts).
 */
export function unreachedReason(err: SmtpError | undefined, stage: string | undefined): string | undefined {
  // nodemailer leaves 'init' once the TCP connection is up (before the greeting).
  if (!err || stage !== 'init') return undefined;
  if (err.code === 'ETIMEDOUT' && err.timeoutType === 'CONNECT_TIMEOUT') return 'connect timeout';
  switch (err.originalCode ?? err.code) {
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'EHOSTUNREACH':
      return 'host unreachable';
    case 'ENETUNREACH':
      return 'network unreachable';
    case 'ETIMEDOUT': // the kernel gave up on the SYN before our timer did
      return 'connect timeout';
    case 'EPERM': // a firewall rule on this host (iptables OUTPUT ... REJECT/DROP)
    case 'EACCES':
      return 'connect not permitted by this host';
    default:
      return undefined;
  }
}

/** Tells the port 25 watch what the first connection of a direct session came to. */
function reportConnect(ctx: SessionContext, pc: PooledConnection, route: Route, address: string, req: TransactionRequest, err: SmtpError | undefined): void {
  if (!ctx.onConnectOutcome || ctx.relay) return;
  const stage = pc.conn?.stage;
  if (!err || stage !== 'init') return ctx.onConnectOutcome({ reached: true, host: route.host, address });
  const why = unreachedReason(err, stage);
  if (!why) return;
  const rcpt = req.recipients[0];
  const domain = rcpt?.includes('@') ? rcpt.slice(rcpt.lastIndexOf('@') + 1) : undefined;
  ctx.onConnectOutcome({ reached: false, host: route.host, address, error: why, ...(domain ? { domain } : {}) });
}

function describeOpenFailure(err: SmtpError, route: Route, plan: TlsPlan, tlsFailed: boolean): OpenFailure {
  const where = `${route.host} [${route.address}]:${route.port}`;
  const response = err.response ? oneLine(err.response) : undefined;
  const code = err.responseCode;
  const failure = (message: string): OpenFailure => ({ message, ...(code !== undefined ? { code } : {}), ...(response ? { response } : {}) });
  const verified = plan === 'starttls-verified' || plan === 'implicit-verified' || plan === 'starttls-judged';
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

async function resolveRelayAddress(ctx: SessionContext, route: Route): Promise<string> {
  if (isIP(route.address) !== 0) return route.address;
  const resolver = ctx.resolver;
  // Never the system resolver (architecture.md, Layers: node:dns stays behind lib's resolver).
  if (!resolver) throw new Error('a relay given by name needs relay.address or the pool option resolver');
  const [v4, v6] = await Promise.allSettled([resolver.resolve4(route.address), resolver.resolve6(route.address)]);
  // IPv4 first, as for MX hosts (mx-resolver.ts).
  for (const answer of [v4, v6]) if (answer.status === 'fulfilled' && answer.value.records.length > 0) return answer.value.records[0]!;
  const why = [v4, v6].map((a) => (a.status === 'rejected' ? String((a.reason as Error).message ?? a.reason) : 'no records')).join('; ');
  throw new Error(why);
}

/** What a session that is up saw of TLS, for a TransportRequirement. */
function observe(conn: SMTPConnection, route: Route, address: string, plan: TlsPlan): TlsObservation {
  const socket = conn._socket;
  const localIp = socket ? socket.localAddress : undefined;
  const base = { host: route.host, remoteIp: address, ...(localIp ? { localIp } : {}) };
  if (!conn.secure || !(socket instanceof tls.TLSSocket)) {
    // 'plain' is only ever chosen after a failed handshake (now, or remembered from before).
    return { ...base, secure: false, tlsFailure: plan === 'plain' ? 'handshake-failed' : 'not-offered' };
  }
  let chain: X509Certificate[] | undefined;
  const pkixError = socket.authorized ? (hasDnsAltName(socket) ? null : NO_ALTNAME) : String(socket.authorizationError ?? 'UNKNOWN');
  const observation: TlsObservation = { ...base, secure: true, pkixError, peerChain: () => (chain ??= peerChainOf(socket)) };
  // Judged when the session is offered for reuse (socket alive), kept for the result's verdict.
  const otherHosts = new Map<string, TlsObservation>();
  observation.forHost = (host) => {
    if (host === route.host) return observation;
    let seen = otherHosts.get(host);
    if (!seen) {
      seen = { ...observation, host, pkixError: pkixErrorFor(socket, host, pkixError) };
      otherHosts.set(host, seen);
    }
    return seen;
  };
  return observation;
}

/**
 * RFC 8461 §4.2 (and RFC 6125): the name must be a DNS-ID in the subject alternative names.
 * Node accepts a name in the subject's CN when the certificate has no SAN at all.
 */
function hasDnsAltName(socket: tls.TLSSocket): boolean {
  return /(^|, )DNS:/.test(socket.getPeerCertificate().subjectaltname ?? '');
}

/** Node's PKIX verdict of a session for another name than the one it was opened for. */
function pkixErrorFor(socket: tls.TLSSocket, host: string, opened: string | null): string | null {
  // Node checks the name only once the chain verified: a chain error holds for every name.
  if (opened !== null && opened !== NAME_MISMATCH) return opened;
  const cert = socket.getPeerCertificate();
  if (!cert?.raw) return 'UNKNOWN';
  const err = tls.checkServerIdentity(host, cert) as NodeJS.ErrnoException | undefined;
  if (err) return String(err.code ?? err.message);
  // checkServerIdentity falls back to the CN too: the same rule as for the name it was opened for.
  return hasDnsAltName(socket) ? null : NO_ALTNAME;
}

/** The peer's certificates, leaf first, as Node ordered them (getPeerCertificate's issuer links). */
function peerChainOf(socket: tls.TLSSocket): X509Certificate[] {
  const chain: X509Certificate[] = [];
  const seen = new Set<string>();
  let cert: tls.DetailedPeerCertificate | undefined = socket.getPeerCertificate(true);
  while (cert?.raw && !seen.has(cert.fingerprint256)) {
    seen.add(cert.fingerprint256);
    chain.push(new X509Certificate(cert.raw));
    cert = cert.issuerCertificate;
  }
  return chain;
}

/** Whether the connection's next expected reply is the one to STARTTLS (nodemailer keeps no public state for it). */
function awaitingStarttls(conn: SMTPConnection): boolean {
  const c = conn as unknown as { _responseActions?: unknown[]; _actionSTARTTLS?: unknown };
  return !!c._actionSTARTTLS && c._responseActions?.[0] === c._actionSTARTTLS;
}

/** Opens the SMTP session for a request on a new slot. Returns why it could not, or undefined once it is ready for MAIL FROM. */
export async function openSession(ctx: SessionContext, pc: PooledConnection, route: Route, req: TransactionRequest): Promise<OpenFailure | undefined> {
  const log = ctx.log;
  let address: string;
  try {
    address = await resolveRelayAddress(ctx, route);
  } catch (err) {
    return { message: `cannot resolve relay ${route.address}: ${err instanceof Error ? err.message : String(err)}` };
  }
  pc.remoteAddress = `${address}:${route.port}`;
  pc.host = route.host;
  if (ctx.traces) pc.transcript = new SmtpTranscript(() => ctx.clock.nowMs());
  let plan = planFor(ctx, route, req);
  let err = await connectOnce(ctx, pc, connectionOptions(ctx, route, address, plan));
  reportConnect(ctx, pc, route, address, req, err);
  if (err && plan === 'opportunistic' && pc.tlsFailed) {
    // RFC 7435 §6: a failed upgrade must not make delivery worse than no TLS at all.
    log.warn({ connection: pc.id, key: route.key, host: route.host, err: err.message }, 'STARTTLS handshake failed; retrying in plaintext (opportunistic TLS)');
    rememberBrokenTls(ctx, route.key);
    pc.transcript?.note(`STARTTLS handshake failed (${err.message}); reconnecting in plaintext (opportunistic TLS)`);
    await socketGone(pc.conn);
    plan = 'plain';
    err = await connectOnce(ctx, pc, connectionOptions(ctx, route, address, plan));
  }
  if (err) {
    const failure = describeOpenFailure(err, route, plan, pc.tlsFailed);
    if (req.transport && !ctx.relay && plan === 'starttls-judged' && (pc.tlsFailed || pc.starttlsCut)) {
      // STARTTLS refused (or not offered: requireTLS sends it anyway), the connection cut at it
      // (a middlebox stripping TLS), or the handshake failed.
      const refused = (err.command === 'STARTTLS' && !!err.response) || !!pc.starttlsCut;
      const observation: TlsObservation = {
        host: route.host,
        remoteIp: address,
        secure: false,
        tlsFailure: refused ? 'not-offered' : 'handshake-failed',
        error: oneLine(err.response ?? err.message),
      };
      failure.tls = req.transport.judge(observation).verdict;
    }
    log.debug({ connection: pc.id, key: route.key, host: route.host, err: failure.message }, 'smtp session could not be opened');
    pc.tls = tlsInfoOf(pc.conn);
    return pc.transcript ? { ...failure, trace: sessionTrace(pc, route) } : failure;
  }
  const conn = pc.conn!;
  if (req.transport && !ctx.relay) {
    const observation = observe(conn, route, address, plan);
    pc.observation = observation;
    const judgement = req.transport.judge(observation);
    if (!judgement.proceed) {
      const v = judgement.verdict;
      log.debug({ connection: pc.id, key: route.key, host: route.host, result: v.result }, 'smtp session refused by the transport policy');
      return { message: `${route.host} [${address}]:${route.port}: ${v.detail ?? v.result}; not sending`, tls: v };
    }
  }

  const relay = ctx.relay;
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
  pc.localAddress = (socket as { localAddress?: string } | undefined)?.localAddress;
  if (pc.transcript) pc.tls = tlsInfoOf(conn);
  if (conn.secure && socket instanceof tls.TLSSocket && socket.authorized) pc.verifiedFor = route.host;
  ctx.stats.connectionsOpened++;
  log.debug({ connection: pc.id, key: route.key, host: route.host, secure: pc.secure, verified: pc.verifiedFor !== undefined }, 'smtp session open');
  return undefined;
}

/** The trace of the transaction now on this session (or of its failed opening). */
export function sessionTrace(pc: PooledConnection, route: Route): SessionTrace {
  const lines = pc.transcript?.lines() ?? [];
  return {
    startedAt: lines[0]?.[0] ?? 0,
    mxHost: route.host,
    address: pc.remoteAddress ?? null,
    source: pc.localAddress ?? null,
    tls: pc.tls ?? null,
    lines,
  };
}
