import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../lib/logger.js';
import type { DnsResolver } from '../../lib/dns/dns-client.js';
import { newId } from '../../lib/ids.js';
import type { AttemptWithBody, ClaimedCall, NewWebhookEvent, WebhookRow, WebhooksRepository } from '../../store/repositories/webhooks-repository.js';
import { badRequest, forbidden, notFound } from '../errors.js';
import type { BusEvent, EventType } from '../events.js';
import { resolveWebhookTarget, WebhookUrlError, type PinnedTarget } from './url-policy.js';
import { WEBHOOK_MAX_ATTEMPTS, webhookRetryDelayMs } from './webhook-retry.js';
import {
  newWebhookSecret,
  signWebhookBody,
  SIGNATURE_HEADER,
  TIMESTAMP_HEADER,
  USESEND_SIGNATURE_HEADER,
  USESEND_TIMESTAMP_HEADER,
} from './webhook-signature.js';

export type { ClaimedCall };

/** The spec's webhook event types, plus email.received (DESIGN 6). */
export const WEBHOOK_EVENT_TYPES = [
  'contact.created',
  'contact.updated',
  'contact.deleted',
  'domain.created',
  'domain.verified',
  'domain.updated',
  'domain.deleted',
  'email.queued',
  'email.sent',
  'email.delivery_delayed',
  'email.delivered',
  'email.bounced',
  'email.rejected',
  'email.rendering_failure',
  'email.complained',
  'email.failed',
  'email.cancelled',
  'email.suppressed',
  'email.opened',
  'email.clicked',
  'email.received',
  'webhook.test',
] as const satisfies readonly EventType[];
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** Bounds the per-event matching work and the blast radius of one team. */
export const MAX_WEBHOOKS_PER_TEAM = 100;
/** Response bodies are kept up to 4 KB (DESIGN 4). */
export const MAX_RESPONSE_BODY_BYTES = 4096;
const USER_AGENT = 'Posthorn-Webhook/1.0';
/** Events kept in memory while the store refuses writes (each a few KB at most). */
const MAX_UNPERSISTED_EVENTS = 10_000;

export interface WebhookScope {
  teamId: number;
  /** A key bound to a domain manages only endpoints restricted to exactly that domain. */
  domainId: number | null;
}

export interface WebhookInput {
  url: string;
  eventTypes: WebhookEventType[];
  description?: string | null;
  domainIds?: number[] | null;
}

export interface WebhookPatch {
  url?: string;
  eventTypes?: WebhookEventType[];
  description?: string | null;
  domainIds?: number[] | null;
  rotateSecret?: boolean;
}

export interface WebhookView {
  id: string;
  url: string;
  description: string | null;
  /** Empty means every event type. */
  eventTypes: WebhookEventType[];
  /** Empty means every domain. */
  domainIds: number[];
  status: 'ACTIVE';
  createdAt: string;
  updatedAt: string;
}

/** What one HTTP attempt produced (a value, not an exception: DESIGN 3.5). */
export interface AttemptOutcome {
  status: number | null;
  body: string | null;
  error: string | null;
  durationMs: number;
  location?: string | null;
}

export interface SignedRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
}

export interface WebhookServiceDeps {
  webhooks: WebhooksRepository;
  resolver: DnsResolver;
  clock: Clock;
  logger: Logger;
  allowPrivate: boolean;
  domainBelongsToTeam(teamId: number, domainId: number): Promise<boolean>;
  /** Lease on claimed calls; a crashed holder's calls are claimable again after it. */
  leaseMs: number;
  owner: string;
  /** Told about new due work so the dispatcher picks it up at once. */
  onEnqueued?: (webhookIds: string[], dueMs: number) => void;
}

const CURSOR_PREFIX = 'a';

function encodeCursor(id: number): string {
  return Buffer.from(`${CURSOR_PREFIX}${id}`).toString('base64url');
}

function decodeCursor(cursor: string): number {
  const text = /^[A-Za-z0-9_-]{1,40}$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString('utf8') : '';
  const m = /^a(\d{1,15})$/.exec(text);
  if (!m) throw badRequest('cursor: not a cursor returned by this endpoint (pass nextCursor as is)');
  return Number(m[1]);
}

export function createWebhookService(deps: WebhookServiceDeps) {
  const { webhooks, clock } = deps;

  function view(row: WebhookRow): WebhookView {
    return {
      id: row.id,
      url: row.url,
      description: row.description,
      eventTypes: JSON.parse(row.event_types_json) as WebhookEventType[],
      domainIds: row.domain_ids_json === null ? [] : (JSON.parse(row.domain_ids_json) as number[]),
      status: 'ACTIVE',
      createdAt: row.created_at,
      updatedAt: row.updated_at,
    };
  }

  /** Eventtype and domain filters (useSend's rules: empty lists match everything; events without a domain pass the domain filter). */
  function matches(row: WebhookRow, event: BusEvent): boolean {
    const types = JSON.parse(row.event_types_json) as string[];
    if (types.length && !types.includes(event.type)) return false;
    if (row.domain_ids_json !== null && event.domainId !== null) {
      if (!(JSON.parse(row.domain_ids_json) as number[]).includes(event.domainId)) return false;
    }
    return true;
  }

  function scopedDomainJson(scope: WebhookScope): string | undefined {
    return scope.domainId === null ? undefined : JSON.stringify([scope.domainId]);
  }

  async function load(scope: WebhookScope, id: string): Promise<WebhookRow> {
    const row = /^wh_[A-Za-z0-9]{1,64}$/.test(id) ? await webhooks.findById(scope.teamId, id) : undefined;
    // Outside a domain-bound key's reach, an endpoint is simply not there.
    if (!row || (scope.domainId !== null && row.domain_ids_json !== scopedDomainJson(scope))) throw notFound(`webhook ${id} not found`);
    return row;
  }

  async function checkUrl(url: string): Promise<void> {
    try {
      await resolveWebhookTarget(url, deps.resolver, deps.allowPrivate);
    } catch (err) {
      if (err instanceof WebhookUrlError) throw badRequest(`url: ${err.message}`);
      throw err;
    }
  }

  /** The stored domain list (null = all) after checking ownership and the key's domain. */
  async function checkDomainIds(scope: WebhookScope, domainIds: number[] | null | undefined): Promise<number[] | null> {
    const ids = domainIds?.length ? [...new Set(domainIds)] : null;
    if (scope.domainId !== null) {
      if (ids && (ids.length !== 1 || ids[0] !== scope.domainId)) throw forbidden(`this API key is restricted to domain ${scope.domainId}`);
      return [scope.domainId];
    }
    if (!ids) return null;
    for (let i = 0; i < ids.length; i++) {
      if (!(await deps.domainBelongsToTeam(scope.teamId, ids[i]!))) throw badRequest(`domainIds[${i}]: domain ${ids[i]} does not exist in this team`);
    }
    return ids.sort((a, b) => a - b);
  }

  /**
   * Events whose outbox rows could not be written (a full or failing disk). The state change
   * that caused each one is already committed, so dropping it would lose the event for good:
   * it is kept here and written as soon as the store takes writes again (the dispatcher calls
   * flushUnpersisted on every round). Bounded, so a disk that stays full cannot eat the heap.
   */
  const unpersisted: { event: NewWebhookEvent; webhookIds: string[] }[] = [];

  /**
   * Bus events whose outbox rows were written inside the emitter's transaction (null: no
   * endpoint matched), so the after-commit handler only wakes the dispatcher. Weak: an event
   * whose write failed is never emitted and simply goes away.
   */
  const writtenInTransaction = new WeakMap<BusEvent, { webhookIds: string[]; due: number } | null>();

  function keepForLater(event: NewWebhookEvent, webhookIds: string[], err: unknown): void {
    if (unpersisted.length >= MAX_UNPERSISTED_EVENTS) {
      const dropped = unpersisted.shift()!;
      deps.logger.error({ eventId: dropped.event.id, type: dropped.event.type }, `webhook event dropped: more than ${MAX_UNPERSISTED_EVENTS} events are waiting for the store`);
    }
    unpersisted.push({ event, webhookIds });
    deps.logger.error({ err, eventId: event.id, type: event.type }, 'storing a webhook event failed; kept in memory and retried');
  }

  function persistEvent(event: NewWebhookEvent, webhookIds: string[]): void {
    const due = clock.nowMs();
    if (webhooks.syncWriteSafe()) {
      try {
        webhooks.enqueueSync(event, webhookIds, due);
      } catch (err) {
        keepForLater(event, webhookIds, err);
        return;
      }
      deps.onEnqueued?.(webhookIds, due);
      return;
    }
    // Some async code holds a transaction open on the shared connection: a synchronous
    // write would join (and could be rolled back with) it, so queue behind it instead.
    webhooks
      .enqueue(event, webhookIds, due)
      .then(() => deps.onEnqueued?.(webhookIds, due))
      .catch((err) => keepForLater(event, webhookIds, err));
  }

  function newEvent(teamId: number, type: string, domainId: number | null, occurredAt: string, data: Record<string, unknown>): NewWebhookEvent {
    const id = newId('ev');
    // Serialised once: every endpoint and every retry gets these exact bytes and this id.
    const body = JSON.stringify({ id, type, createdAt: occurredAt, data });
    return { id, teamId, type, domainId, body, createdAt: clock.now().toISOString() };
  }

  function attemptView(a: AttemptWithBody) {
    return {
      id: a.public_id,
      webhookId: a.webhook_id,
      eventId: a.event_id,
      eventType: a.event_type as WebhookEventType,
      attempt: a.attempt,
      maxAttempts: WEBHOOK_MAX_ATTEMPTS,
      status: a.succeeded ? ('SUCCEEDED' as const) : ('FAILED' as const),
      request: { method: 'POST' as const, url: a.url, headers: JSON.parse(a.request_headers_json) as Record<string, string>, body: a.body },
      response: a.response_status === null ? null : { status: a.response_status, body: a.response_body },
      durationMs: a.duration_ms,
      error: a.error,
      /** When the next attempt is due; null after a success or the last attempt. */
      nextAttemptAt: a.next_attempt_at === null ? null : new Date(a.next_attempt_at).toISOString(),
      createdAt: a.created_at,
    };
  }

  return {
    view,

    async create(scope: WebhookScope, input: WebhookInput): Promise<WebhookView & { secret: string }> {
      const domainIds = await checkDomainIds(scope, input.domainIds);
      await checkUrl(input.url);
      if ((await webhooks.countForTeam(scope.teamId)) >= MAX_WEBHOOKS_PER_TEAM) {
        throw badRequest(`url: a team may have at most ${MAX_WEBHOOKS_PER_TEAM} webhook endpoints; delete one first`);
      }
      const now = clock.now().toISOString();
      const row: WebhookRow = {
        id: newId('wh'),
        team_id: scope.teamId,
        url: input.url,
        description: input.description ?? null,
        event_types_json: JSON.stringify([...new Set(input.eventTypes)]),
        domain_ids_json: domainIds ? JSON.stringify(domainIds) : null,
        secret: newWebhookSecret(),
        created_at: now,
        updated_at: now,
      };
      await webhooks.insert(row);
      // The secret is shown here and on rotation only (spec, Webhooks).
      return { ...view(row), secret: row.secret };
    },

    async list(scope: WebhookScope, offset: number, limit: number): Promise<{ items: WebhookView[]; total: number }> {
      const { rows, total } = await webhooks.list(scope.teamId, offset, limit, scopedDomainJson(scope));
      return { items: rows.map(view), total };
    },

    async get(scope: WebhookScope, id: string): Promise<WebhookView> {
      return view(await load(scope, id));
    },

    async update(scope: WebhookScope, id: string, patch: WebhookPatch): Promise<WebhookView & { secret?: string }> {
      const row = await load(scope, id);
      const changes: Partial<WebhookRow> = { updated_at: clock.now().toISOString() };
      if (patch.url !== undefined) {
        await checkUrl(patch.url);
        changes.url = patch.url;
      }
      if (patch.eventTypes !== undefined) changes.event_types_json = JSON.stringify([...new Set(patch.eventTypes)]);
      if (patch.description !== undefined) changes.description = patch.description;
      if (patch.domainIds !== undefined) {
        const ids = await checkDomainIds(scope, patch.domainIds);
        changes.domain_ids_json = ids ? JSON.stringify(ids) : null;
      }
      // The new secret replaces the old one in the row every delivery signs with, so the
      // old one is dead from the next attempt on, retries of older events included.
      if (patch.rotateSecret) changes.secret = newWebhookSecret();
      const updated = await webhooks.update(scope.teamId, row.id, changes);
      if (!updated) throw notFound(`webhook ${id} not found`);
      return patch.rotateSecret ? { ...view(updated), secret: updated.secret } : view(updated);
    },

    async remove(scope: WebhookScope, id: string): Promise<{ id: string; success: boolean; message: string }> {
      const row = await load(scope, id);
      if (!(await webhooks.remove(scope.teamId, row.id))) throw notFound(`webhook ${id} not found`);
      return { id: row.id, success: true, message: 'Webhook deleted; its pending deliveries were dropped' };
    },

    async listAttempts(scope: WebhookScope, id: string, limit: number, cursor?: string) {
      const row = await load(scope, id);
      const before = cursor === undefined ? undefined : decodeCursor(cursor);
      const rows = await webhooks.listAttempts(row.id, limit + 1, before);
      const page = rows.slice(0, limit);
      return { attempts: page.map(attemptView), nextCursor: rows.length > limit ? encodeCursor(page[page.length - 1]!.id) : null };
    },

    /** Endpoints whose latest delivery attempt failed, with that attempt (the console's "needs attention"). */
    async failing(scope: WebhookScope): Promise<{ webhook: WebhookView; lastAttempt: ReturnType<typeof attemptView> }[]> {
      const { rows } = await webhooks.list(scope.teamId, 0, MAX_WEBHOOKS_PER_TEAM, scopedDomainJson(scope));
      const out: { webhook: WebhookView; lastAttempt: ReturnType<typeof attemptView> }[] = [];
      for (const row of rows) {
        const [last] = await webhooks.listAttempts(row.id, 1);
        if (last && !last.succeeded) out.push({ webhook: view(row), lastAttempt: attemptView(last) });
      }
      return out;
    },

    /** POST /webhooks/{id}/test: a webhook.test event for this endpoint only, whatever its filters. */
    async sendTest(scope: WebhookScope, id: string): Promise<{ success: boolean; eventId: string }> {
      const row = await load(scope, id);
      const now = clock.now().toISOString();
      const event = newEvent(scope.teamId, 'webhook.test', null, now, { test: true, webhookId: row.id, sentAt: now });
      const due = clock.nowMs();
      await webhooks.enqueue(event, [row.id], due);
      deps.onEnqueued?.([row.id], due);
      return { success: true, eventId: event.id };
    },

    /**
     * Transactional bus subscriber (events.onInTransaction): writes the event and one call per
     * matching endpoint inside the emitter's own write transaction, so the outbox rows commit
     * with the state change they report (a kill right after that commit loses nothing). A
     * database error propagates and refuses the state change too (a full disk refuses both).
     * If the write is rolled back and run again, the rerun writes a fresh event and replaces
     * the record below, so only what committed is woken after the commit.
     */
    handleInTransaction(event: BusEvent): void {
      const rows = webhooks.listForTeamSync(event.teamId);
      let targets: WebhookRow[];
      try {
        targets = rows.filter((row) => matches(row, event));
      } catch (err) {
        // A bad stored filter is no reason to refuse the state change: this event is left to
        // the after-commit path, as every event was before.
        deps.logger.error({ err, type: event.type }, 'matching webhook endpoints in the transaction failed; left to after the commit');
        writtenInTransaction.delete(event); // what an earlier, rolled-back run recorded
        return;
      }
      if (!targets.length) {
        writtenInTransaction.set(event, null);
        return;
      }
      const stored = newEvent(event.teamId, event.type, event.domainId, event.occurredAt, event.data);
      const webhookIds = targets.map((t) => t.id);
      const due = clock.nowMs();
      webhooks.enqueueInOpenTransactionSync(stored, webhookIds, due);
      writtenInTransaction.set(event, { webhookIds, due });
    },

    /**
     * Bus subscriber (after the commit): wakes the dispatcher for outbox rows written in the
     * emitter's transaction; for events emitted without one (domain, contact, ... events) it
     * stores the event once and one call per matching endpoint, in the same turn the event is
     * emitted, so it is durable before any HTTP request is made.
     */
    handleBusEvent(event: BusEvent): void {
      if (writtenInTransaction.has(event)) {
        const written = writtenInTransaction.get(event);
        writtenInTransaction.delete(event);
        if (written) deps.onEnqueued?.(written.webhookIds, written.due);
        return;
      }
      const targets = webhooks.listForTeamSync(event.teamId).filter((row) => matches(row, event));
      if (!targets.length) return;
      persistEvent(
        newEvent(event.teamId, event.type, event.domainId, event.occurredAt, event.data),
        targets.map((t) => t.id),
      );
    },

    // ---- for the dispatcher

    /** How long a claimed call stays leased: a call whose attempt could not be recorded is due again after it. */
    leaseMs: deps.leaseMs,

    /** Events waiting in memory for the store to take their outbox rows. */
    pendingUnpersisted(): number {
      return unpersisted.length;
    },

    /** Writes the events kept by a failed outbox write, oldest first; stops at the first that still fails. */
    async flushUnpersisted(): Promise<number> {
      let written = 0;
      while (unpersisted.length) {
        const { event, webhookIds } = unpersisted[0]!;
        const due = clock.nowMs();
        try {
          await webhooks.enqueue(event, webhookIds, due);
        } catch (err) {
          deps.logger.warn({ err, waiting: unpersisted.length }, 'webhook events still cannot be stored; trying again shortly');
          return written;
        }
        unpersisted.shift();
        written++;
        deps.onEnqueued?.(webhookIds, due);
      }
      if (written) deps.logger.info({ written }, 'stored webhook events kept while the store refused writes');
      return written;
    },

    async claim(webhookId: string, limit: number): Promise<ClaimedCall[]> {
      return webhooks.claimForWebhook(webhookId, deps.owner, clock.nowMs(), deps.leaseMs, limit);
    },

    async dueByWebhook(): Promise<{ webhookId: string; dueAt: number }[]> {
      return webhooks.dueByWebhook(clock.nowMs());
    },

    async nextDueForWebhook(webhookId: string): Promise<number | null> {
      return webhooks.nextDueForWebhook(webhookId, clock.nowMs());
    },

    async releaseStaleLeases(): Promise<number> {
      return webhooks.releaseAllLeases();
    },

    async releaseCalls(ids: number[]): Promise<void> {
      await webhooks.releaseLeases(ids);
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
    async recordAttempt(call: ClaimedCall, request: SignedRequest, outcome: AttemptOutcome): Promise<number | null> {
      const attempt = call.attempts + 1;
      const succeeded = outcome.error === null && outcome.status !== null && outcome.status >= 200 && outcome.status < 300;
      let error = outcome.error;
      if (!succeeded && error === null && outcome.status !== null) {
        error =
          outcome.status >= 300 && outcome.status < 400
            ? `redirects are not followed: HTTP ${outcome.status}${outcome.location ? ` to ${outcome.location}` : ''}`
            : `HTTP ${outcome.status}: only a 2xx response acknowledges a delivery`;
      }
      const delay = succeeded ? null : webhookRetryDelayMs(attempt);
      const nowMs = clock.nowMs();
      const nextAttemptAt = delay === null ? null : nowMs + delay;
      const state = succeeded ? 'delivered' : nextAttemptAt === null ? 'failed' : 'pending';
      const nowIso = new Date(nowMs).toISOString();
      const recorded = await webhooks.recordAttempt(
        {
          callId: call.id,
          owner: deps.owner,
          state,
          attempts: attempt,
          nextAttemptAt,
          attempt: {
            public_id: newId('wa'),
            webhook_id: call.webhookId,
            event_id: call.eventId,
            event_type: call.eventType,
            attempt,
            url: request.url,
            request_headers_json: JSON.stringify(request.headers),
            response_status: outcome.status,
            response_body: outcome.body,
            duration_ms: Math.round(outcome.durationMs),
            error,
            succeeded: succeeded ? 1 : 0,
            next_attempt_at: nextAttemptAt,
            created_at: nowIso,
          },
        },
        nowIso,
      );
      if (recorded && state === 'failed') {
        deps.logger.warn({ webhookId: call.webhookId, eventId: call.eventId, type: call.eventType, error }, `webhook call abandoned after ${attempt} attempts`);
      }
      return recorded ? nextAttemptAt : null;
    },

    /** Retention: finished calls and their attempts older than `maxAgeMs` are deleted. */
    async prune(maxAgeMs: number): Promise<number> {
      return webhooks.prune(new Date(clock.nowMs() - maxAgeMs).toISOString());
    },
  };
}
export type WebhookService = ReturnType<typeof createWebhookService>;
