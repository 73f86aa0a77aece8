import tls from 'node:tls';
import type SMTPConnection from 'nodemailer/lib/smtp-connection';
import type { SessionTls } from '../../core/deliveries/delivery-service.js';
import { sliceWhole } from '../../lib/nul-text.js';

/*
 * What an outbound SMTP session said, for the operator's trace of an attempt. nodemailer's
 * transactionLog reports each command and reply (never the message body; AUTH arguments come
 * masked), and this logger keeps them with their time. A connection's opening (greeting, EHLO,
 * STARTTLS) is kept once; each transaction's lines replace the previous transaction's, so a
 * reused session holds only what the current attempt needs. Both parts are bounded.
 */

export type TranscriptLine = [atMs: number, who: 'C' | 'S' | 'I', text: string];

/** What the operator's trace stores of one session used for one transaction. */
export interface SessionTrace {
  /** Epoch ms of the first line. */
  startedAt: number;
  mxHost: string;
  /** ip:port connected to. */
  address: string | null;
  /** Our local address. */
  source: string | null;
  tls: TlsInfo | null;
  /** The session's opening lines when it was opened for this transaction; otherwise a note that it was reused. */
  lines: TranscriptLine[];
}

export type TlsInfo = SessionTls;

const MAX_LINES_PER_PART = 200;
const MAX_LINE_CHARS = 512;

export class SmtpTranscript {
  private opening: TranscriptLine[] = [];
  private current: TranscriptLine[] = [];
  private inTransaction = false;
  /** Transactions this session has carried (the first one shows the opening). */
  private transactions = 0;

  constructor(private readonly now: () => number) {}

  /** A bunyan-style logger for SMTPConnection's `logger` option (with `transactionLog: true`). */
  readonly logger = {
    debug: (entry: { tnx?: string }, message: string) => {
      if (entry.tnx === 'client') this.add('C', message);
      else if (entry.tnx === 'server') this.add('S', message);
    },
    info: (entry: { tnx?: string }, message: string, ...args: unknown[]) => {
      if (entry.tnx === 'message') this.add('I', formatArgs(message, args));
    },
    trace: () => undefined,
    warn: () => undefined,
    error: () => undefined,
    fatal: () => undefined,
  };

  note(text: string): void {
    this.add('I', text);
  }

  beginTransaction(): void {
    this.inTransaction = true;
    this.transactions++;
    this.current = [];
  }

  /** The lines of this attempt: the session's opening, then this transaction's own (marked when the session was reused). */
  lines(): TranscriptLine[] {
    if (this.transactions <= 1) return [...this.opening, ...this.current];
    return [...this.opening, [this.current[0]?.[0] ?? this.now(), 'I', `session reused: transaction ${this.transactions} on it`], ...this.current];
  }

  private add(who: 'C' | 'S' | 'I', text: string): void {
    const part = this.inTransaction ? this.current : this.opening;
    if (part.length >= MAX_LINES_PER_PART) return;
    part.push([this.now(), who, text.length > MAX_LINE_CHARS ? `${sliceWhole(text, MAX_LINE_CHARS)}...` : text]);
  }
}

function formatArgs(message: string, args: unknown[]): string {
  let i = 0;
  return message.replace(/%s/g, () => String(args[i++] ?? ''));
}

/** The TLS state of an open session, read from its socket. */
export function tlsInfoOf(conn: SMTPConnection | undefined): TlsInfo | null {
  const socket = (conn as unknown as { _socket?: unknown } | undefined)?._socket;
  if (!(socket instanceof tls.TLSSocket)) return null;
  const cert = socket.getPeerCertificate();
  const cn = (name: unknown) => {
    const v = (name as Record<string, unknown> | undefined)?.CN;
    return typeof v === 'string' ? v : Array.isArray(v) ? String(v[0]) : null;
  };
  const error = socket.authorizationError;
  return {
    version: socket.getProtocol() ?? null,
    cipher: socket.getCipher()?.name ?? null,
    verified: socket.authorized,
    error: error ? String(error) : null,
    subject: cert && Object.keys(cert).length ? cn(cert.subject) : null,
    issuer: cert && Object.keys(cert).length ? cn(cert.issuer) : null,
  };
}
