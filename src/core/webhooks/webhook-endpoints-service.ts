import type { Clock } from '../../lib/clock.js';
import type { DnsResolver } from '../../lib/dns/dns-client.js';
import { newId } from '../../lib/ids.js';
import type { AttemptWithBody, WebhookRow, WebhooksRepository } from '../../store/repositories/webhooks-repository.js';
import { badRequest, forbidden, notFound } from '../errors.js';
import type { EventType } from '../events.js';
import { resolveWebhookTarget, WebhookUrlError } from './url-policy.js';
import type { WebhookOutbox } from './webhook-outbox.js';
import { WEBHOOK_MAX_ATTEMPTS } from './webhook-retry.js';
import { newWebhookSecret } from './webhook-signature.js';
import { decodeIdCursor, encodeIdCursor } from '../id-cursor.js';
import { orTooSlow } from '../query-too-slow.js';

// Webhook endpoints as the API manages them: create, read, change (secret rotation included),
// delete, the test event and the attempts log. What happens to events is webhook-outbox.ts.

/** The spec's webhook event types, plus email.received (architecture.md, Decisions: webhooks). */
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

/** A failed attempt as a status list shows it: its HTTP status or error, and when. */
export interface FailedAttemptOutcome {
  status: 'FAILED';
  response: { status: number } | null;
  error: string | null;
  createdAt: string;
}

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
  /** PAUSED stops the endpoint (its pending calls are discarded); ACTIVE re-enables it and resets the failure count. */
  status?: 'ACTIVE' | 'PAUSED' | 'active' | 'paused';
}

export type WebhookStatusView = 'ACTIVE' | 'PAUSED' | 'AUTO_DISABLED';

export interface WebhookView {
  id: string;
  url: string;
  description: string | null;
  /** Empty means every event type. */
  eventTypes: WebhookEventType[];
  /** Empty means every domain. */
  domainIds: number[];
  /** Only an ACTIVE endpoint gets events; AUTO_DISABLED after too many final failures in a row. */
  status: WebhookStatusView;
  /** Events in a row whose every attempt failed, while active; a delivery resets it. */
  consecutiveFailures: number;
  /** When it was paused or auto-disabled; null while ACTIVE. */
  disabledAt: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface WebhookEndpointsServiceDeps {
  webhooks: WebhooksRepository;
  /** Stores the test event. */
  outbox: Pick<WebhookOutbox, 'storeTestEvent'>;
  resolver: DnsResolver;
  clock: Clock;
  allowPrivate: boolean;
  domainBelongsToTeam(teamId: number, domainId: number): Promise<boolean>;
}

/** Attempt cursors: opaque, of their own kind (id-cursor.ts). */
const CURSOR_KIND = 'a';
/**
 * A page of attempts ends early once their request bodies add up to more than this (8 MiB, as
 * the emails list streams past): an email.received body carries the To and Cc of a header of
 * up to 1 MB, and 100 attempts of such events were hundreds of megabytes in one answer.
 */
export const MAX_ATTEMPTS_PAGE_BODY_CHARS = 8 * 1024 * 1024;

export function createWebhookEndpointsService(deps: WebhookEndpointsServiceDeps) {
  const { webhooks, clock } = deps;

  function view(row: WebhookRow): WebhookView {
    return {
      id: row.id,
      url: row.url,
      description: row.description,
      eventTypes: JSON.parse(row.event_types_json) as WebhookEventType[],
      domainIds: row.domain_ids_json === null ? [] : (JSON.parse(row.domain_ids_json) as number[]),
      status: row.status.toUpperCase() as WebhookStatusView,
      consecutiveFailures: row.consecutive_failures,
      disabledAt: row.disabled_at,
      createdAt: row.created_at,
      updatedAt: row.updated_at,
    };
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

  function attemptView(a: AttemptWithBody) {
    return {
      id: a.public_id,
      webhookId: a.webhook_id,
      eventId: a.event_id,
      eventType: a.event_type as WebhookEventType,
      attempt: a.attempt,
      maxAttempts: WEBHOOK_MAX_ATTEMPTS,
      // DISCARDED: no HTTP attempt; the call was dropped while its endpoint was stopped, and `attempt` is the one not made.
      status: a.discarded ? ('DISCARDED' as const) : a.succeeded ? ('SUCCEEDED' as const) : ('FAILED' as const),
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
    async create(scope: WebhookScope, input: WebhookInput): Promise<WebhookView & { secret: string }> {
      const domainIds = await checkDomainIds(scope, input.domainIds);
      await checkUrl(input.url);
      const now = clock.now().toISOString();
      const row: WebhookRow = {
        id: newId('wh'),
        team_id: scope.teamId,
        url: input.url,
        description: input.description ?? null,
        event_types_json: JSON.stringify([...new Set(input.eventTypes)]),
        domain_ids_json: domainIds ? JSON.stringify(domainIds) : null,
        secret: newWebhookSecret(),
        status: 'active',
        consecutive_failures: 0,
        disabled_at: null,
        created_at: now,
        updated_at: now,
      };
      if (!(await webhooks.insert(row, MAX_WEBHOOKS_PER_TEAM))) {
        throw badRequest(`url: a team may have at most ${MAX_WEBHOOKS_PER_TEAM} webhook endpoints; delete one first`);
      }
      // The secret is shown here and on rotation only (spec, Webhooks).
      return { ...view(row), secret: row.secret };
    },

    async list(scope: WebhookScope, offset: number, limit: number): Promise<{ items: WebhookView[]; total: number }> {
      const { rows, total } = await orTooSlow(webhooks.list(scope.teamId, offset, limit, scopedDomainJson(scope)));
      return { items: rows.map(view), total };
    },

    async get(scope: WebhookScope, id: string): Promise<WebhookView> {
      return view(await load(scope, id));
    },

    async update(scope: WebhookScope, id: string, patch: WebhookPatch): Promise<WebhookView & { secret?: string }> {
      const row = await load(scope, id);
      const changes: Partial<Omit<WebhookRow, 'disabled_at'>> = { updated_at: clock.now().toISOString() };
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
      if (patch.status !== undefined) {
        changes.status = patch.status.toLowerCase() as 'active' | 'paused';
        // Re-enabled (or confirmed active): the count starts again, or one more failure would disable it at once.
        if (changes.status === 'active') changes.consecutive_failures = 0;
      }
      const updated = await webhooks.update(scope.teamId, row.id, changes, clock.nowMs());
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
      const before = cursor === undefined ? undefined : decodeIdCursor(CURSOR_KIND, cursor);
      const { attempts, more } = await orTooSlow(webhooks.listAttempts(row.id, limit, before, MAX_ATTEMPTS_PAGE_BODY_CHARS));
      return { attempts: attempts.map(attemptView), nextCursor: more ? encodeIdCursor(CURSOR_KIND, attempts[attempts.length - 1]!.id) : null };
    },

    /**
     * Endpoints not paused whose latest delivery attempt failed, with that attempt's outcome and time (the
     * console's "needs attention"): read without the event's body, which may be megabytes.
     */
    async failing(scope: WebhookScope): Promise<{ webhook: WebhookView; lastAttempt: FailedAttemptOutcome }[]> {
      const { rows } = await orTooSlow(webhooks.list(scope.teamId, 0, MAX_WEBHOOKS_PER_TEAM, scopedDomainJson(scope)));
      const out: { webhook: WebhookView; lastAttempt: FailedAttemptOutcome }[] = [];
      for (const row of rows) {
        // Paused by its owner on purpose: nothing to point out (an auto-disabled one is).
        if (row.status === 'paused') continue;
        const last = await webhooks.lastAttemptOutcome(row.id);
        if (last && !last.succeeded) {
          out.push({ webhook: view(row), lastAttempt: { status: 'FAILED', response: last.response_status === null ? null : { status: last.response_status }, error: last.error, createdAt: last.created_at } });
        }
      }
      return out;
    },

    /**
     * POST /webhooks/{id}/test: a webhook.test event for this endpoint only, whatever its filters,
     * and whatever its status: a paused or auto-disabled endpoint can be checked before it is re-enabled.
     */
    async sendTest(scope: WebhookScope, id: string): Promise<{ success: boolean; eventId: string }> {
      const row = await load(scope, id);
      const eventId = await deps.outbox.storeTestEvent(scope.teamId, row.id);
      if (eventId === null) throw notFound(`webhook ${id} not found`);
      return { success: true, eventId };
    },
  };
}
export type WebhookEndpointsService = ReturnType<typeof createWebhookEndpointsService>;
