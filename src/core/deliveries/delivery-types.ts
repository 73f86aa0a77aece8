import type { DeliveryRow } from '../../store/repositories/deliveries-repository.js';
import type { EmailHead } from '../../store/repositories/emails-repository.js';
import type { DomainRecord } from '../../store/repositories/domains-repository.js';

// What the delivery service and the outbound engine hand each other: a claimed group, an
// attempt's result per recipient and the trace of its SMTP sessions.

/**
 * Recipients of one email at one destination domain: composed and signed once, sent in one SMTP
 * transaction per recipient unless a shaping rule groups them (smtp/outbound/delivery-engine.ts).
 */
export interface DeliveryGroup {
  /** Without its body: the engine reads that when it composes the message (bodyOf). */
  email: EmailHead;
  domain: DomainRecord | undefined;
  rcptDomain: string;
  deliveries: DeliveryRow[];
  /** The egress pool of the sending domain, or of its team; null or absent: the default pool. */
  egressPool?: string | null;
}

/** What one attempt did for one recipient (a value, not an exception: architecture.md, House rules 5). */
export interface AttemptResult {
  deliveryId: number;
  /**
   * suppressed: not attempted, the recipient was put on the suppression list after acceptance.
   * rejected: not attempted, Posthorn refuses to send it (its sending domain is gone or no longer verified).
   */
  outcome: 'delivered' | 'deferred' | 'bounced' | 'failed' | 'suppressed' | 'rejected';
  code?: number;
  response: string;
  mxHost?: string | null;
  /** The mailbox does not exist: suppress this recipient (and only it). */
  hardBounce?: boolean;
  /** The remote asked to wait at least this long. */
  retryAfterMs?: number;
  /** What the reply classification made of it (mailbox-full, policy, spam, message, ...). */
  category?: string;
  /** With outcome suppressed: every To is suppressed and nothing was sent, so the email is SUPPRESSED. */
  emailSuppressed?: boolean;
  /** Which transport security policy applied and its verdict (core/tls-reports/tls-verdict.ts verdictSummary). */
  tls?: Record<string, unknown>;
  /** The egress source the attempt went out from (outbound.sources). */
  source?: string;
}

/** The TLS state of a session: protocol, cipher and the certificate's verdict. */
export interface SessionTls {
  version: string | null;
  cipher: string | null;
  /** The peer's certificate chain verified. */
  verified: boolean;
  /** Why it did not, when it did not. */
  error: string | null;
  /** The certificate's subject and issuer common names, when there was one. */
  subject: string | null;
  issuer: string | null;
}

/** One SMTP session an attempt used, as the operator's trace keeps it. */
export interface AttemptTrace {
  /** Epoch ms of the session's first line. */
  startedAt: number;
  mxHost: string;
  address: string | null;
  /** Our local address. */
  source: string | null;
  /** The egress source's name. */
  sourceName?: string;
  tls: SessionTls | null;
  /** [ms epoch, 'C' (client) | 'S' (server) | 'I' (info), text] */
  lines: [number, string, string][];
  /** What this session said about each recipient. */
  results: { recipient: string; outcome: string; code?: number; response: string }[];
}

/** A recipient of an email, for the console's email page. */
export interface RecipientView {
  recipient: string;
  kind: 'to' | 'cc' | 'bcc';
  state: string;
  attempts: number;
  mxHost: string | null;
  lastCode: number | null;
  lastResponse: string | null;
  nextAttemptAt: string | null;
  updatedAt: string;
}
