import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../lib/logger.js';
import type { DnsResolver } from '../../lib/dns/dns-client.js';
import { newId } from '../../lib/ids.js';
import { sliceWhole } from '../../lib/nul-text.js';
import type { ClaimedCall, NewWebhookEvent, WebhookRow, WebhooksRepository } from '../../store/repositories/webhooks-repository.js';
import type { BusEvent } from '../events.js';
import { resolveWebhookTarget, type PinnedTarget } from './url-policy.js';
import { webhookRetryDelayMs } from './webhook-retry.js';
import { retryOnConnectionLoss } from '../connection-retry.js';
import { signWebhookBody, SIGNATURE_HEADER, TIMESTAMP_HEADER, USESEND_SIGNATURE_HEADER, USESEND_TIMESTAMP_HEADER } from './webhook-signature.js';

// The webhook outbox: which endpoints an event goes to, the outbox rows written inside the
// emitter's transaction (core/events.ts), and the calls the dispatcher (http-out/) claims,
// signs and records. Endpoint management is webhook-endpoints-service.ts.

export type { ClaimedCall };

/** Response bodies are kept up to 4 KB (architecture.md, Decisions: webhooks). */
export const MAX_RESPONSE_BODY_BYTES = 4096;
const USER_AGENT = 'Posthorn-Webhook/1.0';
/** Of a redirect's Location, the error names this much: the receiver's header may be 16 KB long. */
const MAX_LOCATION_CHARS = 500;

/** What one HTTP attempt produced (a value, not an exception: architecture.md, House rules 5). */
export interface AttemptOutcome {
  status: number | null;
  body: string | null;
  error: string | null;
  durationMs: number;
  location?: string | null;
}

/** Only a 2xx answer with no transport error acknowledges a call. */
export function acknowledged(outcome: AttemptOutcome): boolean {
  return outcome.error === null && outcome.status !== null && outcome.status >= 200 && outcome.status < 300;
}

export interface SignedRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
}

export interface WebhookOutboxDeps {
  webhooks: WebhooksRepository;
  resolver: DnsResolver;
  clock: Clock;
  logger: Logger;
  allowPrivate: boolean;
  /** Lease on claimed calls; a crashed holder's calls are claimable again after it. */
  leaseMs: number;
  owner: string;
  /** An endpoint is auto-disabled when this many events in a row failed every attempt (webhooks.disableAfterFailures); 0 never. */
  disableAfterFailures: number;
  /** Told when a final failure auto-disabled an endpoint (a metric). */
  onAutoDisabled?: () => void;
  /** Told after the commit which endpoints have new work due (id -> due time), so the dispatcher picks it up at once. */
  onDue?: (due: ReadonlyMap<string, number>) => void;
}

export function createWebhookOutbox(deps: WebhookOutboxDeps) {
  const { webhooks, clock } = deps;

  /** Eventtype and domain filters (useSend's rules: empty lists match everything; events without a domain pass the domain filter). */
  function matches(row: WebhookRow, event: BusEvent): boolean {
    // A paused or auto-disabled endpoint gets no new events (its calls would be discarded anyway).
    if (row.status !== 'active') return false;
    const types = JSON.parse(row.event_types_json) as string[];
    if (types.length && !types.includes(event.type)) return false;
    if (row.domain_ids_json !== null && event.domainId !== null) {
      if (!(JSON.parse(row.domain_ids_json) as number[]).includes(event.domainId)) return false;
    }
    return true;
  }

  /** A stored filter that cannot be read is no reason to refuse the state change: that endpoint is skipped. */
  function matchesOrSkip(row: WebhookRow, event: BusEvent): boolean {
    try {
      return matches(row, event);
    } catch (err) {
      deps.logger.error({ err, webhookId: row.id, type: event.type }, 'the webhook endpoint has an unreadable filter; event not queued for it');
      return false;
    }
  }

  /**
   * The endpoints each event's outbox rows were written for, and when they are due: noted inside
   * the event's write transaction, handed to the dispatcher after that event's commit. Kept per
   * event, not pooled: on PostgreSQL two transactions commit independently, and handing over
   * another transaction's endpoints with this one's commit let the dispatcher look before those
   * rows were visible, find nothing, and forget them until its next sweep. A rolled-back write
   * leaves an entry nobody reads (the event is never emitted), dropped with the event.
   */
  const dueByEvent = new WeakMap<BusEvent, { webhookIds: string[]; dueMs: number }>();

  function handOver(webhookIds: readonly string[], dueMs: number): void {
    deps.onDue?.(new Map(webhookIds.map((id) => [id, dueMs])));
  }

  function newEvent(teamId: number, type: string, domainId: number | null, occurredAt: string, data: Record<string, unknown>): NewWebhookEvent {
    const id = newId('ev');
    // Serialised once: every endpoint and every retry gets these exact bytes and this id.
    const body = JSON.stringify({ id, type, createdAt: occurredAt, data });
    return { id, teamId, type, domainId, body, createdAt: clock.now().toISOString() };
  }

  return {
    /**
     * Transactional bus subscriber (events.onInTransaction), the one way events reach the
     * outbox: writes the event and one call per matching endpoint inside the emitter's own
     * write transaction, so the outbox rows commit with the state change they report (a kill
     * right after that commit loses nothing). A database error propagates and refuses the
     * state change too (a full disk refuses both). If the write is rolled back and run again,
     * the rerun writes a fresh event; only what committed is stored.
     */
    handleInTransaction(event: BusEvent): void {
      webhooks.enqueueInOpenTransaction(event.teamId, (endpoints) => {
        const webhookIds = endpoints.filter((row) => matchesOrSkip(row, event)).map((row) => row.id);
        if (!webhookIds.length) return null;
        const due = clock.nowMs();
        // A rerun of the write (same event object) replaces what its rolled-back run noted.
        dueByEvent.set(event, { webhookIds, dueMs: due });
        return { event: newEvent(event.teamId, event.type, event.domainId, event.occurredAt, event.data), webhookIds, dueMs: due };
      });
    },

    /** Bus subscriber (after the event's commit): wakes the dispatcher for the outbox rows it committed. */
    afterCommit(event: BusEvent): void {
      const due = dueByEvent.get(event);
      if (!due) return;
      dueByEvent.delete(event);
      handOver(due.webhookIds, due.dueMs);
    },

    /**
     * A webhook.test event for one endpoint, whatever its filters. It has no state change to
     * ride on, so it is stored in a transaction of its own, or the store's error propagates.
     * Returns the event id, or null when the endpoint is gone.
     */
    async storeTestEvent(teamId: number, webhookId: string): Promise<string | null> {
      const now = clock.now().toISOString();
      const event = newEvent(teamId, 'webhook.test', null, now, { test: true, webhookId, sentAt: now });
      const due = clock.nowMs();
      if (!(await webhooks.enqueueForOneEndpoint(event, webhookId, due))) return null;
      handOver([webhookId], due);
      return event.id;
    },

    // ---- for the dispatcher

    /** How long a claimed call stays leased: a call whose attempt could not be recorded is due again after it. */
    leaseMs: deps.leaseMs,

    async claim(webhookId: string, limit: number): Promise<ClaimedCall[]> {
      return webhooks.claimForWebhook(webhookId, deps.owner, clock.nowMs(), deps.leaseMs, limit);
    },

    async dueByWebhook(): Promise<{ webhookId: string; dueAt: number }[]> {
      return webhooks.dueByWebhook(clock.nowMs());
    },

    /** The endpoint's URL (its host's room is checked before a claim), or null when it is gone. */
    async endpointUrl(webhookId: string): Promise<string | null> {
      return webhooks.urlOf(webhookId);
    },

    async nextDueForWebhook(webhookId: string): Promise<number | null> {
      return webhooks.nextDueForWebhook(webhookId, clock.nowMs());
    },

    async releaseStaleLeases(): Promise<number> {
      return webhooks.releaseAllLeases();
    },

    /** Resolves and checks the target again right before a delivery (DNS may have been rebound). */
    async resolveTarget(url: string): Promise<PinnedTarget> {
      return resolveWebhookTarget(url, deps.resolver, deps.allowPrivate);
    },

    /** The request for one attempt, signed now with the endpoint's current secret. */
    signedRequest(call: ClaimedCall): SignedRequest {
      const ts = clock.nowMs();
      const signature = signWebhookBody(call.secret, ts, call.body);
      return {
        url: call.url,
        body: call.body,
        headers: {
          'Content-Type': 'application/json',
          'User-Agent': USER_AGENT,
          [TIMESTAMP_HEADER]: String(ts),
          [SIGNATURE_HEADER]: signature,
          'X-Service-Event': call.eventType,
          'X-Service-Event-Id': call.eventId,
          [USESEND_TIMESTAMP_HEADER]: String(ts),
          [USESEND_SIGNATURE_HEADER]: signature,
          'X-UseSend-Event': call.eventType,
          'X-UseSend-Call': call.eventId,
        },
      };
    },

    /**
     * Records an attempt: 2xx is delivered; anything else (non-2xx, a redirect, a timeout, a
     * refused address) is retried on the table until the 6th attempt, then abandoned.
     * Returns when the next attempt is due, or null when the call is finished.
     */
    async recordAttempt(call: ClaimedCall, request: SignedRequest, outcome: AttemptOutcome, goOn?: () => boolean): Promise<number | null> {
      const attempt = call.attempts + 1;
      const succeeded = acknowledged(outcome);
      let error = outcome.error;
      if (!succeeded && error === null && outcome.status !== null) {
        error =
          outcome.status >= 300 && outcome.status < 400
            ? `redirects are not followed: HTTP ${outcome.status}${outcome.location ? ` to ${sliceWhole(outcome.location, MAX_LOCATION_CHARS)}${outcome.location.length > MAX_LOCATION_CHARS ? '...' : ''}` : ''}`
            : `HTTP ${outcome.status}: only a 2xx response acknowledges a delivery`;
      }
      const delay = succeeded ? null : webhookRetryDelayMs(attempt);
      const nowMs = clock.nowMs();
      const nextAttemptAt = delay === null ? null : nowMs + delay;
      const state = succeeded ? 'delivered' : nextAttemptAt === null ? 'failed' : 'pending';
      const nowIso = new Date(nowMs).toISOString();
      // Tried again on a new connection when the store's was cut: given up, the call would be
      // posted again after its lease, an attempt the endpoint got with none on record.
      const recorded = await retryOnConnectionLoss(() => webhooks.recordAttempt(
        {
          callId: call.id,
          owner: deps.owner,
          state,
          attempts: attempt,
          nextAttemptAt,
          disableAfterFailures: deps.disableAfterFailures,
          attempt: {
            public_id: newId('wa'),
            webhook_id: call.webhookId,
            event_id: call.eventId,
            event_type: call.eventType,
            attempt,
            url: request.url,
            request_headers_json: JSON.stringify(request.headers),
            response_status: outcome.status,
            // PostgreSQL text cannot hold U+0000, and a receiver may answer with one (a binary
            // or compressed body): unrecordable, the call would be posted again after every lease.
            response_body: outcome.body === null ? null : outcome.body.replace(/\u0000/g, '\uFFFD'),
            duration_ms: Math.round(outcome.durationMs),
            error,
            succeeded: succeeded ? 1 : 0,
            next_attempt_at: nextAttemptAt,
            created_at: nowIso,
          },
        },
        nowIso,
      ), goOn);
      if (recorded.autoDisabled) {
        deps.onAutoDisabled?.();
        deps.logger.warn(
          { event: 'webhook.auto_disabled', webhookId: call.webhookId, consecutiveFailures: recorded.consecutiveFailures },
          `webhook endpoint ${call.webhookId} auto-disabled after ${recorded.consecutiveFailures} events in a row failed every attempt; its pending calls were discarded (PATCH status ACTIVE to re-enable)`,
        );
      }
      if (recorded.recorded && !succeeded) {
        // The host only: a webhook URL may carry a token in its path or query.
        let host: string | null = null;
        try {
          host = new URL(call.url).host;
        } catch {
          // stored URLs were validated; nothing to name otherwise
        }
        const fields = {
          webhookId: call.webhookId,
          eventId: call.eventId,
          eventType: call.eventType,
          host,
          attempt,
          httpStatus: outcome.status,
          error,
          nextAttemptAt: nextAttemptAt === null ? null : new Date(nextAttemptAt).toISOString(),
        };
        if (state === 'failed') deps.logger.warn({ event: 'webhook.abandoned', ...fields }, `webhook call abandoned after ${attempt} attempts: ${error}`);
        else deps.logger.info({ event: 'webhook.failed', ...fields }, `webhook call ${attempt} to ${host} failed: ${error}`);
      }
      return recorded.recorded ? nextAttemptAt : null;
    },

    /** Retention: finished calls and their attempts older than `maxAgeMs` are deleted. */
    async prune(maxAgeMs: number): Promise<number> {
      return webhooks.prune(new Date(clock.nowMs() - maxAgeMs).toISOString());
    },
  };
}
export type WebhookOutbox = ReturnType<typeof createWebhookOutbox>;
