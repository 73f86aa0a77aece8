import type { Logger } from '../../lib/logger.js';
import type { Clock } from '../../lib/clock.js';
import type { DeliveriesRepository } from '../../store/repositories/deliveries-repository.js';
import type { DomainsRepository } from '../../store/repositories/domains-repository.js';
import type { EmailRow, EmailsRepository } from '../../store/repositories/emails-repository.js';
import type { BusEvent, EventBus } from '../events.js';
import { asciiDomain } from './addresses.js';

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
  /** The envelope sender of the submission: the notice's recipient. */
  to: string;
  original: Pick<EmailRow, 'from_addr' | 'to_json' | 'cc_json' | 'subject' | 'message_id' | 'in_reply_to' | 'headers_json' | 'created_at'>;
  recipients: BounceNoticeRecipient[];
}

export interface BounceNoticeDeps {
  events: EventBus;
  emails: Pick<EmailsRepository, 'findHeadAnyTeamFast'>;
  domains: Pick<DomainsRepository, 'findByName'>;
  deliveries: Pick<DeliveriesRepository, 'listForEmailInTeam'>;
  clock: Clock;
  /** Composes and sends one notice; resolves once it was sent or given up on (never retried). */
  send: (notice: BounceNotice) => Promise<void>;
  logger: Logger;
}

/** How often emails whose notice waits for their other recipients are looked at again. */
const SWEEP_INTERVAL_MS = 5_000;
/** A notice never waits longer than this for the email's other recipients. */
const MAX_WAIT_MS = 10 * 60_000;
/** Events of an email that may close one of its deliveries. */
const CLOSING = new Set(['email.delivered', 'email.bounced', 'email.failed', 'email.rejected', 'email.suppressed', 'email.cancelled']);

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);

function recipientOf(event: BusEvent): BounceNoticeRecipient | undefined {
  const d = event.data;
  const address = str(d.recipient);
  if (!address) return undefined;
  const reply = str(d.response);
  const failedReason = str((d.failed as { reason?: unknown } | undefined)?.reason);
  const dsn = d.dsn as { status?: unknown; remoteMta?: unknown } | undefined;
  const dsnStatus = str(dsn?.status);
  return {
    address,
    reply,
    smtpCode: typeof d.smtpCode === 'number' ? d.smtpCode : null,
    // An incoming DSN names the host that refused it.
    mxHost: str(d.mxHost) ?? str(dsn?.remoteMta),
    reason: failedReason ?? reply ?? 'the message could not be delivered',
    status: dsnStatus,
    expired: failedReason?.startsWith('gave up after ') ?? false,
  };
}

/**
 * Subscribes to the outcomes that end a recipient (a bounce of any kind, a failure). The recipients of one
 * email share a notice: it goes once none of the email's deliveries is due or being attempted
 * (each recipient has its own transaction, since each has its own return path; one still
 * deferred to a later retry does not hold it), or after MAX_WAIT_MS. Returns stop().
 */
export function subscribeBounceNotices(deps: BounceNoticeDeps): { stop(): void } {
  const log = deps.logger.child({ component: 'bounce-notices' });
  /** Emails with a notice to send: their eligible sender and the recipients ended so far. */
  const waiting = new Map<string, { notice: BounceNotice; sinceMs: number }>();
  // The events one write announces arrive together (emit() runs in a loop after the commit):
  // gathered until the next turn, then looked at one email at a time.
  let batch = new Map<string, BounceNoticeRecipient[]>();
  let flushing: Promise<void> | undefined;
  let chain: Promise<void> = Promise.resolve();
  /** Set by stop(): the work queued behind the notice in flight is dropped (best effort, documented). */
  let stopped = false;

  /** The notice for a submitted email whose envelope sender is at a verified domain of its team, or undefined. */
  async function noticeFor(emailId: string): Promise<BounceNotice | undefined> {
    const email = await deps.emails.findHeadAnyTeamFast(emailId);
    // Only mail that came in by submission, with a sender to tell (<> is none).
    const sender = email?.submitted_by;
    if (!email || !sender) return undefined;
    const at = sender.lastIndexOf('@');
    // Domains are kept by their A-labels; an SMTPUTF8 sender may write its domain in Unicode.
    const domainName = at > 0 ? asciiDomain(sender.slice(at + 1)) : '';
    const domain = domainName ? await deps.domains.findByName(email.team_id, domainName) : undefined;
    if (!domain || domain.status !== 'SUCCESS') {
      log.info({ emailId, sender }, 'no bounce notice: the envelope sender is not at a verified domain of the team');
      return undefined;
    }
    return { emailId, teamId: email.team_id, to: `${sender.slice(0, at)}@${domainName}`, original: email, recipients: [] };
  }

  /** Sends the email's notice once none of its other deliveries is due or in flight. */
  async function sendWhenDone(emailId: string): Promise<void> {
    const w = waiting.get(emailId);
    if (!w) return;
    const now = deps.clock.nowMs();
    if (now - w.sinceMs < MAX_WAIT_MS) {
      const rows = await deps.deliveries.listForEmailInTeam(w.notice.teamId, emailId);
      if (rows.some((r) => r.state === 'queued' && (r.lease_owner !== null || r.next_attempt_at <= now))) return;
    }
    waiting.delete(emailId);
    await deps.send(w.notice);
  }

  /** Runs `work` for each email after the work already queued (one email at a time); errors are logged. */
  function look(emailIds: Iterable<string>, work: (emailId: string) => Promise<void>): Promise<void> {
    for (const emailId of emailIds) {
      chain = chain
        .then(() => (stopped ? log.info({ emailId }, `email ${emailId}: no bounce notice looked at or sent (stopping)`) : work(emailId)))
        .catch((err: unknown) => log.error({ err, emailId }, 'a bounce notice could not be sent'));
    }
    return chain;
  }

  function flush(): Promise<void> {
    const taken = batch;
    batch = new Map();
    flushing = undefined;
    return look(taken.keys(), async (emailId) => {
      const ended = taken.get(emailId)!;
      if (ended.length && !waiting.has(emailId)) {
        const notice = await noticeFor(emailId);
        if (notice) waiting.set(emailId, { notice, sinceMs: deps.clock.nowMs() });
      }
      const w = waiting.get(emailId);
      if (!w) return;
      for (const r of ended) {
        if (!w.notice.recipients.some((x) => x.address.toLowerCase() === r.address.toLowerCase())) w.notice.recipients.push(r);
      }
      await sendWhenDone(emailId);
    });
  }

  const unsubscribe = deps.events.on('*', (event) => {
    if (!CLOSING.has(event.type)) return undefined;
    const emailId = str(event.data.id);
    if (!emailId) return undefined;
    // Every bounce is final for its recipient (a policy or spam refusal too, never retried), as is a give-up.
    const ends = event.type === 'email.failed' || event.type === 'email.bounced';
    const recipient = ends ? recipientOf(event) : undefined;
    if (!recipient && !waiting.has(emailId)) return undefined;
    const list = batch.get(emailId) ?? [];
    if (recipient) list.push(recipient);
    batch.set(emailId, list);
    flushing ??= new Promise<void>((resolve) => setImmediate(resolve)).then(flush);
    // Returned so the bus's settled() (tests, a graceful stop) waits for this look.
    return flushing;
  });
  // Deliveries can close without an event of their own (a cc suppressed alone): looked at again.
  // Not while the last sweep's looks are still queued (a slow MX): they would pile up.
  let sweeping = false;
  const sweep = setInterval(() => {
    if (!waiting.size || sweeping) return;
    sweeping = true;
    void look([...waiting.keys()], sendWhenDone).finally(() => {
      sweeping = false;
    });
  }, SWEEP_INTERVAL_MS);
  sweep.unref();

  return {
    stop(): void {
      stopped = true;
      unsubscribe();
      clearInterval(sweep);
    },
  };
}
