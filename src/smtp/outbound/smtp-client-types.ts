/**
 * The types of the outbound SMTP client: the public ones (re-exported by smtp-client-pool.ts,
 * the entry point) and the records its three parts share: the pool (smtp-client-pool.ts),
 * opening a session (smtp-session.ts) and a transaction on one (smtp-transaction.ts).
 */
import type { X509Certificate } from 'node:crypto';
import type SMTPConnection from 'nodemailer/lib/smtp-connection';
import type { ConnectOutcome } from '../../core/operators/port25-watch.js';
import type { TlsVerdict } from '../../core/tls-reports/tls-verdict.js';
import type { Clock } from '../../lib/clock.js';
import type { DnsResolver } from '../../lib/dns/dns-client.js';
import type { Logger } from '../../lib/logger.js';
import type { ReplyCategory } from './classify-reply.js';
import type { SessionTrace, SmtpTranscript, TlsInfo } from './smtp-transcript.js';

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
  /**
   * The destination's transport security policy (MTA-STS, DANE, the domain's ENFORCED), from
   * transport-policy.ts; it replaces tlsPolicy when set. Ignored with a relay.
   */
  transport?: TransportRequirement;
  /** The egress source: the local address to bind to and the EHLO name. Absent: the pool's defaults. */
  source?: EgressSourceRef;
  /** Traffic shaping of the (source, rollup) this goes to (docs/outbound.md, "Traffic shaping"). */
  shape?: SessionShape;
}

export interface EgressSourceRef {
  name: string;
  /** Local address to bind the connection to; absent: the host's default. */
  localAddress?: string;
  ehloName: string;
}

/** Limits of the sessions of one (source, rollup), beyond the pool's own. */
export interface SessionShape {
  /** Sessions of one (source, rollup) share these limits. */
  key: string;
  /** Open sessions at once (from the first SYN until the socket is closed). */
  connectionLimit?: number;
  /** Transactions per session, then QUIT. */
  maxDeliveriesPerConnection?: number;
  /** An idle session is closed after this. */
  idleTimeoutMs?: number;
}

/** What the session saw of TLS, for a TransportRequirement to judge. */
export interface TlsObservation {
  /** The MX name (the reference identity). */
  host: string;
  remoteIp?: string;
  localIp?: string;
  /** The session is encrypted. */
  secure: boolean;
  /** Why it is not: the server offered no STARTTLS (or refused it), or the handshake failed. */
  tlsFailure?: 'not-offered' | 'handshake-failed';
  /** The handshake's or the server's error, when there was one. */
  error?: string;
  /** Node's PKIX verdict for host (chain to a trusted CA, name, validity): null when valid, else its code. */
  pkixError?: string | null;
  /** The certificate chain the peer presented, leaf first (parsed on first use). */
  peerChain?: () => X509Certificate[];
  /**
   * The same session as seen for another MX name on its address (an idle session offered for
   * reuse): the PKIX verdict is for that name.
   */
  forHost?: (host: string) => TlsObservation;
}

/** A judge's answer: whether the session may carry the message, and the verdict to report. */
export interface TlsJudgement {
  proceed: boolean;
  verdict: TlsVerdict;
}

export interface TransportRequirement {
  /** STARTTLS is mandatory: no plaintext session, no fallback after a failed handshake. */
  requireTls: boolean;
  /**
   * Judges the TLS of a session before MAIL FROM: a new one, an idle one offered for reuse,
   * or one that could not be set up (then only the verdict counts).
   */
  judge(observation: TlsObservation): TlsJudgement;
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
  /**
   * A mail transaction began on a remote server: a session was open (greeting, EHLO, STARTTLS
   * as the policy demands, AUTH at a relay) and MAIL FROM was sent. Whatever the replies, the
   * remote server took part; this is what makes an email SENT (architecture.md, Decisions:
   * email status). False when nothing got that far (no session, or every recipient refused
   * locally before MAIL FROM, or the message larger than the SIZE the server announced).
   */
  transactionStarted?: boolean;
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
  /** The session's transcript and TLS state for this transaction, when traces are kept. */
  trace?: SessionTrace;
  /** With a TransportRequirement: how the session's transport security was judged (RFC 8460 terms). */
  tls?: TlsVerdict;
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
  /** Keep each session's transcript and TLS state on its results (the operator's trace); default false. */
  traces?: boolean;
  /**
   * Nodes sharing a store: every new session needs a permit, so maxConnectionsPerHost holds for
   * the cluster (a promise to the remote server, not to this node). Absent: this node's count only.
   */
  connectionPermits?: ConnectionPermits;
  /**
   * Each new connection's outcome at the TCP level (core/operators/port25-watch.ts): reached, or
   * not (connect timeout, refused, unreachable). Direct delivery only: never called with a relay.
   */
  onConnectOutcome?: (o: ConnectOutcome) => void;
}

/**
 * Cluster-wide session counts per destination (address:port) and per shaped (source, rollup):
 * core/cluster/connection-permits.ts.
 */
export interface ConnectionPermits {
  /** One more session counted under `key`, if the cluster's count stays within `limit`. */
  acquire(key: string, limit: number): Promise<boolean>;
  release(key: string): void;
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
  /** connectionsOpened: SMTP sessions established (after EHLO/STARTTLS/AUTH); transactions: MAIL FROM commands issued (a message the announced SIZE refuses is none). */
  readonly stats: { connectionsOpened: number; transactions: number };
  /** Open sessions (busy or idle) by MX or relay host name, right now. */
  openByHost(): Map<string, number>;
}

// ------------------------------------------------------------ shared by the pool's parts

/** The error fields nodemailer's SMTPConnection sets (errors.js / _formatError). */
export interface SmtpError extends Error {
  code?: string;
  response?: string;
  responseCode?: number;
  command?: string;
  recipient?: string;
  originalCode?: string;
  timeoutType?: string;
}

/** Where a session goes. */
export interface Route {
  /** Limit and reuse key: address:port. */
  key: string;
  /** IP, or for a relay given by name, that name (resolved at connect time). */
  address: string;
  port: number;
  /** Certificate name and remoteHost. */
  host: string;
  relay: boolean;
  /** Local address to bind to (the egress source's). */
  localAddress?: string;
  /** EHLO name, when not the pool's. */
  ehloName?: string;
}

/** One slot of the pool and the SMTP session on it. */
export interface PooledConnection {
  id: number;
  /** What the session said, when traces are kept (the operator's trace of each attempt). */
  transcript?: SmtpTranscript;
  /** TLS state once the session is open; null in plaintext. */
  tls?: TlsInfo | null;
  /** Our local ip, once connected. */
  localAddress?: string;
  /** The MX (or relay) host name the session was opened for. */
  host?: string;
  key: string;
  conn?: SMTPConnection;
  state: 'opening' | 'busy' | 'idle' | 'closing';
  secure: boolean;
  /** The name the peer's certificate verified for, when it did. */
  verifiedFor?: string;
  /** What the session saw of TLS when it opened: what a TransportRequirement judges on reuse. */
  observation?: TlsObservation;
  /** Policy domains whose TLS report already counts this connection as a session. */
  reportedFor?: Set<string>;
  remoteAddress?: string;
  transactions: number;
  idleTimer?: NodeJS.Timeout;
  /** Set by the connection's 'end': it can no longer be used. */
  dead: boolean;
  /** The cluster permits it holds (its destination's, its shape's), given back when it closes. */
  permits?: string[];
  /** First error the connection reported. */
  lastError?: SmtpError;
  /** The first error happened during a STARTTLS/implicit TLS handshake. */
  tlsFailed: boolean;
  /** The connection was cut while the STARTTLS command waited for its reply (a middlebox stripping TLS). */
  starttlsCut?: boolean;
  /** Resolves once the socket is closed and the slot is free. */
  closed?: Promise<void>;
  /** The (source, rollup) shaping the session counts against, and its per-session limits. */
  shape?: SessionShape;
  /**
   * The last transaction ended with the server's 250 to the message: the server is back in
   * its initial state (RFC 5321 4.1.1.4), so the next transaction needs no RSET first.
   */
  cleanSlate?: boolean;
}

/** Why no session could be had for a transaction. */
export interface OpenFailure {
  message: string;
  /** What was said before it failed, when traces are kept. */
  trace?: SessionTrace;
  /** The pool is closed: no connection was tried. */
  poolClosed?: boolean;
  code?: number;
  response?: string;
  remoteAddress?: string;
  /** With a TransportRequirement, when TLS was what failed: the verdict. */
  tls?: TlsVerdict;
}
