import type { Logger } from '../../lib/logger.js';
import type { Clock } from '../../lib/clock.js';
import type { DomainsRepository } from '../../store/repositories/domains-repository.js';
import type { EmailRow, EmailsRepository } from '../../store/repositories/emails-repository.js';
import type { BounceNoticeRecipientRow, BounceNoticesRepository, ClaimedBounceNotice, NewBounceNoticeRecipient } from '../../store/repositories/bounce-notices-repository.js';
import type { BusEvent, EventBus } from '../events.js';
import { asciiDomain } from './addresses.js';

// Bounce notices for SMTP submission (submission.bounceNotices, docs/inbound.md): an app that
// only speaks SMTP learns that its message failed the way a classic relay tells it, by a
// non-delivery report to the envelope sender. Only to a sender at one of the email's team's
// verified domains: never to an arbitrary address (backscatter).
//
// Queued like any mail: each recipient that ends is a row written in the transaction that
// records its outcome (a kill after that commit loses nothing). A job claims an email's rows
// with a lease, so on a cluster one node sends one notice naming every recipient that ended;
// a notice the sender's MX defers is tried again on a backoff until the give-up age. At least
// once: a node killed right after a send, before deleting the rows, sends it again.

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
  original: Pick<EmailRow, 'from_addr' | 'to_json' | 'cc_json' | 'subject' | 'message_id' | 'in_reply_to' | 'references_json' | 'headers_json' | 'created_at'>;
  recipients: BounceNoticeRecipient[];
}

/** What one send of a notice came to: permanent for a 5xx refusal; notAttempted when the process is stopping. */
export type BounceNoticeOutcome = { ok: true } | { ok: false; permanent: boolean; error: string; notAttempted?: boolean };

export interface BounceNoticeDeps {
  events: EventBus;
  repo: BounceNoticesRepository;
  emails: Pick<EmailsRepository, 'findHeadAnyTeamFast'>;
  domains: Pick<DomainsRepository, 'findByName'>;
  clock: Clock;
  /** Composes and sends one notice. */
  send: (notice: BounceNotice) => Promise<BounceNoticeOutcome>;
  logger: Logger;
  /** This node: the owner of its claims. */
  owner: string;
  /** Several nodes share the store: only this node's own leases are freed at start. */
  cluster: boolean;
  /** A notice deferred since this long is given up on (outbound.maxAgeHours). */
  maxAgeMs: number;
}

/** How often the store is looked at for due notices (deferred ones, those that waited for other recipients, other nodes' crashes). */
const SWEEP_INTERVAL_MS = 5_000;
/** A notice never waits longer than this for the email's other recipients. */
const MAX_WAIT_MS = 10 * 60_000;
/** A claim runs out after this, so a crashed node's notices are taken over; renewed while the send lasts. */
const LEASE_MS = 5 * 60_000;
/** Events of an email that may close one of its deliveries (and so make its notice ready). */
const CLOSING = new Set(['email.delivered', 'email.bounced', 'email.failed', 'email.rejected', 'email.suppressed', 'email.cancelled']);
/** Notices sent at once: one slow MX holds only its own. */
const CONCURRENCY = 4;
/** After a temporary failure: 1, 5, 15, 30 minutes, then hourly (capped at the give-up). */
const BACKOFF_MS = [1, 5, 15, 30, 60].map((m) => m * 60_000);

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

const fromRow = (r: BounceNoticeRecipientRow): BounceNoticeRecipient => ({
  address: r.recipient,
  reply: r.reply,
  smtpCode: r.smtp_code,
  mxHost: r.mx_host,
  reason: r.reason,
  status: r.status,
  expired: r.expired === 1,
});

/**
 * Writes the pending rows with the outcomes (events.onInTransaction) and sends the notices from
 * the store. start() after the store is up; stop() ends claiming at once and resolves when the
 * notices being sent are done (those not yet handed to a connection are put back).
 */
export function createBounceNoticeJob(deps: BounceNoticeDeps) {
  const log = deps.logger.child({ component: 'bounce-notices' });
  const { repo, clock, owner } = deps;
  /** Events whose transaction wrote pending rows: woken for after their commit. */
  const wrote = new WeakSet<BusEvent>();
  /**
   * Emails this node wrote rows for and has not sent yet (id -> when): their other deliveries'
   * outcomes wake the job at once instead of at the next sweep. A hint only; the store decides.
   */
  const waitingHere = new Map<string, number>();
  /** Notices being sent, with their row ids (their leases are renewed by the sweep). */
  const inFlight = new Map<Promise<void>, number[]>();
  let stopped = false;
  let started = false;
  /** A claim waiting to run (wakes meanwhile share it), and the last one queued. */
  let queued: Promise<Promise<void>[]> | undefined;
  let tail: Promise<unknown> = Promise.resolve();
  /** A claim found every slot taken: the next send to end claims again. */
  let starved = false;
  let sweep: NodeJS.Timeout | undefined;

  /** Every bounce is final for its recipient (a policy or spam refusal too, never retried), as is a give-up. */
  function handleInTransaction(batch: readonly BusEvent[]): void {
    const rows: NewBounceNoticeRecipient[] = [];
    for (const event of batch) {
      if (event.type !== 'email.bounced' && event.type !== 'email.failed') continue;
      const emailId = str(event.data.id);
      const r = emailId ? recipientOf(event) : undefined;
      if (!emailId || !r) continue;
      rows.push({ emailId, recipient: r.address, reply: r.reply, smtpCode: r.smtpCode, mxHost: r.mxHost, reason: r.reason, status: r.status, expired: r.expired, atMs: clock.nowMs() });
      wrote.add(event);
      waitingHere.set(emailId, clock.nowMs());
    }
    if (rows.length) repo.addInOpenTransaction(rows);
  }

  /** The notice for a submitted email whose envelope sender is at a verified domain of its team, or undefined. */
  async function noticeFor(claim: ClaimedBounceNotice): Promise<BounceNotice | undefined> {
    const { emailId } = claim;
    const email = await deps.emails.findHeadAnyTeamFast(emailId);
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
    const recipients: BounceNoticeRecipient[] = [];
    for (const r of claim.rows.map(fromRow)) {
      if (!recipients.some((x) => x.address.toLowerCase() === r.address.toLowerCase())) recipients.push(r);
    }
    return { emailId, teamId: email.team_id, to: `${sender.slice(0, at)}@${domainName}`, original: email, recipients };
  }

  /** Sends one claimed notice and settles its rows: deleted (sent, refused, given up), rescheduled, or put back. */
  async function sendOne(claim: ClaimedBounceNotice): Promise<void> {
    waitingHere.delete(claim.emailId);
    const ids = claim.rows.map((r) => r.id);
    const notice = await noticeFor(claim);
    if (!notice) return repo.remove(owner, ids);
    const fields = { emailId: notice.emailId, teamId: notice.teamId, to: notice.to, recipients: notice.recipients.length };
    const res = await deps.send(notice);
    if (res.ok) {
      log.info(fields, `bounce notice for email ${notice.emailId} sent to ${notice.to}`);
      return repo.remove(owner, ids);
    }
    if (res.notAttempted) return repo.release(owner, ids);
    if (res.permanent) {
      log.warn({ ...fields, error: res.error }, `bounce notice for email ${notice.emailId} to ${notice.to} not sent (refused, not retried): ${res.error}`);
      return repo.remove(owner, ids);
    }
    const now = clock.nowMs();
    const firstFailureAt = Math.min(...claim.rows.map((r) => r.first_failure_at ?? now));
    const giveUpAt = firstFailureAt + deps.maxAgeMs;
    if (now >= giveUpAt) {
      log.warn({ ...fields, error: res.error }, `bounce notice for email ${notice.emailId} to ${notice.to} not sent (gave up after ${Math.round((now - firstFailureAt) / 3_600_000)} hours): ${res.error}`);
      return repo.remove(owner, ids);
    }
    const attempts = Math.max(...claim.rows.map((r) => r.attempts)) + 1;
    const nextAttemptAt = Math.min(now + BACKOFF_MS[Math.min(attempts, BACKOFF_MS.length) - 1]!, giveUpAt);
    log.info({ ...fields, error: res.error, nextAttemptAt: new Date(nextAttemptAt).toISOString() }, `bounce notice for email ${notice.emailId} to ${notice.to} deferred: ${res.error}`);
    return repo.reschedule(owner, ids, { nextAttemptAt, attempts, firstFailureAt });
  }

  /** Claims what is ready for the free slots and starts sending it; returns the sends started. */
  async function claimOnce(): Promise<Promise<void>[]> {
    if (stopped) return [];
    const free = CONCURRENCY - inFlight.size;
    if (free <= 0) {
      starved = true;
      return [];
    }
    const claims = await repo.claimReady(owner, clock.nowMs(), LEASE_MS, MAX_WAIT_MS, free);
    if (claims.length === free) starved = true;
    return claims.map((claim) => {
      const sent: Promise<void> = sendOne(claim)
        .catch((err: unknown) => log.error({ err, emailId: claim.emailId }, `bounce notice for email ${claim.emailId} not sent (tried again when its claim runs out)`))
        .finally(() => inFlight.delete(sent))
        // A slot is free: what waited for one goes now (and settled() waits for it too).
        .then(() => (starved && !stopped ? ((starved = false), wake()) : undefined));
      inFlight.set(sent, claim.rows.map((r) => r.id));
      return sent;
    });
  }

  /** Claims now (after the claim under way); resolves with the sends it started (none if it failed). */
  function claim(): Promise<Promise<void>[]> {
    if (stopped || !started) return Promise.resolve([]);
    if (!queued) {
      const next: Promise<Promise<void>[]> = tail.then(() => {
        queued = undefined;
        return claimOnce();
      });
      queued = next;
      tail = next.catch((err: unknown) => log.error({ err }, 'claiming bounce notices failed'));
    }
    return queued.catch(() => []);
  }

  /** Claims now; resolves once the notices it started are done. */
  function wake(): Promise<void> {
    return claim()
      .then((sends) => Promise.all(sends))
      .then(
        () => undefined,
        () => undefined,
      );
  }

  // Kept for the life of the process: outcomes recorded while stopping still write their rows.
  deps.events.onInTransaction(handleInTransaction);
  // After the commit that wrote rows, or closed another delivery of an email waiting here: look
  // at once (returned, so the bus's settled() waits for it).
  const unsubscribe = deps.events.on('*', (event) => {
    const emailId = str(event.data.id);
    return wrote.has(event) || (CLOSING.has(event.type) && emailId && waitingHere.has(emailId)) ? wake() : undefined;
  });

  return {
    async start(): Promise<void> {
      // A lone node owns every lease a previous run left; on a cluster only its own name's.
      const released = await repo.releaseLeftBehind(deps.cluster ? owner : null);
      if (released) log.info({ released }, 'released bounce notice claims left by a previous run');
      started = true;
      sweep = setInterval(() => {
        // Hints older than the longest wait: another node sent it, or the sweep will.
        for (const [id, at] of waitingHere) if (clock.nowMs() - at > MAX_WAIT_MS) waitingHere.delete(id);
        const ids = [...inFlight.values()].flat();
        if (ids.length) void repo.renew(owner, ids, clock.nowMs() + LEASE_MS).catch((err: unknown) => log.error({ err }, 'renewing bounce notice claims failed'));
        void wake();
      }, SWEEP_INTERVAL_MS);
      sweep.unref();
      void wake();
    },

    /** Stops claiming now; resolves once the notices being sent are done. What is left stays in the store for the next start. */
    async stop(): Promise<void> {
      stopped = true;
      unsubscribe();
      clearInterval(sweep);
      await tail;
      await Promise.allSettled([...inFlight.keys()]);
    },

    /**
     * Claims now (a cluster sweep freed a dead node's claims); resolves once claimed, not once
     * sent: the sweep that calls it runs on the heartbeat, which a slow MX must not hold up.
     */
    async claimNow(): Promise<void> {
      await claim();
    },

    /**
     * Claims now (tests move their clock, then call this); resolves once no notice is being sent,
     * those the sweep may have claimed a moment earlier included.
     */
    async runNow(): Promise<void> {
      await wake();
      while (inFlight.size) await Promise.allSettled([...inFlight.keys()]);
    },
  };
}

export type BounceNoticeJob = ReturnType<typeof createBounceNoticeJob>;
