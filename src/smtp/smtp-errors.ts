import type { SMTPServerError } from 'smtp-server';
import { AppError, type ErrorCode } from '../core/errors.js';

// The SMTP edge's one translator for the closed error vocabulary (architecture.md, House rules 4): an AppError
// becomes a reply code (RFC 5321 4.2) with an enhanced status code (RFC 3463) in front of
// the text. smtp-server answers 450 unless `responseCode` is set, so every permanent
// refusal sets its 5xx here; a local failure is 4xx, so the client keeps the message and
// tries again (nothing it handed over is lost).

export type SmtpPhase = 'connect' | 'auth' | 'mail' | 'rcpt' | 'data';

interface Reply {
  code: number;
  enhanced: string;
}

const REPLIES: Record<ErrorCode, Reply> = {
  // Content the message can never be sent with (a bad header, too many recipients...).
  BAD_REQUEST: { code: 550, enhanced: '5.6.0' },
  // RFC 4954 6: authentication credentials invalid.
  UNAUTHORIZED: { code: 535, enhanced: '5.7.8' },
  // Not ours to relay, sender domain not allowed for this key (RFC 3463 X.7.1).
  FORBIDDEN: { code: 550, enhanced: '5.7.1' },
  // No such mailbox (RFC 3463 X.1.1).
  NOT_FOUND: { code: 550, enhanced: '5.1.1' },
  METHOD_NOT_ALLOWED: { code: 502, enhanced: '5.5.1' },
  // Only an in-flight duplicate can conflict: it settles shortly.
  NOT_UNIQUE: { code: 451, enhanced: '4.3.0' },
  // Over the team's rate: try again shortly (RFC 3463 X.7.0, as the API's 429).
  RATE_LIMITED: { code: 451, enhanced: '4.7.0' },
  // RFC 1870 6.1 / RFC 3463 X.3.4: message too big for system.
  PAYLOAD_TOO_LARGE: { code: 552, enhanced: '5.3.4' },
  // Not reached over SMTP (filtered contact reads only); a transient local error if it ever is.
  QUERY_TOO_SLOW: { code: 451, enhanced: '4.3.0' },
  // Ours, not the client's: a transient local error (RFC 3463 X.3.0).
  INTERNAL_SERVER_ERROR: { code: 451, enhanced: '4.3.0' },
};

/** A reply line the client sees as `<code> <enhanced> <text>`; text is one line of at most 400 characters. */
export function smtpError(code: number, enhanced: string, text: string): SMTPServerError {
  const clean = text.replace(/[\r\n\0]+/g, ' ').replace(/\s+/g, ' ').trim().slice(0, 400);
  const err: SMTPServerError = new Error(`${enhanced} ${clean}`);
  err.responseCode = code;
  return err;
}

/** AppError -> SMTP reply; anything else is a transient local error whose details stay in our log. */
export function toSmtpError(err: unknown, phase: SmtpPhase): SMTPServerError {
  if (err instanceof AppError) {
    const reply = REPLIES[err.code];
    if (err.code === 'INTERNAL_SERVER_ERROR' && phase === 'auth') return smtpError(454, '4.7.0', 'temporary authentication failure');
    if (err.code === 'NOT_FOUND' && phase !== 'rcpt') return smtpError(550, '5.7.1', err.message);
    return smtpError(reply.code, reply.enhanced, err.message);
  }
  // RFC 4954 6: 454 4.7.0 for a temporary authentication failure.
  if (phase === 'auth') return smtpError(454, '4.7.0', 'temporary authentication failure, try again later');
  return smtpError(451, '4.3.0', 'local error in processing, try again later');
}
