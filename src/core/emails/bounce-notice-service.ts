import type { Logger } from '../../lib/logger.js';
import type { DomainsRepository } from '../../store/repositories/domains-repository.js';
import type { EmailRow, EmailsRepository } from '../../store/repositories/emails-repository.js';
import type { BusEvent, EventBus } from '../events.js';

// Bounce notices for SMTP submission (submission.bounceNotices, docs/inbound.md): an app that
// only speaks SMTP learns that its message failed the way a classic relay tells it, by a
// non-delivery report to the envelope sender. Only to a sender at one of the email's team's
// verified domains: never to an arbitrary address (backscatter).
//
// Best effort, after the commit: the outcome is recorded (and its webhooks are in the outbox)
// before a notice is thought of, and nothing here can undo or delay that. A process stopped
// between the commit and the send, or a notice the sender's MX refuses for now, is not tried
// again; the webhooks and the API keep the full record.

export interface BounceNoticeRecipient {
  address: string;
  /** The remote reply (or the DSN's diagnostic), when a server gave one. */
  reply: string | null;
  smtpCode: number | null;
  mxHost: string | null;
  /** Why the recipient is given up on, in words (the reply, or the give-up). */
  reason: string;
  /** An RFC 3463 status reported for it (an inbound DSN's), if any. */
  status: string | null;
  /** Given up on at the give-up age (no final reply). */
  expired: boolean;
}

export interface BounceNotice {
  emailId: string;
  teamId: number;
  outcome: 'BOUNCED' | 'FAILED';
  /** The envelope sender of the submission: the notice's recipient. */
  to: string;
  original: Pick<EmailRow, 'from_addr' | 'to_json' | 'cc_json' | 'subject' | 'message_id' | 'in_reply_to' | 'headers_json' | 'created_at'>;
  recipients: BounceNoticeRecipient[];
}

export interface BounceNoticeDeps {
  events: EventBus;
  emails: Pick<EmailsRepository, 'findHeadAnyTeamFast'>;
  domains: Pick<DomainsRepository, 'findByName'>;
  /** Composes and sends one notice; resolves once it was sent or given up on (never retried). */
  send: (notice: BounceNotice) => Promise<void>;
  logger: Logger;
}

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);

function recipientOf(event: BusEvent): BounceNoticeRecipient | undefined {
  const d = event.data;
  const address = str(d.recipient);
  if (!address) return undefined;
  const reply = str(d.response);
  const failedReason = str((d.failed as { reason?: unknown } | undefined)?.reason);
  const dsnStatus = str((d.dsn as { status?: unknown } | undefined)?.status);
  return {
    address,
    reply,
    smtpCode: typeof d.smtpCode === 'number' ? d.smtpCode : null,
    mxHost: str(d.mxHost),
    reason: failedReason ?? reply ?? 'the message could not be delivered',
    status: dsnStatus,
    expired: failedReason?.startsWith('gave up after ') ?? false,
  };
}

/** Subscribes to the outcomes that end a recipient (hard bounce, failure); returns the unsubscribe. */
export function subscribeBounceNotices(deps: BounceNoticeDeps): () => void {
  const log = deps.logger.child({ component: 'bounce-notices' });
  // The outcomes one write announces arrive together (emit() runs in a loop after the commit):
  // they are gathered until the next turn, so an email gets one notice for its recipients.
  let pending = new Map<string, { emailId: string; outcome: BounceNotice['outcome']; recipients: Map<string, BounceNoticeRecipient> }>();
  let flushing: Promise<void> | undefined;

  async function noticeFor(emailId: string, outcome: BounceNotice['outcome'], recipients: BounceNoticeRecipient[]): Promise<void> {
    const email = await deps.emails.findHeadAnyTeamFast(emailId);
    // Only mail that came in by submission, with a sender to tell (<> is none).
    const sender = email?.submitted_by;
    if (!email || !sender) return;
    const at = sender.lastIndexOf('@');
    const domainName = at > 0 ? sender.slice(at + 1).toLowerCase() : '';
    const domain = domainName ? await deps.domains.findByName(email.team_id, domainName) : undefined;
    if (!domain || domain.status !== 'SUCCESS') {
      log.info({ emailId, sender }, 'no bounce notice: the envelope sender is not at a verified domain of the team');
      return;
    }
    await deps.send({ emailId, teamId: email.team_id, outcome, to: sender, original: email, recipients });
  }

  async function flush(): Promise<void> {
    const batch = pending;
    pending = new Map();
    flushing = undefined;
    for (const p of batch.values()) {
      try {
        await noticeFor(p.emailId, p.outcome, [...p.recipients.values()]);
      } catch (err) {
        log.error({ err, emailId: p.emailId }, 'a bounce notice could not be sent');
      }
    }
  }

  function handle(event: BusEvent): Promise<void> | undefined {
    // A soft bounce is not the end of a recipient: it is retried until the give-up (FAILED).
    if (event.type === 'email.bounced' && (event.data.bounce as { type?: unknown } | undefined)?.type !== 'Permanent') return undefined;
    const emailId = str(event.data.id);
    const recipient = recipientOf(event);
    if (!emailId || !recipient) return undefined;
    const outcome = event.type === 'email.bounced' ? 'BOUNCED' : 'FAILED';
    const key = `${emailId}\u0000${outcome}`;
    const entry = pending.get(key) ?? { emailId, outcome, recipients: new Map<string, BounceNoticeRecipient>() };
    entry.recipients.set(recipient.address.toLowerCase(), recipient);
    pending.set(key, entry);
    flushing ??= new Promise<void>((resolve) => setImmediate(resolve)).then(flush);
    // Returned so the bus's settled() (a graceful stop) waits for the notices under way.
    return flushing;
  }

  const offBounced = deps.events.on('email.bounced', handle);
  const offFailed = deps.events.on('email.failed', handle);
  return () => {
    offBounced();
    offFailed();
  };
}
