import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../lib/logger.js';
import type { DeliveriesRepository, DeliveryRow, DeliveryUpdate, ResultsWrite, StatusEventWrite } from '../../store/repositories/deliveries-repository.js';
import type { EmailBody, EmailHead, EmailsRepository } from '../../store/repositories/emails-repository.js';
import type { DomainRecord, DomainsRepository } from '../../store/repositories/domains-repository.js';
import type { SuppressionsRepository } from '../../store/repositories/suppressions-repository.js';
import type { BusEvent, EventBus } from '../events.js';
import { statusEventType, statusRank, type EmailStatus } from '../emails/email-status.js';
import { addressKey, parseMailbox } from '../emails/addresses.js';
import { retryDelayMs } from './retry-schedule.js';
import { bounceSubType } from './bounce-sub-type.js';
import { emailBusEvent } from '../emails/email-bus-event.js';
import { badRequest, notFound } from '../errors.js';
import { retryOnConnectionLoss } from '../connection-retry.js';
import { replaceUnstorable, sliceWhole } from '../../lib/nul-text.js';
import type { OutcomeSample } from '../metrics/metrics.js';

import type { AttemptResult, AttemptTrace, DeliveryGroup, RecipientView } from './delivery-types.js';

export type { AttemptResult, AttemptTrace, DeliveryGroup, RecipientView, SessionTls } from './delivery-types.js';

export interface DeliveryServiceDeps {
  deliveries: DeliveriesRepository;
  emails: EmailsRepository;
  domains: DomainsRepository;
  suppressions: Pick<SuppressionsRepository, 'findSuppressed'>;
  events: EventBus;
  clock: Clock;
  logger: Logger;
  /** Give up on a temporarily failing delivery this long after it became due (acceptance, or its scheduled time). */
  maxAgeMs: number;
  /** Lease on claimed rows; a crashed holder's rows are claimable again after it. */
  leaseMs: number;
  owner: string;
  /** Told each recorded outcome after its commit (metrics). */
  observe?: (samples: OutcomeSample[]) => void;
  /** Sandbox mode: an unverified domain of the team may send (architecture.md, Decisions: sandbox mode). */
  sandbox?: boolean;
}

/** At most this many recipients per SMTP transaction (RFC 5321 4.5.3.1.8 requires servers to take 100). */
export const MAX_RCPTS_PER_TRANSACTION = 100;

/** Remote replies are kept up to this long (row, events, webhooks). */
const MAX_RESPONSE_CHARS = 2000;

/**
 * A remote reply as the row, the events and the webhooks keep it. A hostile or broken MX may
 * answer with a megabyte, or with NUL bytes (which PostgreSQL cannot store in text: the whole
 * results write failed, and the delivery stayed leased until it was attempted again, an accepted
 * message sent twice): 2,000 characters at most, cut between code points, never inside a
 * surrogate pair, and U+FFFD for NUL or half a pair, as for received mail (lib/nul-text.ts).
 */
export function storedResponse(response: string): string {
  const clean = replaceUnstorable(response);
  return clean.length <= MAX_RESPONSE_CHARS ? clean : `${sliceWhole(clean, MAX_RESPONSE_CHARS - 1)}…`;
}

/** How often expired leases are looked for. */
const LEASE_SWEEP_INTERVAL_MS = 30_000;

/** The rank of an event that is recorded without moving latestStatus (no status is below it). */
const NO_STATUS_CHANGE = -1;

export function createDeliveryService(deps: DeliveryServiceDeps) {
  const { clock } = deps;
  let lastLeaseSweepMs = -Infinity;
  let lastRenewalMs = -Infinity;

  /**
   * A lease only says "the holder died" when it runs out: the leases of deliveries this node is
   * still attempting (a backlog behind a slow host can wait longer than a lease) are renewed
   * once a third of a lease has passed since the last renewal, so neither this node's sweep nor
   * another node's frees them and has them sent a second time while their attempt goes on.
   */
  async function keepLeases(attempting: ReadonlySet<number>, now: number): Promise<void> {
    if (!attempting.size || (now - lastRenewalMs < deps.leaseMs / 3 && now >= lastRenewalMs)) return;
    await deps.deliveries.renewLeases([...attempting], deps.owner, now + deps.leaseMs);
    lastRenewalMs = now;
  }

  /**
   * Suppressions are checked again when a delivery is due, not only at acceptance: a send
   * scheduled for tomorrow, or one retrying for hours, must not go to an address that
   * hard-bounced, complained or was suppressed by hand in the meantime. One query per team per
   * claim. A suppressed recipient's row is closed unattempted; when every To is suppressed and
   * nothing was attempted yet, the whole email is SUPPRESSED (cc and bcc included), as it would
   * have been at acceptance. The closed rows of all groups are recorded in one write. Returns
   * the groups left to send.
   */
  async function dropSuppressed(groups: DeliveryGroup[], attempting: ReadonlySet<number>): Promise<DeliveryGroup[]> {
    const sentRank = statusRank('SENT');
    // The To addresses of an email not attempted yet whose cc/bcc rows are in this claim: its
    // To rows may not be (due later, or their destination was busy and skipped), and a cc must
    // not go out alone when every To is suppressed.
    const toKeysOf = new Map<string, string[]>();
    const keysByTeam = new Map<number, Set<string>>();
    for (const g of groups) {
      const keys = keysByTeam.get(g.email.team_id) ?? new Set<string>();
      for (const d of g.deliveries) keys.add(addressKey(d.recipient));
      if (g.email.status_rank < sentRank && !toKeysOf.has(g.email.id) && g.deliveries.some((d) => d.kind !== 'to')) {
        const toKeys = toKeysOfEmail(g.email);
        toKeysOf.set(g.email.id, toKeys);
        for (const k of toKeys) keys.add(k);
      }
      keysByTeam.set(g.email.team_id, keys);
    }
    const suppressedByTeam = new Map<number, Set<string>>();
    for (const [teamId, keys] of keysByTeam) {
      const found = await deps.suppressions.findSuppressed(teamId, [...keys]);
      if (found.size) suppressedByTeam.set(teamId, found);
    }
    // An email already made SUPPRESSED here has queued rows left only when they were not in
    // that claim (another due time): they go the same way.
    const alreadySuppressed = (g: DeliveryGroup) => g.email.latest_status === 'SUPPRESSED';
    if (!suppressedByTeam.size && !groups.some(alreadySuppressed)) return groups;

    const kept: DeliveryGroup[] = [];
    const dropped: { group: DeliveryGroup; results: AttemptResult[] }[] = [];
    const emailSuppressed = new Map<string, boolean>();
    for (const g of groups) {
      const suppressed = suppressedByTeam.get(g.email.team_id);
      const isSuppressed = (key: string) => suppressed?.has(key) ?? false;
      const hit = g.deliveries.some((d) => isSuppressed(addressKey(d.recipient)));
      const everyKnownToSuppressed = toKeysOf.get(g.email.id)?.every(isSuppressed) ?? false;
      if (!hit && !everyKnownToSuppressed && !alreadySuppressed(g) && !emailSuppressed.get(g.email.id)) {
        kept.push(g);
        continue;
      }
      let whole = emailSuppressed.get(g.email.id);
      if (whole === undefined) {
        if (alreadySuppressed(g)) whole = true;
        else if (g.email.status_rank >= sentRank) whole = false;
        else whole = toKeysOf.has(g.email.id) ? everyKnownToSuppressed : await everyToSuppressed(g.email);
        emailSuppressed.set(g.email.id, whole);
      }
      // Rows still attempted here (lease ran out, taken again) are the engine's: closing them would drop the attempt's outcome.
      const drop = (whole ? g.deliveries : g.deliveries.filter((d) => isSuppressed(addressKey(d.recipient)))).filter((d) => !attempting.has(d.id));
      if (!drop.length) {
        kept.push(g);
        continue;
      }
      const rest = g.deliveries.filter((d) => !drop.includes(d));
      dropped.push({
        group: { ...g, deliveries: drop },
        results: drop.map((d) => ({
          deliveryId: d.id,
          outcome: 'suppressed' as const,
          response: isSuppressed(addressKey(d.recipient)) ? 'the recipient was put on the suppression list after the email was accepted' : 'every To recipient is on the suppression list',
          emailSuppressed: whole,
        })),
      });
      if (rest.length) kept.push({ ...g, deliveries: rest });
    }
    if (dropped.length) await recordResults(dropped, null);
    return kept;
  }

  /**
   * Why Posthorn will not send a group's mail from its domain now, or undefined: checked again when
   * due, as at acceptance, so mail does not go out once its domain is deleted or its records are
   * gone (unsigned, or signed with a key nobody publishes any more). Not a retry: REJECTED.
   */
  function refusalOf(g: DeliveryGroup): string | undefined {
    if (!g.domain) return 'the sending domain was deleted before delivery';
    // Lapsed since acceptance, or never verified (accepted in sandbox mode, due on a server without it).
    if (g.domain.status !== 'SUCCESS' && !deps.sandbox) {
      return `the sending domain ${g.domain.name} is not verified (${g.domain.status}) now that its mail is due: publish its DNS records and verify it, then resend (only a server in sandbox mode sends from a domain that is not verified, to its capture mailbox)`;
    }
    return undefined;
  }

  /**
   * Closes the deliveries of groups whose domain may not send (refusalOf) as REJECTED, except rows
   * still attempted here, in one write for all of them; returns the rest.
   */
  async function rejectUnsendable(groups: DeliveryGroup[], attempting: ReadonlySet<number>): Promise<DeliveryGroup[]> {
    const kept: DeliveryGroup[] = [];
    const rejected: { group: DeliveryGroup; results: AttemptResult[] }[] = [];
    for (const g of groups) {
      const reason = refusalOf(g);
      const refused = reason === undefined ? [] : g.deliveries.filter((d) => !attempting.has(d.id));
      const rest = refused.length ? g.deliveries.filter((d) => attempting.has(d.id)) : g.deliveries;
      if (rest.length) kept.push(rest === g.deliveries ? g : { ...g, deliveries: rest });
      if (refused.length) rejected.push({ group: { ...g, deliveries: refused }, results: refused.map((d) => ({ deliveryId: d.id, outcome: 'rejected' as const, response: reason! })) });
    }
    if (rejected.length) await recordResults(rejected, null);
    return kept;
  }

  function toKeysOfEmail(email: EmailHead): string[] {
    return (JSON.parse(email.to_json) as string[]).map((m) => addressKey(parseMailbox(m, 'to').address));
  }

  async function everyToSuppressed(email: EmailHead): Promise<boolean> {
    const to = toKeysOfEmail(email);
    const found = await deps.suppressions.findSuppressed(email.team_id, to);
    return to.every((k) => found.has(k));
  }

  /** One group's share of a results write, and what to announce and log once it is recorded. */
  function prepareResults(group: DeliveryGroup, results: AttemptResult[], traces: readonly AttemptTrace[], now: Date) {
    const nowIso = now.toISOString();
    const email = group.email;
    const byId = new Map(group.deliveries.map((d) => [d.id, d]));
    const updates: DeliveryUpdate[] = [];
    const events: StatusEventWrite[] = [];
    const suppressions: ResultsWrite['suppressions'] = [];
    const bus: { deliveryId: number; status: Exclude<EmailStatus, 'SCHEDULED'>; extra: Record<string, unknown> }[] = [];
    // One log line per recipient's outcome (docs/operations.md, Logs), written once it is recorded.
    const outcomes: { deliveryId: number; fields: Record<string, unknown> }[] = [];
    const logging = deps.logger.isLevelEnabled('info');
    const logOutcome = (d: DeliveryRow, outcome: string, fields: Record<string, unknown>) => {
      if (logging) outcomes.push({ deliveryId: d.id, fields: { event: `delivery.${outcome}`, emailId: email.id, teamId: email.team_id, deliveryId: d.id, recipient: d.recipient, ...fields } });
    };

    for (const r of results) {
      const d = byId.get(r.deliveryId);
      if (!d) continue;
      const ev = (status: Exclude<EmailStatus, 'SCHEDULED'>, data: Record<string, unknown>) => {
        events.push({ emailId: email.id, status, rank: statusRank(status), data, at: nowIso, deliveryId: d.id });
        bus.push({ deliveryId: d.id, status, extra: data });
      };
      const attempts = d.attempts + 1;
      // Events, webhooks and the row keep what storedResponse() leaves of the reply.
      const response = storedResponse(r.response);
      const base = { recipient: d.recipient, mxHost: r.mxHost ?? null, smtpCode: r.code ?? null, response, ...(r.tls ? { tls: r.tls } : {}), ...(r.source ? { source: r.source } : {}) };
      const update = { id: d.id, attempts, code: r.code ?? null, response, mxHost: r.mxHost ?? null };
      const wire = { attempt: attempts, mxHost: r.mxHost ?? null, smtpCode: r.code ?? null, response, ...(r.source ? { source: r.source } : {}) };
      if (r.outcome === 'delivered') {
        updates.push({ ...update, state: 'delivered', nextAttemptAt: d.next_attempt_at });
        ev('DELIVERED', base);
        logOutcome(d, 'delivered', wire);
      } else if (r.outcome === 'bounced') {
        updates.push({ ...update, state: 'bounced', nextAttemptAt: d.next_attempt_at });
        ev('BOUNCED', { ...base, bounce: { type: r.hardBounce ? 'Permanent' : 'Transient', subType: bounceSubType(r), ...(r.category ? { category: r.category } : {}), message: response } });
        if (r.hardBounce) {
          suppressions.push({ teamId: email.team_id, email: addressKey(d.recipient), reason: 'HARD_BOUNCE', source: email.id, at: nowIso, deliveryId: d.id });
        }
        logOutcome(d, 'bounced', { ...wire, hardBounce: !!r.hardBounce });
      } else if (r.outcome === 'suppressed') {
        // Not an attempt: the attempt count, last SMTP code and MX host stay as they were; the
        // response says why the row was closed (posthorn queue shows it).
        updates.push({ ...update, attempts: d.attempts, code: d.last_code, response, mxHost: d.mx_host, state: 'suppressed', nextAttemptAt: d.next_attempt_at });
        const data = { recipient: d.recipient, suppressed: { reason: response } };
        logOutcome(d, 'suppressed', { reason: response });
        if (r.emailSuppressed) ev('SUPPRESSED', data);
        // One recipient of several: on record in the email's events, latestStatus unchanged.
        else events.push({ emailId: email.id, status: 'SUPPRESSED', rank: NO_STATUS_CHANGE, data, at: nowIso, deliveryId: d.id });
      } else if (r.outcome === 'rejected') {
        // Not an attempt (nothing was sent): the row is closed with the reason.
        updates.push({ ...update, attempts: d.attempts, code: d.last_code, mxHost: d.mx_host, state: 'failed', nextAttemptAt: d.next_attempt_at });
        ev('REJECTED', { recipient: d.recipient, mxHost: null, smtpCode: null, response, rejected: { reason: response } });
        logOutcome(d, 'rejected', { reason: response });
      } else if (r.outcome === 'failed') {
        updates.push({ ...update, state: 'failed', nextAttemptAt: d.next_attempt_at });
        ev('FAILED', { ...base, failed: { reason: response } });
        logOutcome(d, 'failed', { ...wire, reason: response });
      } else {
        const age = now.getTime() - d.due_since;
        const giveUpAt = d.due_since + deps.maxAgeMs;
        if (age >= deps.maxAgeMs) {
          updates.push({ ...update, state: 'failed', nextAttemptAt: d.next_attempt_at });
          const reason = `gave up after ${attempts} attempts over ${Math.round(age / 3_600_000)} hours; last reply: ${response}`;
          ev('FAILED', { ...base, failed: { reason } });
          logOutcome(d, 'failed', { ...wire, reason });
        } else {
          // The last retry falls at the give-up age, not up to a 3-hour step (or a 6-hour
          // "try again in" hint) past it: FAILED is reported when promised.
          const next = Math.min(now.getTime() + retryDelayMs(attempts, r.retryAfterMs), giveUpAt);
          updates.push({ ...update, state: 'queued', nextAttemptAt: next });
          const data = { ...base, attempt: attempts, nextAttemptAt: new Date(next).toISOString() };
          logOutcome(d, 'deferred', { ...wire, nextAttemptAt: data.nextAttemptAt });
          events.push({ emailId: email.id, status: 'DELIVERY_DELAYED', rank: statusRank('DELIVERY_DELAYED'), data, at: nowIso, deliveryId: d.id });
          // Announce a delay once per recipient, not on every retry.
          if (attempts === 1) bus.push({ deliveryId: d.id, status: 'DELIVERY_DELAYED', extra: data });
        }
      }
    }

    const traceRows = traces.map((t) => ({
      email_id: email.id,
      team_id: email.team_id,
      rcpt_domain: group.rcptDomain,
      started_at: t.startedAt || now.getTime(),
      mx_host: t.mxHost,
      address: t.address,
      source: t.source,
      source_name: t.sourceName ?? null,
      tls_json: t.tls ? JSON.stringify(t.tls) : null,
      results_json: JSON.stringify(t.results.map((r) => ({ ...r, response: storedResponse(r.response) }))),
      transcript_json: JSON.stringify(t.lines),
    }));
    return { group, results, updates, events, suppressions, bus, outcomes, logging, traceRows };
  }

  /**
   * Records the results of one or more groups in ONE write (the results' transaction), then
   * announces and logs them. `inTransaction` runs inside that write with how many deliveries it
   * recorded (an operator's bounce: the batch and its audit entry commit together); it may run
   * more than once, like the write. Returns how many were recorded (a row closed meanwhile,
   * purged or suppressed, keeps its outcome).
   */
  async function recordResults(
    parts: readonly { group: DeliveryGroup; results: AttemptResult[]; traces?: readonly AttemptTrace[] }[],
    attemptStartedAt: Date | null,
    inTransaction?: (recorded: number) => void,
    /** The lease the rows were taken under (failLeased: an operator's). */
    owner = deps.owner,
  ): Promise<number> {
    const now = clock.now();
    const nowIso = now.toISOString();
    const prepared = parts.map((p) => prepareResults(p.group, p.results, p.traces ?? [], now));
    const busEvent = (email: EmailHead, status: Exclude<EmailStatus, 'SCHEDULED'>, extra: Record<string, unknown>, at: string) =>
      emailBusEvent(statusEventType(status), email, status, at, extra);
    let announced: BusEvent[] = [];
    let recorded: ReadonlySet<number> = new Set();
    await deps.deliveries.applyResults(
      {
        sent: attemptStartedAt ? { emailIds: [...new Set(prepared.map((p) => p.group.email.id))], at: attemptStartedAt.toISOString(), rank: statusRank('SENT') } : undefined,
        updates: prepared.length === 1 ? prepared[0]!.updates : prepared.flatMap((p) => p.updates),
        events: prepared.length === 1 ? prepared[0]!.events : prepared.flatMap((p) => p.events),
        suppressions: prepared.length === 1 ? prepared[0]!.suppressions : prepared.flatMap((p) => p.suppressions),
        traces: prepared.length === 1 ? prepared[0]!.traceRows : prepared.flatMap((p) => p.traceRows),
        owner,
      },
      nowIso,
      (newlySent, applied) => {
        // Inside the results' transaction: the webhook outbox rows commit with them. SENT is
        // announced only by the write that recorded it (it may run twice: the last run counts).
        // A row closed meanwhile (purged, suppressed) kept its outcome: nothing to announce.
        announced = [];
        const sentAnnounced = new Set<string>();
        for (const p of prepared) {
          const email = p.group.email;
          if (attemptStartedAt && newlySent.includes(email.id) && !sentAnnounced.has(email.id)) {
            sentAnnounced.add(email.id);
            announced.push(busEvent(email, 'SENT', {}, attemptStartedAt.toISOString()));
          }
          for (const b of p.bus) if (applied.has(b.deliveryId)) announced.push(busEvent(email, b.status, b.extra, nowIso));
        }
        recorded = applied;
        deps.events.inTransaction(announced);
        inTransaction?.(applied.size);
      },
    );
    for (const e of announced) deps.events.emit(e);
    for (const p of prepared) {
      const email = p.group.email;
      const closedMeanwhile = p.updates.filter((u) => !recorded.has(u.id)).length;
      if (closedMeanwhile > 0) {
        deps.logger.warn({ emailId: email.id, closedMeanwhile }, 'attempt results arrived for deliveries closed meanwhile (purged or suppressed); their outcome was kept');
      }
      if (deps.observe) {
        const acceptedAtMs = Date.parse(email.created_at);
        const hard = new Set(p.results.filter((r) => r.hardBounce).map((r) => r.deliveryId));
        const sourceOf = new Map(p.results.map((r) => [r.deliveryId, r.source ?? 'default']));
        const samples = p.updates
          .filter((u) => recorded.has(u.id))
          .map((u): OutcomeSample => ({
            outcome: u.state === 'queued' ? 'deferred' : u.state === 'cancelled' ? 'failed' : u.state,
            recipientDomain: p.group.rcptDomain,
            mxHost: u.mxHost,
            source: sourceOf.get(u.id) ?? 'default',
            hardBounce: hard.has(u.id),
            acceptedAtMs,
            atMs: now.getTime(),
          }));
        deps.observe(samples);
      }
      if (p.logging) {
        for (const o of p.outcomes) {
          if (!recorded.has(o.deliveryId)) continue;
          const f = o.fields;
          deps.logger.info(f, `${f.event} ${f.recipient} (email ${email.id})${f.response !== undefined && f.event !== 'delivery.suppressed' ? `: ${String(f.response).slice(0, 200)}` : ''}`);
        }
      }
    }
    return recorded.size;
  }

  const service = {
    /** An email's body, read when its message is composed; undefined once the email is gone (its team deleted). */
    async bodyOf(emailId: string): Promise<EmailBody | undefined> {
      return deps.emails.findBodyAnyTeamFast(emailId);
    },

    /**
     * Claims due deliveries (none for `skipDomains`) and groups them by (email, destination
     * domain). `attempting`: the deliveries this node's attempts are still under way for, whose
     * leases are kept (renewed before the sweep, with its time: a clock that jumped past them
     * does not free them either).
     */
    async claim(limit: number, skipDomains: readonly string[] = [], attempting: ReadonlySet<number> = new Set()): Promise<DeliveryGroup[]> {
      const now = clock.nowMs();
      await keepLeases(attempting, now);
      if (now - lastLeaseSweepMs >= LEASE_SWEEP_INTERVAL_MS || now < lastLeaseSweepMs) {
        lastLeaseSweepMs = now;
        const released = await deps.deliveries.releaseExpiredLeases(now);
        if (released) deps.logger.warn({ released }, 'released expired delivery leases (a worker died or hung)');
      }
      const rows = await deps.deliveries.claimDue(deps.owner, now, deps.leaseMs, limit, skipDomains);
      if (!rows.length) return [];
      const byKey = new Map<string, DeliveryRow[]>();
      for (const r of rows) {
        const key = `${r.email_id}\u0000${r.rcpt_domain}`;
        const list = byKey.get(key) ?? [];
        list.push(r);
        byKey.set(key, list);
      }
      const emailCache = new Map<string, EmailHead | undefined>();
      const domainCache = new Map<number, DomainRecord | undefined>();
      const poolCache = new Map<number, string | null>();
      const groups: DeliveryGroup[] = [];
      for (const list of byKey.values()) {
        const first = list[0]!;
        if (!emailCache.has(first.email_id)) emailCache.set(first.email_id, await deps.emails.findHeadAnyTeamFast(first.email_id));
        const email = emailCache.get(first.email_id);
        if (!email) continue; // deleted with its team: the cascade removed the deliveries too
        let domain: DomainRecord | undefined;
        if (email.domain_id !== null) {
          if (!domainCache.has(email.domain_id)) domainCache.set(email.domain_id, await deps.domains.findByIdAnyTeam(email.domain_id));
          domain = domainCache.get(email.domain_id);
          if (!poolCache.has(email.domain_id)) poolCache.set(email.domain_id, await deps.domains.egressPoolOf(email.domain_id));
        }
        const egressPool = email.domain_id === null ? null : (poolCache.get(email.domain_id) ?? null);
        for (let i = 0; i < list.length; i += MAX_RCPTS_PER_TRANSACTION) {
          groups.push({ email, domain, rcptDomain: first.rcpt_domain, deliveries: list.slice(i, i + MAX_RCPTS_PER_TRANSACTION), egressPool });
        }
      }
      return dropSuppressed(await rejectUnsendable(groups, attempting), attempting);
    },

    /** The leases of deliveries still being attempted, renewed when due (for an engine that is not claiming: claim() does it). */
    async keepLeases(attempting: ReadonlySet<number>): Promise<void> {
      await keepLeases(attempting, clock.nowMs());
    },

    /** Puts claimed rows back untouched, still due (not attempted: their destination was busy). */
    async releaseGroups(groups: readonly DeliveryGroup[]): Promise<void> {
      await deps.deliveries.releaseLeases(groups.flatMap((g) => g.deliveries.map((d) => d.id)), deps.owner);
    },

    /**
     * Puts claimed rows back unattempted until `untilMs` (traffic shaping held them): no attempt
     * counted, no event; `reason` shows in the operator's queue.
     */
    async parkGroups(groups: readonly DeliveryGroup[], untilMs: number, reason: string): Promise<void> {
      await deps.deliveries.parkLeases(groups.flatMap((g) => g.deliveries.map((d) => d.id)), deps.owner, untilMs, reason, clock.now().toISOString());
    },

    /**
     * Operator gives up on one queued delivery: recorded as FAILED like a give-up.
     * `inTransaction` runs inside that write (the operator's audit entry commits with it).
     */
    async purge(deliveryId: number, inTransaction?: (recorded: number) => void): Promise<void> {
      const d = await deps.deliveries.findById(deliveryId);
      if (!d || d.state !== 'queued') throw notFound(`delivery ${deliveryId} is not queued`);
      const email = await deps.emails.findByIdAnyTeam(d.email_id);
      if (!email) throw notFound(`delivery ${deliveryId} has no email`);
      // Leased first, atomically: an attempt in flight would otherwise record DELIVERED over
      // the FAILED written here (the message may already be on the wire).
      const owner = `${deps.owner}:purge`;
      if (!(await deps.deliveries.takeLease(deliveryId, owner, clock.nowMs() + deps.leaseMs))) {
        throw badRequest(`delivery ${deliveryId} is being attempted right now; try again when the attempt has ended`);
      }
      await this.failLeased([d], 'purged by an operator', owner, inTransaction);
    },

    /**
     * Records deliveries an operator leased as `owner` (so the engine does not take them
     * meanwhile) as FAILED with `reason`: events and webhooks as for any failure. No attempt
     * started, so no SENT. All of them in ONE write, in which `inTransaction` runs with how many
     * were failed (the operator's audit entry commits with them). When the write fails the
     * leases are given back, so the engine need not wait for them to run out.
     */
    async failLeased(rows: readonly DeliveryRow[], reason: string, owner: string, inTransaction?: (failed: number) => void): Promise<number> {
      const groups = new Map<string, DeliveryRow[]>();
      for (const r of rows) {
        const key = `${r.email_id}\u0000${r.rcpt_domain}`;
        groups.set(key, [...(groups.get(key) ?? []), r]);
      }
      const parts: { group: DeliveryGroup; results: AttemptResult[] }[] = [];
      for (const list of groups.values()) {
        const email = await deps.emails.findHeadAnyTeamFast(list[0]!.email_id);
        if (!email) continue; // deleted with its team meanwhile
        parts.push({
          group: { email, domain: undefined, rcptDomain: list[0]!.rcpt_domain, deliveries: list, egressPool: null },
          results: list.map((d) => ({ deliveryId: d.id, outcome: 'failed' as const, response: reason })),
        });
      }
      if (!parts.length) return 0;
      try {
        return await recordResults(parts, null, inTransaction, owner);
      } catch (err) {
        await deps.deliveries.releaseLeases(rows.map((r) => r.id), owner).catch(() => undefined);
        throw err;
      }
    },

    /**
     * One email's recipients as its owner sees them: where each stands, the last MX reply,
     * and when the next attempt is due. The caller has checked the email is in scope.
     */
    async recipientsOf(teamId: number, emailId: string): Promise<RecipientView[]> {
      return (await deps.deliveries.listForEmailInTeam(teamId, emailId)).map((d) => ({
        recipient: d.recipient,
        kind: d.kind,
        state: d.state,
        attempts: d.attempts,
        mxHost: d.mx_host,
        lastCode: d.last_code,
        lastResponse: d.last_response,
        nextAttemptAt: d.state === 'queued' ? new Date(d.next_attempt_at).toISOString() : null,
        updatedAt: d.updated_at,
      }));
    },

    /** Operator: deliveries by state (the queue command's summary). */
    async countsByState(): Promise<{ state: string; count: number }[]> {
      return (await deps.deliveries.countsByState()).map((r) => ({ state: r.state, count: r.count }));
    },

    /** Operator: the next queued deliveries, soonest due first. */
    async listQueued(limit: number) {
      return deps.deliveries.listQueued(limit);
    },

    async nextDueAt(): Promise<number | null> {
      return deps.deliveries.nextDueAt();
    },

    async releaseStaleLeases(): Promise<number> {
      return deps.deliveries.releaseAllLeases();
    },

    /**
     * Records one attempt: per-recipient state, status events (latestStatus moves forward
     * only), hard-bounce suppressions, retries on the schedule, FAILED past the give-up
     * age; then announces the events. `goOn` says whether a write that lost its store
     * connection is still worth trying again (the engine: not once it is stopping). `attemptStartedAt` is the start of an attempt in which a
     * remote server took part, and stamps SENT if the email has none yet; null when no server
     * did (architecture.md, Decisions: email status).
     */
    async complete(group: DeliveryGroup, attemptStartedAt: Date | null, results: AttemptResult[], traces: readonly AttemptTrace[] = [], goOn?: () => boolean): Promise<void> {
      // A write cut off from the store is tried again while the leases are still ours: given
      // up, they would run out and the message go to the MX again (core/connection-retry.ts).
      await retryOnConnectionLoss(() => recordResults([{ group, results, traces }], attemptStartedAt), goOn);
    },
  };
  return service;
}
export type DeliveryService = ReturnType<typeof createDeliveryService>;
export type { EmailBody, EmailHead } from '../../store/repositories/emails-repository.js';
