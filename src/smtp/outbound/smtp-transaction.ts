/**
 * One mail transaction (RFC 5321 §3.3) on an open session: MAIL FROM, one RCPT TO per
 * recipient (each reply recorded: a refused recipient gets its own outcome while the others
 * go on), DATA once for the accepted ones, and the result for every recipient.
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
import type { SMTPConnectionEnvelope, SMTPConnectionSendInfo, SMTPEnvelope } from 'nodemailer/lib/smtp-connection';
import { classifyConnectionFailure, classifyReply } from './classify-reply.js';
import type { OpenFailure, PooledConnection, RecipientResult, Route, SmtpClientPool, SmtpError, TransactionRequest, TransactionResult } from './smtp-client-types.js';
import { closedError, oneLine, onSession } from './smtp-session.js';

/** What a transaction needs from the pool. */
export interface TransactionContext {
  /** Every transaction goes to a relay (classifyReply reads its replies differently). */
  readonly relay: boolean;
  /** Longest one transaction may take, MAIL FROM to the reply after the final dot. */
  readonly transactionTimeoutMs: number;
  readonly stats: Pick<SmtpClientPool['stats'], 'transactions'>;
}

export interface TransactionOutcome {
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
  /** MAIL FROM was sent (see TransactionResult.transactionStarted). */
  started: boolean;
}

function replyCodeOf(response: string | undefined): number | undefined {
  const m = /^(\d{3})/.exec(response ?? '');
  return m ? Number(m[1]) : undefined;
}

/** nodemailer refuses the whole envelope for one address with CR, LF or angle brackets; we refuse only that recipient. */
function invalidAddress(address: string): boolean {
  return /[\r\n<>]/.test(address);
}

/** Recipients refused before any session: addresses that cannot be written into an SMTP command (all of them for such a sender). */
export function refusedLocally(req: TransactionRequest): Map<string, RecipientResult> {
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
  return local;
}

/** The result when no session could be had: every recipient deferred with the reason. */
export function failedResult(route: Route, req: TransactionRequest, failure: OpenFailure): TransactionResult {
  const verdict = classifyConnectionFailure(failure.message, failure.response);
  return {
    connected: false,
    ...(failure.poolClosed ? { notAttempted: true } : {}),
    secure: false,
    remoteHost: route.host,
    ...(failure.remoteAddress ? { remoteAddress: failure.remoteAddress } : {}),
    error: failure.message,
    ...(failure.trace ? { trace: failure.trace } : {}),
    ...(failure.tls ? { tls: failure.tls } : {}),
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

function fromReply(
  ctx: TransactionContext,
  recipient: string,
  code: number,
  response: string,
  replyOptions: { neverHard?: boolean; mailFrom?: string } = {},
): RecipientResult {
  const verdict = classifyReply(code, response, { ...(replyOptions.mailFrom ? { mailFrom: replyOptions.mailFrom } : {}), relay: ctx.relay });
  return {
    recipient,
    outcome: verdict.kind,
    code,
    response: oneLine(response),
    hardBounce: verdict.hardBounce && !replyOptions.neverHard,
    ...(verdict.retryAfterMs !== undefined ? { retryAfterMs: verdict.retryAfterMs } : {}),
    reason: verdict.reason,
    ...(verdict.category ? { category: verdict.category } : {}),
  };
}

/** Runs one transaction on the slot's open session; every outcome is a value. */
export async function transact(ctx: TransactionContext, pc: PooledConnection, req: TransactionRequest, allRecipients: string[]): Promise<TransactionOutcome> {
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
  if (recipients.length === 0) return { byRecipient: results, untouched: false, accepted: true, hostFailure: false, started: false };
  const envelope: SMTPEnvelope = {
    from: req.mailFrom,
    to: recipients.slice(),
    size: req.envelopeSize ?? req.message.length,
    // RFC 6152: declare BODY=8BITMIME when the message is not 7-bit clean.
    use8BitMime: !isAscii(req.message),
  };
  // The deadline ends the session like a dropped connection: every recipient without a
  // final reply is deferred (and may be sent again: the server may have kept the message).
  const transactionTimeoutMs = ctx.transactionTimeoutMs;
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
  // nodemailer's own SIZE check refuses before MAIL FROM is written: no transaction began, so
  // the server took no part in one (no SENT; docs/outbound.md, Events: SENT), and it counts
  // neither in the stats nor against the session's messages.
  const refusedBySize = err?.command === 'MAIL FROM' && err.responseCode === undefined && err.code === 'EMESSAGE';
  if (!refusedBySize) {
    ctx.stats.transactions++;
    pc.transactions++;
  }
  let dropped: string | undefined;

  for (const recipient of recipients) {
    const refused = rejected.get(recipient);
    if (err && err.command === 'MAIL FROM') {
      // The sender or the message was refused (SIZE, sender policy); any RCPT
      // replies after it (pipelined) are noise. Never a recipient's hard bounce.
      if (err.responseCode !== undefined && err.response) {
        results.set(recipient, fromReply(ctx, recipient, err.responseCode, err.response, { neverHard: true, mailFrom: req.mailFrom }));
      } else if (!refusedBySize && err.response) {
        // A reply without a numeric code (nodemailer gives it no responseCode either): a broken
        // server, not a refusal of the message; deferred like any reply that cannot be read.
        const response = oneLine(err.response);
        const verdict = classifyReply(0, response);
        results.set(recipient, { recipient, outcome: 'deferred', response, hardBounce: false, reason: verdict.reason });
      } else {
        // nodemailer's own SIZE check (RFC 1870 §6): the server announced a smaller limit.
        results.set(recipient, fromReply(ctx, recipient, 552, `5.3.4 ${err.message}`, { neverHard: true }));
      }
    } else if (refused && refused.responseCode !== undefined && refused.response) {
      results.set(recipient, fromReply(ctx, recipient, refused.responseCode, refused.response, { mailFrom: req.mailFrom }));
    } else if (!err && accepted.has(recipient)) {
      const response = outcome.value?.response ?? '250';
      results.set(recipient, { recipient, outcome: 'delivered', code: replyCodeOf(response) ?? 250, response: oneLine(response), hardBounce: false });
    } else if (err && err.command === 'DATA' && err.responseCode !== undefined && err.response && accepted.has(recipient)) {
      // One reply (to DATA or to the final dot) for all accepted recipients,
      // also when the server closes right after it (421). A "user unknown"
      // here cannot say which recipient, so it only suppresses when there was one.
      results.set(recipient, fromReply(ctx, recipient, err.responseCode, err.response, { neverHard: accepted.size > 1, mailFrom: req.mailFrom }));
    } else {
      // The session died before this recipient's fate was known: the message
      // was not accepted for it, so it is deferred (and retried later).
      const reason = err ? oneLine(err.response ?? err.message) : 'no reply for this recipient';
      const code = err?.responseCode;
      const verdict = code !== undefined && err?.response ? classifyReply(code, err.response, { mailFrom: req.mailFrom, relay: ctx.relay }) : classifyConnectionFailure(reason);
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
  return {
    byRecipient: results,
    ...(dropped ? { dropped } : {}),
    untouched,
    accepted: !err && !sessionGone && accepted.size > 0,
    hostFailure,
    started: !refusedBySize,
  };
}
