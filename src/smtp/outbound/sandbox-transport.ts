import type { Logger } from '../../lib/logger.js';
import type { SandboxService } from '../../core/sandbox/sandbox-service.js';
import { formatMailboxes, headerFields, parseMessage } from '../parsed-mail.js';
import type { MessageTransport } from './delivery-engine.js';
import type { RecipientResult, TransactionResult } from './smtp-client-types.js';
import { refusedLocally } from './smtp-transaction.js';

/** The name the engine records as the MX of a captured message. */
export const SANDBOX_HOST = 'sandbox';

/**
 * Sandbox mode's transport (architecture.md, Decisions: sandbox mode): where the engine would
 * hand the signed message to an SMTP session, it is filed in the capture mailbox and every
 * recipient is answered as an MX that took it would answer. No socket is opened, no MX is
 * looked up: everything before this point (claim, compose, DKIM, tracking, events, webhooks)
 * is the real pipeline.
 */
export function createSandboxTransport(deps: { sandbox: Pick<SandboxService, 'capture'>; logger: Logger }): MessageTransport {
  return {
    async send(_target, req, { email, domain }): Promise<TransactionResult> {
      const base = { connected: true, secure: true, remoteHost: SANDBOX_HOST } as const;
      // The same local refusals as the SMTP client: an address it could not write into RCPT TO.
      const local = refusedLocally(req);
      const rcptTo = [...new Set(req.recipients.filter((r) => !local.has(r)).map((r) => r.trim()))];
      if (rcptTo.length === 0) return { ...base, recipients: req.recipients.map((r) => local.get(r)!) };
      if (email.accepted_in_sandbox === 0) {
        // Real mail, accepted before sandbox mode was turned on: captured, it would read DELIVERED
        // while its recipients never get it. It waits (retried like a 451) for a server without
        // sandbox mode, which sends it.
        const response = '451 4.3.2 held: accepted outside sandbox mode, so the sandbox does not capture it; a server without sandbox mode sends it';
        const held = (recipient: string): RecipientResult => ({ recipient, outcome: 'deferred', code: 451, response, hardBounce: false });
        return { ...base, recipients: req.recipients.map((r) => local.get(r) ?? held(r)) };
      }
      let id: string;
      try {
        const parsed = await parseMessage(req.message, { skipHtmlToText: true });
        ({ id } = await deps.sandbox.capture({
          teamId: email.team_id,
          domainId: domain.id,
          emailId: email.id,
          mailFrom: req.mailFrom,
          rcptTo,
          raw: req.message,
          parsed: {
            from: parsed?.from ? (formatMailboxes(parsed.from)[0] ?? parsed.from.text ?? null) : null,
            to: formatMailboxes(parsed?.to),
            cc: formatMailboxes(parsed?.cc),
            replyTo: formatMailboxes(parsed?.replyTo),
            subject: parsed?.subject ?? null,
            messageId: parsed?.messageId ?? null,
            date: parsed?.date && !Number.isNaN(parsed.date.getTime()) ? parsed.date.toISOString() : null,
            headers: headerFields(parsed?.headerLines),
            text: parsed?.text ?? null,
            html: parsed?.html || null,
            attachments: (parsed?.attachments ?? []).map((a) => ({ filename: a.filename ?? null, contentType: a.contentType || 'application/octet-stream', size: a.size ?? a.content.length })),
          },
        }));
      } catch (err) {
        // Not stored (a full disk): a temporary failure, retried like a 451 from an MX.
        deps.logger.error({ err, emailId: email.id }, 'sandbox: storing a captured message failed');
        const response = `451 4.3.0 the sandbox could not store the message: ${(err as Error).message}`;
        const deferred = (recipient: string): RecipientResult => ({ recipient, outcome: 'deferred', code: 451, response, hardBounce: false });
        return { ...base, recipients: req.recipients.map((r) => local.get(r) ?? deferred(r)) };
      }
      const response = `250 2.0.0 captured by the Posthorn sandbox as ${id}`;
      const delivered = (recipient: string): RecipientResult => ({ recipient, outcome: 'delivered', code: 250, response, hardBounce: false });
      return { ...base, transactionStarted: true, recipients: req.recipients.map((r) => local.get(r) ?? delivered(r)) };
    },
    abandonQueued: () => 0,
  };
}
