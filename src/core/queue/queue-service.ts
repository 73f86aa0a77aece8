import type { Clock } from '../../lib/clock.js';
import { newId } from '../../lib/ids.js';
import type { QueueRepository, QueueSelector, QueueState, SuspensionRow } from '../../store/repositories/queue-repository.js';
import type { DeliveriesRepository } from '../../store/repositories/deliveries-repository.js';
import type { EmailsRepository } from '../../store/repositories/emails-repository.js';
import type { TeamsRepository } from '../../store/repositories/teams-repository.js';
import { canonicalHost } from '../domains/domain-names.js';
import { badRequest, notFound } from '../errors.js';
import { isIntId } from '../int-id.js';
import { decodeIdCursor, encodeIdCursor } from '../id-cursor.js';
import { actorLabel, type AuditService, type OperatorActor } from '../operators/audit-service.js';
import type { DeliveryService, SessionTls } from '../deliveries/delivery-service.js';
import type { ShapingOperator, ShapingState } from '../shaping/shaping-view.js';

/*
 * The operator's queue (docs/operations.md, "The operator API"): what is waiting for which destination,
 * suspensions that hold mail without attempting it, bulk retry and bounce, and the trace of each
 * attempt. Every change is written to the audit log with who made it, in the change's own
 * transaction: the change and its entry commit together or not at all.
 */

export type { QueueSelector, QueueState };
export const QUEUE_STATES = ['ready', 'scheduled', 'deferred', 'inflight', 'suspended'] as const satisfies readonly QueueState[];

/** The most queued deliveries one page of `messages` shows (the API's and the CLI's --limit bound). */
export const MAX_QUEUE_PAGE = 500;
/** Bounce works through matching deliveries in batches of this many (short writes). */
const BOUNCE_BATCH = 500;
/** Suspensions are kept this long after they ended, for the record. */
const ENDED_SUSPENSION_KEEP_MS = 30 * 86_400_000;
const MAX_SUSPENSION_MINUTES = 30 * 24 * 60;
const MAX_DESTINATIONS = 500;
const MAX_REASON = 500;

/** An operator's reason, trimmed: required, and short enough to show in a queue row. */
export function reasonOf(raw: string): string {
  const reason = raw.trim();
  if (!reason) throw badRequest('reason: must not be empty');
  if (reason.length > MAX_REASON) throw badRequest(`reason: at most ${MAX_REASON} characters`);
  return reason;
}

/** A suspension's length: more than 0 minutes, at most 30 days. */
export function suspensionMinutes(minutes: number): number {
  if (!(minutes > 0 && minutes <= MAX_SUSPENSION_MINUTES)) throw badRequest(`minutes: must be more than 0 and at most ${MAX_SUSPENSION_MINUTES} (30 days)`);
  return minutes;
}

export interface SuspensionView {
  id: string;
  destination: string | null;
  teamId: number | null;
  campaignId: string | null;
  reason: string;
  until: string;
  createdBy: string;
  createdAt: string;
}

export interface QueueServiceDeps {
  queue: QueueRepository;
  deliveriesRepo: DeliveriesRepository;
  emails: EmailsRepository;
  deliveries: DeliveryService;
  audit: AuditService;
  clock: Clock;
  owner: string;
  leaseMs: number;
  /** Open outbound connections by MX host right now (the connection pool's view). */
  openConnections: () => Map<string, number>;
  /** Called when held or deferred mail became due, so the engine claims it at once. */
  wake: () => void;
  /** Traffic shaping's state (sources, holds, rates, warm-up), shown with the queue. */
  shaping: Pick<ShapingOperator, 'state' | 'prune'>;
  teams: Pick<TeamsRepository, 'findById'>;
}

const suspensionView = (s: SuspensionRow): SuspensionView => ({
  id: s.id,
  destination: s.destination,
  teamId: s.team_id,
  campaignId: s.campaign_id,
  reason: s.reason,
  until: new Date(s.until_ms).toISOString(),
  createdBy: s.created_by,
  createdAt: s.created_at,
});

/** What retrying one delivery did: due now, unless `heldBy` (the suspension that still holds it). */
export interface RetriedDelivery {
  retried: 1;
  heldBy: SuspensionView | null;
}

/** A selector from an operator's input: at least one field, destination in its canonical form. */
export function parseSelector(input: { destination?: string; teamId?: number; campaignId?: string; emailIds?: string[] }): QueueSelector {
  const sel: QueueSelector = {};
  if (input.destination !== undefined) {
    const d = canonicalHost(input.destination.trim());
    if (!d || d.length > 253 || !/^[a-z0-9.-]+$/.test(d)) throw badRequest('destination: must be a domain name');
    sel.destination = d;
  }
  if (input.teamId !== undefined) sel.teamId = input.teamId;
  if (input.campaignId !== undefined) {
    if (!input.campaignId.trim()) throw badRequest('campaignId: must not be empty');
    sel.campaignId = input.campaignId;
  }
  if (input.emailIds !== undefined) {
    if (input.emailIds.length === 0) throw badRequest('emailIds: must not be empty');
    const blank = input.emailIds.findIndex((id) => !id.trim());
    if (blank >= 0) throw badRequest(`emailIds[${blank}]: must not be empty`);
    sel.emailIds = [...new Set(input.emailIds)];
  }
  if (Object.keys(sel).length === 0) throw badRequest('give at least one of destination, teamId, campaignId or emailIds');
  return sel;
}

export function createQueueService(deps: QueueServiceDeps) {
  const { queue, clock } = deps;

  return {
    /** Totals by state and one row per destination domain with queued mail. */
    async summary() {
      const now = clock.nowMs();
      const [totals, rows, active, shaping] = await Promise.all([queue.totals(now), queue.byDestination(now, MAX_DESTINATIONS), queue.activeSuspensions(now), deps.shaping.state()]);
      const open = deps.openConnections();
      const destinations = rows.map((r) => {
        const suspension = active.find((s) => s.destination === r.destination && s.team_id === null && s.campaign_id === null);
        return {
          destination: r.destination,
          queued: r.queued,
          inFlight: r.inflight,
          deferred: r.deferred,
          suspended: r.suspended,
          oldestDue: r.oldestDueMs === null ? null : new Date(r.oldestDueMs).toISOString(),
          lastReply: r.lastResponse === null ? null : { code: r.lastCode, text: r.lastResponse, mxHost: r.mxHost },
          openConnections: r.mxHost ? (open.get(r.mxHost) ?? 0) : 0,
          suspension: suspension ? { id: suspension.id, until: new Date(suspension.until_ms).toISOString(), reason: suspension.reason } : null,
        };
      });
      return {
        totals: { ready: totals.ready, scheduled: totals.scheduled, deferred: totals.deferred, inFlight: totals.inflight, suspended: totals.suspended },
        destinations,
        suspensions: active.map(suspensionView),
        shaping: shaping satisfies ShapingState,
      };
    },

    /** The queued deliveries behind the summary, by delivery id, cursor paginated. */
    async messages(filter: { destination?: string; teamId?: number; campaignId?: string; state?: QueueState }, limit: number, cursor?: string) {
      const sel: QueueSelector = {};
      if (filter.destination !== undefined) sel.destination = parseSelector({ destination: filter.destination }).destination!;
      if (filter.teamId !== undefined) sel.teamId = filter.teamId;
      if (filter.campaignId !== undefined) sel.campaignId = filter.campaignId;
      const after = cursor === undefined ? 0 : decodeIdCursor('q', cursor);
      const rows = await queue.messages(clock.nowMs(), sel, filter.state, limit + 1, after);
      const page = rows.slice(0, limit);
      return {
        messages: page.map((d) => ({
          deliveryId: d.id,
          emailId: d.email_id,
          teamId: d.team_id,
          recipient: d.recipient,
          destination: d.rcpt_domain,
          state: d.queue_state,
          attempts: d.attempts,
          nextAttemptAt: new Date(d.next_attempt_at).toISOString(),
          lastReply: d.last_response === null ? null : { code: d.last_code, text: d.last_response, mxHost: d.mx_host },
          heldReason: d.queue_state === 'suspended' ? d.held_reason : null,
        })),
        nextCursor: rows.length > limit ? encodeIdCursor('q', page[page.length - 1]!.id) : null,
      };
    },

    async listSuspensions(): Promise<SuspensionView[]> {
      return (await queue.activeSuspensions(clock.nowMs())).map(suspensionView);
    },

    /** Holds matching mail (not attempted, no attempt counted) until the suspension ends or is deleted. */
    async suspend(actor: OperatorActor, input: { destination?: string; teamId?: number; campaignId?: string; minutes: number; reason: string }): Promise<SuspensionView & { parked: number }> {
      const sel = parseSelector({ destination: input.destination, teamId: input.teamId, campaignId: input.campaignId });
      suspensionMinutes(input.minutes);
      const reason = reasonOf(input.reason);
      // A suspension outlives the request: one naming a team that does not exist (a typo) would
      // hold the mail of a team created later with that id.
      if (sel.teamId !== undefined && !(await deps.teams.findById(sel.teamId))) throw badRequest(`teamId: there is no team ${sel.teamId}`);
      const now = clock.nowMs();
      const row: SuspensionRow = {
        id: newId('su'),
        destination: sel.destination ?? null,
        team_id: sel.teamId ?? null,
        campaign_id: sel.campaignId ?? null,
        reason,
        until_ms: now + Math.round(input.minutes * 60_000),
        created_by: actorLabel(actor),
        created_at: new Date(now).toISOString(),
      };
      const parked = await queue.insertSuspension(row, now, () =>
        deps.audit.inTransaction(actor, 'queue.suspend', { suspensionId: row.id, ...sel, minutes: input.minutes, reason }),
      );
      return { ...suspensionView(row), parked };
    },

    /** Ends a suspension at once: what it held is due now. */
    async resume(actor: OperatorActor, id: string): Promise<SuspensionView> {
      const ended = await queue.endSuspension(id, clock.nowMs(), clock.now().toISOString(), () => deps.audit.inTransaction(actor, 'queue.resume', { suspensionId: id }));
      if (!ended) throw notFound(`suspension ${id} not found (or already ended)`);
      deps.wake();
      return suspensionView(ended);
    },

    /** Matching queued mail that is not on the wire becomes due now (held mail stays held; a scheduled send keeps its time). */
    async retry(actor: OperatorActor, input: Parameters<typeof parseSelector>[0]): Promise<{ retried: number; held: number }> {
      const sel = parseSelector(input);
      const now = clock.nowMs();
      const retried = await queue.retryNow(sel, now, clock.now().toISOString(), (n) => deps.audit.inTransaction(actor, 'queue.retry', { ...sel, retried: n }));
      deps.wake();
      // Made due, but a suspension keeps these back until it ends or is resumed: counted apart.
      return { retried, held: retried ? await queue.heldBySuspension(sel, now) : 0 };
    },

    /**
     * Fails matching queued mail with the operator's reason, with FAILED events and webhooks
     * like any other failure. Mail on the wire (leased by the engine) is left alone. Each batch
     * and an audit entry saying what it bounced commit together: a bounce that fails midway
     * has every finished batch on record, and nothing of the batch that failed.
     */
    async bounce(actor: OperatorActor, input: Parameters<typeof parseSelector>[0] & { reason: string }): Promise<{ bounced: number }> {
      const sel = parseSelector(input);
      const reason = reasonOf(input.reason);
      const owner = `${deps.owner}:bounce`;
      let bounced = 0;
      let audited = false;
      for (;;) {
        const rows = await queue.leaseForBounce(sel, owner, clock.nowMs() + deps.leaseMs, BOUNCE_BATCH);
        if (!rows.length) break;
        bounced += await deps.deliveries.failLeased(rows, `bounced by the operator: ${reason}`, owner, (n) => {
          audited = true;
          deps.audit.inTransaction(actor, 'queue.bounce', { ...sel, reason, bounced: n });
        });
        if (rows.length < BOUNCE_BATCH) break;
      }
      // Nothing matched: no change to ride on, yet the attempt is on record.
      if (!audited) await deps.audit.record(actor, 'queue.bounce', { ...sel, reason, bounced });
      return { bounced };
    },

    /**
     * One queued delivery becomes due now (a suspension that holds it keeps holding it). As the
     * bulk retry: one on the wire is left alone, a scheduled send keeps its time; both say so.
     */
    async retryDelivery(actor: OperatorActor, deliveryId: number): Promise<RetriedDelivery> {
      if (!isIntId(deliveryId)) throw notFound(`delivery ${deliveryId} is not queued`);
      const now = clock.nowMs();
      const d = await deps.deliveriesRepo.retryNow(deliveryId, now, clock.now().toISOString(), (row) =>
        deps.audit.inTransaction(actor, 'queue.retry', { deliveryId, emailId: row.email_id, destination: row.rcpt_domain, retried: 1 }),
      );
      if (!d) {
        const row = await deps.deliveriesRepo.findById(deliveryId);
        if (row?.state === 'queued' && row.lease_owner !== null) throw badRequest(`delivery ${deliveryId} is being attempted right now; try again when the attempt has ended`);
        if (row?.state === 'queued' && row.due_since > now) throw badRequest(`delivery ${deliveryId} is scheduled for ${new Date(row.due_since).toISOString()}: a retry keeps a scheduled send's time`);
        throw notFound(`delivery ${deliveryId} is not queued`);
      }
      deps.wake();
      // Due now, but a suspension that holds it keeps it back until it ends or is resumed: the
      // answer names it rather than promise an attempt that will not come.
      const holding = await queue.holdingSuspension(deliveryId, now);
      return { retried: 1, heldBy: holding ? suspensionView(holding) : null };
    },

    /** Gives up on one queued delivery: FAILED, with its event and webhook. Never one on the wire. */
    async giveUp(actor: OperatorActor, deliveryId: number): Promise<void> {
      const d = isIntId(deliveryId) ? await deps.deliveriesRepo.findById(deliveryId) : undefined;
      if (!d || d.state !== 'queued') throw notFound(`delivery ${deliveryId} is not queued`);
      await deps.deliveries.purge(deliveryId, () => deps.audit.inTransaction(actor, 'queue.purge', { deliveryId, emailId: d.email_id, destination: d.rcpt_domain }));
    },

    /** Each attempt of an email: the MX, addresses, TLS and the SMTP transcript. */
    async trace(emailId: string) {
      const email = await deps.emails.findByIdAnyTeam(emailId);
      if (!email) throw notFound(`email ${emailId} not found`);
      const rows = await deps.deliveriesRepo.attemptsOfEmail(email.id);
      return {
        emailId: email.id,
        teamId: email.team_id,
        attempts: rows.map((r) => ({
          id: r.id,
          startedAt: new Date(r.started_at).toISOString(),
          destination: r.rcpt_domain,
          mxHost: r.mx_host,
          address: r.address,
          source: r.source,
          sourceName: r.source_name,
          tls: r.tls_json ? (JSON.parse(r.tls_json) as SessionTls) : null,
          results: JSON.parse(r.results_json) as { recipient: string; outcome: string; code?: number; response: string }[],
          transcript: (JSON.parse(r.transcript_json) as [number, string, string][]).map(([at, who, line]) => ({
            at: new Date(at).toISOString(),
            direction: who === 'C' ? ('client' as const) : who === 'S' ? ('server' as const) : ('info' as const),
            line,
          })),
        })),
      };
    },

    /** Daily: traces past their retention, suspensions and shaping holds long ended, old warm-up usage. */
    async prune(traceRetentionMs: number, signal?: AbortSignal): Promise<{ traces: number; suspensions: number; holds: number; warmupDays: number }> {
      const now = clock.nowMs();
      let traces = 0;
      // A graceful stop ends it between chunks; the rest goes at the next run.
      for (let n = -1; n !== 0 && !signal?.aborted; ) {
        n = await deps.deliveriesRepo.pruneAttempts(now - traceRetentionMs);
        traces += n;
      }
      const suspensions = await queue.pruneSuspensions(now - ENDED_SUSPENSION_KEEP_MS);
      return { traces, suspensions, ...(await deps.shaping.prune()) };
    },
  };
}
export type QueueService = ReturnType<typeof createQueueService>;
