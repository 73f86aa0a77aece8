import { createHash } from 'node:crypto';
import { SMTPServer, type SMTPServerSession } from 'smtp-server';
import type { AuthContext, ApiKeyService } from '../../core/api-keys/api-key-service.js';
import type { EmailService } from '../../core/emails/email-service.js';
import { AppError } from '../../core/errors.js';
import { MAX_RECIPIENTS } from '../../core/emails/send-fields.js';
import type { RateLimiter } from '../../core/rate-limit/rate-limiter.js';
import { parseMessage } from '../parsed-mail.js';
import { smtpError, toSmtpError } from '../smtp-errors.js';
import type { Clock } from '../../lib/clock.js';
import { parseDuration } from '../../lib/rate-spec.js';
import { AuthFailureLockout, ConnectionsPerIp } from '../client-ip-limits.js';
import { networkMatcher } from '../../lib/network-list.js';
import { receiveMessage, SMTP_SERVER_TIMEOUT_MS, SmtpListener, tooManyConnectionsReply, type SmtpListenerOptions } from '../smtp-listener.js';
import { messageThreading, messageToSendInput } from './message-to-send-input.js';

// Message submission (RFC 6409) on 587: STARTTLS (RFC 3207) before AUTH PLAIN/LOGIN
// (RFC 4954, RFC 4616) with an API key as the password. Every message enters through
// submitEmail with the key's team, permission and domain rules, so it is validated,
// suppression-checked, DKIM-signed and delivered exactly like an API send, and counts one
// request against the team's rate limit.

export interface SubmissionServerOptions extends SmtpListenerOptions {
  apiKeys: ApiKeyService;
  emails: EmailService;
  rateLimiter: RateLimiter;
  defaultRateLimit: number;
  /** Times the AUTH failure lockout (the app's clock; tests move it). */
  clock: Clock;
  /** Failed AUTHs from one address within authFailureWindow that lock it out; 0 is no lockout. */
  authFailureLimit: number;
  /** A duration ("15m"): the lockout's window and length. */
  authFailureWindow: string;
  /** How long one message may take to parse (parsed-mail.ts's default unless set; tests). */
  parseTimeoutMs?: number;
}

/**
 * Failed AUTH attempts one connection gets; the last is answered 421 and the connection closed
 * (RFC 4954 4 lets a server limit them). A key has 192 random bits, so this is not what keeps
 * one from being guessed: it keeps a client from spending our store on guesses without end.
 */
export const MAX_AUTH_FAILURES = 3;

/**
 * The idempotency key of a submitted message: a client whose 250 was lost (a cut connection, a
 * timeout after our commit) sends the same bytes from the same MAIL FROM to the same recipients
 * again, and gets the first email's id back instead of a second email (the API's Idempotency-Key
 * rules: the team's, for 24 hours). A client composes each new message with its own Message-ID
 * and Date, so two messages meant as two differ in their bytes.
 */
function resendKey(raw: Buffer, mailFrom: string, rcptTo: string[]): string {
  const envelope = `${mailFrom}\n${rcptTo.map((r) => r.toLowerCase()).sort().join('\n')}\n\n`;
  return `smtp-submission:${createHash('sha256').update(envelope).update(raw).digest('hex')}`;
}

/** What a session carries once authenticated: the key, so every message re-checks it. */
interface SessionUser {
  token: string;
  auth: AuthContext;
}

export async function startSubmissionServer(options: SubmissionServerOptions): Promise<SmtpListener> {
  const logger = options.logger.child({ listener: 'submission' });
  const listener = new SmtpListener(logger, 'submission');

  /** Failed AUTH attempts by connection (smtp-server keeps one session object per connection). */
  const authFailures = new WeakMap<SMTPServerSession, number>();
  const perIp = new ConnectionsPerIp(options.maxConnectionsPerIp);
  const lockout = new AuthFailureLockout(options.clock, options.authFailureLimit, parseDuration(options.authFailureWindow) ?? 15 * 60_000);
  /**
   * submission.exemptNetworks: neither capped nor locked out, and their failures are not counted
   * (so they lock out nobody else in their IPv6 /64). Each connection still closes after
   * MAX_AUTH_FAILURES, and every AUTH still needs a valid key.
   */
  const exempt = networkMatcher(options.exemptNetworks);

  /**
   * The reply to an address locked out after failed AUTHs, at connect and at AUTH alike: 421
   * (RFC 5321 3.8) closes the connection. Not RFC 4954's 454 4.7.0: that is a temporary
   * failure of the server, which a client may meet by trying AUTH again at once on the same
   * connection, where this is a refusal of the client for a while; 4.7.0 (RFC 3463) says policy.
   */
  const lockedOut = (ms: number) => smtpError(421, '4.7.0', `${options.hostname} too many failed authentication attempts from your address, try again in ${Math.ceil(ms / 60_000)} min`);

  const shuttingDown = () => smtpError(421, '4.3.2', `${options.hostname} shutting down, try again later`);

  /** The key again at MAIL FROM: a key deleted mid-session stops working at once (spec, Authentication 4). */
  async function authorizeTransaction(session: SMTPServerSession): Promise<AuthContext> {
    const user = session.user as SessionUser | undefined;
    if (!user) throw new AppError('UNAUTHORIZED', 'authentication required');
    const auth = await options.apiKeys.authenticate(user.token);
    user.auth = auth;
    // One message is one request for the team's limit (the API's limiter; architecture.md, Decisions: rate limit).
    const decision = await options.rateLimiter.consume(auth.teamId, auth.teamRateLimit ?? options.defaultRateLimit, auth.keyId);
    if (!decision.allowed) {
      if (decision.firstRefusal) {
        logger.info(
          { event: 'rate_limited', teamId: auth.teamId, apiKeyId: auth.keyId, limit: decision.limit, retryAfterSeconds: decision.retryAfterSeconds },
          `API key ${auth.keyId} of team ${auth.teamId} is over the rate limit of ${decision.limit} messages per second (SMTP submission)`,
        );
      }
      throw new AppError('RATE_LIMITED', `rate limit of ${decision.limit} messages per second exceeded; retry in ${decision.retryAfterSeconds} s`, decision.retryAfterSeconds);
    }
    return auth;
  }

  async function submit(raw: Buffer, session: SMTPServerSession): Promise<string> {
    const user = session.user as SessionUser;
    // Too slow to parse is the busy process's problem, not the message's: a ParseTimeoutError
    // answers 451 (the client tries again), where MIME mailparser cannot read is refused for good.
    const parsed = await parseMessage(raw, { skipHtmlToText: true, throwOnTimeout: true, timeoutMs: options.parseTimeoutMs });
    if (!parsed) throw new AppError('BAD_REQUEST', 'the message could not be parsed as MIME');
    const mailFrom = session.envelope.mailFrom ? session.envelope.mailFrom.address : '';
    const rcptTo = session.envelope.rcptTo.map((r) => r.address);
    const input = messageToSendInput(parsed, { mailFrom, rcptTo });
    const resend = resendKey(raw, mailFrom, rcptTo);
    // The key again once the message is in: one deleted while the message was on the wire (or
    // parsed) since MAIL FROM is refused for it too, as an API request it would be.
    const auth = await options.apiKeys.authenticate(user.token);
    user.auth = auth;
    const { emailId } = await options.emails.submit({ teamId: auth.teamId, domainId: auth.domainId, apiKeyId: auth.keyId }, input, {
      submittedBy: mailFrom,
      threading: messageThreading(parsed),
      idempotencyKey: resend,
      rawBody: resend,
    });
    return emailId;
  }

  const server = new SMTPServer({
    name: options.hostname,
    key: options.tls.key,
    cert: options.tls.cert,
    logger: false,
    authMethods: ['PLAIN', 'LOGIN'],
    // No AUTH over plaintext: the password is an API key (RFC 4954 4: 538 until STARTTLS).
    allowInsecureAuth: false,
    authOptional: false,
    authRequiredMessage: '5.7.0 Authentication required',
    disableReverseLookup: true,
    size: options.maxMessageBytes,
    rejectOversized: true,
    maxClients: options.maxConnections,
    // One send takes at most MAX_RECIPIENTS: beyond it a recipient gets 452 at RCPT and the
    // client sends it in another transaction (RFC 5321 4.5.3.1.10), rather than every RCPT
    // being taken and the whole message refused at DATA.
    maxRecipients: Math.min(options.maxRecipients, MAX_RECIPIENTS),
    // RFC 5321 4.5.3.2.7: a server waits at least 5 minutes for the next command; this also
    // outlasts our own work on a message (DNS checks, storing) before the reply.
    socketTimeout: SMTP_SERVER_TIMEOUT_MS,
    banner: 'Posthorn ESMTP submission',

    onConnect(session, callback) {
      if (listener.closing) return callback(shuttingDown());
      if (exempt(session.remoteAddress)) return callback();
      const locked = lockout.lockedFor(session.remoteAddress);
      if (locked > 0) {
        logger.debug({ remote: session.remoteAddress }, 'connection from an address locked out after failed AUTHs refused');
        options.onRefused?.('auth_lockout');
        return callback(lockedOut(locked));
      }
      if (!perIp.admit(session.id, session.remoteAddress)) {
        logger.debug({ remote: session.remoteAddress, cap: options.maxConnectionsPerIp }, 'connection over the per-address cap refused');
        options.onRefused?.('connections_per_ip');
        return callback(tooManyConnectionsReply(options.hostname, options.maxConnectionsPerIp));
      }
      callback();
    },

    onClose(session) {
      perIp.release(session.id);
    },

    onAuth(auth, session, callback) {
      const token = (auth.password ?? '').trim();
      // A connection opened before its address was locked out is refused at its next AUTH.
      const isExempt = exempt(session.remoteAddress);
      const locked = isExempt ? 0 : lockout.lockedFor(session.remoteAddress);
      if (locked > 0) {
        options.onRefused?.('auth_lockout');
        return callback(lockedOut(locked));
      }
      options.apiKeys.authenticate(token).then(
        (ctx) => callback(null, { user: { token, auth: ctx } satisfies SessionUser }),
        (err) => {
          if (!(err instanceof AppError) || err.code !== 'UNAUTHORIZED') {
            // Ours, not the client's (454): not counted against it.
            logger.error({ err }, 'authenticating a submission client failed');
            return callback(toSmtpError(err, 'auth'));
          }
          const failures = (authFailures.get(session) ?? 0) + 1;
          authFailures.set(session, failures);
          logger.info({ method: auth.method, remote: session.remoteAddress, failures }, 'submission AUTH refused');
          const { lockedForMs, started } = isExempt ? { lockedForMs: 0, started: false } : lockout.fail(session.remoteAddress);
          if (started) {
            logger.warn(
              { event: 'submission.auth_lockout', remote: session.remoteAddress, limit: options.authFailureLimit, window: options.authFailureWindow },
              `submission: ${options.authFailureLimit} failed AUTHs from ${session.remoteAddress} within ${options.authFailureWindow}; its connections are refused for ${options.authFailureWindow}`,
            );
          }
          if (lockedForMs > 0) {
            options.onRefused?.('auth_lockout');
            return callback(lockedOut(lockedForMs));
          }
          // smtp-server closes the connection after a 421.
          if (failures >= MAX_AUTH_FAILURES) return callback(smtpError(421, '4.7.0', `too many failed authentication attempts (${failures}), closing connection`));
          // The service's words for a missing key are the API's (an Authorization header).
          if (!token) return callback(smtpError(535, '5.7.8', 'missing API key: the password is an API key (ph_...)'));
          callback(toSmtpError(err, 'auth'));
        },
      );
    },

    onMailFrom(_address, session, callback) {
      if (listener.closing) return callback(shuttingDown());
      authorizeTransaction(session).then(
        () => callback(),
        (err) => {
          if (!(err instanceof AppError)) logger.error({ err }, 'checking a submission sender failed');
          callback(toSmtpError(err, 'mail'));
        },
      );
    },

    onData(stream, session, callback) {
      const work = receiveMessage(stream, options.maxMessageBytes, options.intake).then(
        async (body) => {
          if (!body) return callback(smtpError(552, '5.3.4', `message exceeds the fixed maximum size of ${options.maxMessageBytes} bytes`));
          const stored = listener.beginStoring(session.id);
          try {
            // Parsing and storing a message takes a few times its size: it waits for room.
            const emailId = await options.intake.process(body, (raw) => submit(raw, session));
            logger.info({ emailId, keyId: (session.user as SessionUser).auth.keyId }, 'message submitted');
            callback(null, `2.0.0 Ok: queued as ${emailId}`);
          } catch (err) {
            if (!(err instanceof AppError)) logger.error({ err }, 'submitting a message failed; answered 451');
            else logger.info({ code: err.code, reason: err.message }, 'submitted message refused');
            callback(toSmtpError(err, 'data'));
          } finally {
            stored();
          }
        },
        (err) => {
          logger.debug({ err }, 'DATA stream failed');
          callback(smtpError(451, '4.3.0', 'error reading the message, try again'));
        },
      );
      void listener.track(work);
    },
  });

  await listener.listen(server, options.host, options.port);
  return listener;
}
