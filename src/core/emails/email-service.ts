import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../lib/logger.js';
import { newTimeOrderedId, randomString, timePrefix } from '../../lib/ids.js';
import type { EmailRow, EmailsRepository, NewEmail } from '../../store/repositories/emails-repository.js';
import type { IdempotencyRepository } from '../../store/repositories/idempotency-repository.js';
import type { SuppressionsRepository } from '../../store/repositories/suppressions-repository.js';
import type { DomainService } from '../domains/domain-service.js';
import type { DomainRecord } from '../../store/repositories/domains-repository.js';
import { AppError, badRequest, notFound } from '../errors.js';
import type { BusEvent, EventBus } from '../events.js';
import { addressKey, domainOf, formatMailbox, parseMailbox, type Mailbox } from './addresses.js';
import { statusEventType, statusRank, type EmailStatus } from './email-status.js';
import { emailBusEvent } from './email-bus-event.js';
import { parseScheduledAt } from './scheduled-at.js';
import { boundReferences, type Threading } from './threading.js';
import type { SendInput } from './send-schema.js';
import { MAX_RECIPIENTS, sendFields } from './send-fields.js';
import { createSendIdempotency, IDEMPOTENCY_TTL_MS } from './send-idempotency.js';
import { orTooSlow } from '../query-too-slow.js';

/** An accepted email as core hands it to the edges (the outbound engine composes from it). */
export type { EmailRow } from '../../store/repositories/emails-repository.js';

export { MAX_RECIPIENTS, IDEMPOTENCY_TTL_MS };
/** A list page whose bodies (html + text) add up to more is written item by item. */
export const LIST_INLINE_BODY_CHARS = 8 * 1024 * 1024;

/** Who is sending: the team, the key's domain restriction, and the key (for auditing). */
export interface SendContext {
  teamId: number;
  domainId: number | null;
  apiKeyId: number | null;
}

export interface SubmitOptions {
  campaignId?: string;
  contactId?: string;
  /** Headers set by Posthorn itself (List-Unsubscribe for campaigns): allowed to be engine-owned. */
  systemHeaders?: Record<string, string>;
  /**
   * SMTP submission only: the submitted message's own In-Reply-To and References (valid msg-ids,
   * core/emails/threading.ts), which the composer writes. An API caller threads with inReplyToId;
   * as custom headers both are refused (email-headers.ts).
   */
  threading?: Threading;
  idempotencyKey?: string;
  /** The request body as received, hashed canonically for the idempotency check. */
  rawBody?: unknown;
  /** Reuse sending-domain lookups across many submits of one caller (campaign batches). */
  domainCache?: Map<string, Promise<DomainRecord>>;
  /** Suppression answers looked up once for a whole batch (addresses checked, and the suppressed ones). */
  suppressedAmong?: { checked: Set<string>; suppressed: Set<string> };
  /**
   * Subject and bodies were rendered by Posthorn with one recipient's data (a campaign's
   * contact): when they cannot be written as a message, the email is stored as
   * RENDERING_FAILURE, with its event, instead of the request being refused.
   */
  personalised?: boolean;
  /** SMTP submission: the envelope sender (MAIL FROM, '' for <>), kept for bounce notices (submission.bounceNotices). */
  submittedBy?: string;
  /**
   * Whether this mail counts as accepted in sandbox mode when not this process's mode: a
   * campaign's batch sends as the campaign was scheduled, whichever process runs it.
   */
  acceptedInSandbox?: boolean;
}

/**
 * The store reads a send needs (its sending domain, the suppressions of its addresses), made
 * before the write transaction that will hold it opens (EmailService.readAhead), so building
 * the send inside that transaction reads nothing (SQLite's one connection is that
 * transaction's until it commits).
 */
export interface SendReadAhead {
  teamId: number;
  domainName: string;
  domain: DomainRecord;
  suppressedAmong: { checked: Set<string>; suppressed: Set<string> };
}

/** A send built for a transaction the caller has open (EmailService.prepareInTransaction). */
export interface SendInTransaction {
  emailId: string;
  /** Queues the rows and their events in the open transaction; a store failure fails that transaction. */
  queue(): void;
  /** After the commit: the events' ordinary subscribers, the log line and the engine's wake-up. */
  announce(): void;
}

export interface RenderedTemplate {
  subject: string;
  html: string;
  text: string;
}

export interface EmailServiceDeps {
  emails: EmailsRepository;
  idempotency: IdempotencyRepository;
  suppressions: SuppressionsRepository;
  domains: DomainService;
  events: EventBus;
  clock: Clock;
  /** Renders the published version of a template with variables (wired by the templates feature). */
  renderTemplate?: (teamId: number, templateId: string, variables: Record<string, string>) => Promise<RenderedTemplate>;
  /** Called after new deliveries are committed, so the engine picks them up at once. */
  onQueued?: () => void;
  /** Told how many emails were accepted, after their commit (metrics). */
  onAccepted?: (count: number) => void;
  /** One info line per accepted email (docs/operations.md, Logs). */
  logger?: Logger;
  /** config.sandbox of this process: kept on each email, so a server in sandbox mode captures only what was accepted in it. */
  sandbox?: boolean;
}

interface Prepared {
  item: NewEmail;
  status: EmailStatus;
  eventData: Record<string, unknown>;
  busEvent?: BusEvent;
}

export interface EmailListQuery {
  offset: number;
  limit: number;
  startDate?: string;
  endDate?: string;
  domainIds?: number[];
  tags?: string[];
}

function parseJsonList(v: string | null): string[] | null {
  return v === null ? null : (JSON.parse(v) as string[]);
}

/** A tracking choice as stored: 1 on, 0 off, null the domain's switch. */
export function trackingColumn(v: boolean | null | undefined): number | null {
  return v === undefined || v === null ? null : v ? 1 : 0;
}

/** A stored tracking choice as the API shows it. */
export function trackingValue(v: number | null): boolean | null {
  return v === null ? null : v === 1;
}

/** One address stays a string and several an array, as they were given (SDK shape). */
function shapeList(v: string[] | null): string | string[] | null {
  if (v === null) return null;
  return v.length === 1 ? v[0]! : v;
}

export function createEmailService(deps: EmailServiceDeps) {
  const { emails, clock, events } = deps;
  const { idempotent } = createSendIdempotency({ keys: deps.idempotency, emails, clock, logger: deps.logger });

  /** Validates and resolves one send body into rows ready to insert. Throws 400/403 on bad input. */
  async function prepare(ctx: SendContext, input: SendInput, opts: SubmitOptions, field = '', ahead?: SendReadAhead): Promise<Prepared> {
    if (ahead && (input.templateId || input.inReplyToId || ahead.teamId !== ctx.teamId)) throw new Error('prepare: a send read ahead renders no template and replies to nothing');
    const f = (name: string) => (field ? `${field}.${name}` : name);
    const now = clock.now();
    const nowIso = now.toISOString();

    let subject = input.subject;
    let html = input.html ?? null;
    let text = input.text ?? null;
    let templateId: string | null = null;
    if (input.templateId) {
      if (!deps.renderTemplate) throw badRequest(`${f('templateId')}: templates are not available`);
      const variables = input.variables ?? {};
      // The template service names the field as a single send does; a batch item is named by its place.
      const rendered = await deps.renderTemplate(ctx.teamId, input.templateId, variables).catch((err: unknown) => {
        throw field && err instanceof AppError && err.code === 'BAD_REQUEST' && err.message.startsWith('templateId:') ? badRequest(`${field}.${err.message}`) : err;
      });
      templateId = input.templateId;
      subject = input.subject ?? rendered.subject;
      // The request's own html or text wins as its subject does, and is the whole body: the
      // template's other part would describe another message (an html alone gets its text
      // alternative made from it, as any HTML-only send).
      if (html === null && text === null) {
        html = rendered.html;
        text = rendered.text;
      }
    }
    const fields = sendFields(input, { subject, html, text }, now, { field, personalised: opts.personalised });
    const { from, to, cc, bcc, replyTo, attachments, tags, scheduledAt, renderingFailure } = fields;
    const headers = { ...fields.headers, ...(opts.systemHeaders ?? {}) };
    subject = fields.subject;

    let inReplyTo: string | null = opts.threading?.inReplyTo ?? null;
    let references: string[] | null = opts.threading?.references.length ? boundReferences(opts.threading.references) : null;
    if (input.inReplyToId) {
      const parent = await emails.findById(ctx.teamId, input.inReplyToId);
      // A key bound to a domain sees only that domain's emails, so another domain's email is
      // not there for it either (otherwise a reply would reveal which ids exist, and copy the
      // other domain's Message-ID into the new message).
      if (!parent || (ctx.domainId !== null && parent.domain_id !== ctx.domainId)) {
        throw badRequest(`${f('inReplyToId')}: email ${input.inReplyToId} not found in this team`);
      }
      inReplyTo = parent.message_id;
      // Bounded, so a long exchange of replies does not grow the field with every message.
      references = boundReferences([...(parseJsonList(parent.references_json) ?? []), parent.message_id]);
    }

    // Whether this sender may send (403) only once the whole body is valid (400 naming the
    // field): a request with a bad field is told about the field whatever its domain's state.
    const domainName = domainOf(from.address);
    const inSandbox = opts.acceptedInSandbox ?? !!deps.sandbox;
    if (ahead && ahead.domainName !== domainName) throw new Error(`prepare: the read ahead is for ${ahead.domainName}, not ${domainName}`);
    let domainLookup = ahead ? Promise.resolve(ahead.domain) : opts.domainCache?.get(domainName);
    if (!domainLookup) {
      domainLookup = deps.domains.sendingDomain({ teamId: ctx.teamId, domainId: ctx.domainId }, domainName, { acceptedInSandbox: inSandbox });
      opts.domainCache?.set(domainName, domainLookup);
    }
    // A batch item's refusal is named by its place, as its 400s are (`[3].from: domain ...`).
    const domain = await domainLookup.catch((err: unknown) => {
      throw field && err instanceof AppError && err.code === 'FORBIDDEN' ? new AppError('FORBIDDEN', `${f('from')}: ${err.message}`) : err;
    });

    // Suppressions: all To suppressed -> nothing is sent; suppressed cc/bcc are dropped.
    const keys = [...to, ...cc, ...bcc].map((m) => addressKey(m.address));
    if (ahead && !keys.every((k) => ahead.suppressedAmong.checked.has(k))) throw new Error('prepare: an address was not read ahead');
    if (ahead) opts = { ...opts, suppressedAmong: ahead.suppressedAmong };
    const suppressed = opts.suppressedAmong && keys.every((k) => opts.suppressedAmong!.checked.has(k)) ? opts.suppressedAmong.suppressed : await deps.suppressions.findSuppressed(ctx.teamId, keys);
    const isSuppressed = (m: Mailbox) => suppressed.has(addressKey(m.address));
    const allToSuppressed = to.every(isSuppressed);
    const droppedRecipients = [...new Set([...to, ...cc, ...bcc].filter(isSuppressed).map((m) => m.address))];

    // Both begin with the time, so their index entries go where the last send's went (ids.ts).
    const id = newTimeOrderedId('em', now.getTime());
    const messageId = `<${timePrefix(now.getTime())}.${randomString(24).toLowerCase()}@${domain.name}>`;
    const status: EmailStatus = allToSuppressed ? 'SUPPRESSED' : renderingFailure ? 'RENDERING_FAILURE' : scheduledAt ? 'SCHEDULED' : 'QUEUED';
    const dueMs = scheduledAt ? scheduledAt.getTime() : now.getTime();

    const seen = new Set<string>();
    const deliveries = allToSuppressed || renderingFailure
      ? []
      : (
          [
            ...to.map((m) => ({ m, kind: 'to' as const })),
            ...cc.map((m) => ({ m, kind: 'cc' as const })),
            ...bcc.map((m) => ({ m, kind: 'bcc' as const })),
          ] as const
        )
          .filter(({ m }) => !isSuppressed(m))
          .filter(({ m }) => {
            const k = addressKey(m.address);
            if (seen.has(k)) return false;
            seen.add(k);
            return true;
          })
          .map(({ m, kind }) => ({ recipient: m.address, rcptDomain: domainOf(m.address), kind, nextAttemptAt: dueMs }));

    const eventData: Record<string, unknown> = {};
    if (droppedRecipients.length) eventData.suppressedRecipients = droppedRecipients;
    if (scheduledAt) eventData.scheduledAt = scheduledAt.toISOString();
    if (allToSuppressed) eventData.error = 'every To recipient is on the suppression list';
    else if (renderingFailure) {
      eventData.recipient = to[0]!.address;
      eventData.renderingFailure = { reason: renderingFailure };
    }

    const row = {
      id,
      team_id: ctx.teamId,
      domain_id: domain.id,
      api_key_id: ctx.apiKeyId,
      from_addr: formatMailbox(from),
      to_json: JSON.stringify(to.map(formatMailbox)),
      cc_json: cc.length ? JSON.stringify(cc.map(formatMailbox)) : null,
      bcc_json: bcc.length ? JSON.stringify(bcc.map(formatMailbox)) : null,
      reply_to_json: replyTo.length ? JSON.stringify(replyTo.map(formatMailbox)) : null,
      subject,
      text_body: text,
      html_body: html,
      headers_json: Object.keys(headers).length ? JSON.stringify(headers) : null,
      attachments_json: attachments.length ? JSON.stringify(attachments) : null,
      tags_json: JSON.stringify(tags),
      template_id: templateId,
      campaign_id: opts.campaignId ?? null,
      contact_id: opts.contactId ?? null,
      in_reply_to: inReplyTo,
      references_json: references ? JSON.stringify(references) : null,
      message_id: messageId,
      scheduled_at: scheduledAt ? scheduledAt.toISOString() : null,
      open_tracking: trackingColumn(input.openTracking),
      click_tracking: trackingColumn(input.clickTracking),
      submitted_by: opts.submittedBy ?? null,
      accepted_in_sandbox: inSandbox ? 1 : 0,
      latest_status: status,
      status_rank: statusRank(status),
      sent_at: null,
      created_at: nowIso,
      updated_at: nowIso,
    };
    return {
      item: {
        row,
        tags,
        deliveries,
        events: [{ status, data: Object.keys(eventData).length ? eventData : null, createdAt: nowIso }],
        campaignRecipient: opts.campaignId && opts.contactId ? { campaignId: opts.campaignId, contactId: opts.contactId } : undefined,
      },
      status,
      eventData,
    };
  }

  /** The email.queued (also when scheduled), email.suppressed or email.rendering_failure event of an accepted email (one object per email). */
  function busEventOf(p: Prepared): BusEvent {
    const type = p.status === 'SCHEDULED' || p.status === 'QUEUED' ? 'email.queued' : statusEventType(p.status);
    p.busEvent ??= emailBusEvent(type, p.item.row, p.status, p.item.row.created_at, p.eventData);
    return p.busEvent;
  }

  /** Runs inside the insert's transaction: the webhook outbox rows commit with the emails. */
  function inInsert(prepared: Prepared[]): () => void {
    return () => events.inTransaction(prepared.map(busEventOf));
  }

  function announce(prepared: Prepared[]): void {
    for (const p of prepared) events.emit(busEventOf(p));
    deps.onAccepted?.(prepared.length);
    const log = deps.logger;
    if (log?.isLevelEnabled('info')) {
      for (const p of prepared) {
        const row = p.item.row;
        const dropped = (p.eventData.suppressedRecipients as string[] | undefined)?.length ?? 0;
        log.info(
          {
            event: 'email.accepted',
            emailId: row.id,
            teamId: row.team_id,
            domainId: row.domain_id,
            status: p.status,
            recipients: p.item.deliveries.length,
            ...(dropped ? { suppressedRecipients: dropped } : {}),
            ...(row.scheduled_at ? { scheduledAt: row.scheduled_at } : {}),
            ...(row.campaign_id ? { campaignId: row.campaign_id } : {}),
          },
          `email ${row.id} accepted: ${p.status}, ${p.item.deliveries.length} recipient${p.item.deliveries.length === 1 ? '' : 's'}`,
        );
      }
    }
    if (prepared.some((p) => p.item.deliveries.length > 0)) deps.onQueued?.();
  }

  function toListItem(r: EmailRow) {
    return {
      id: r.id,
      to: shapeList(parseJsonList(r.to_json))!,
      replyTo: shapeList(parseJsonList(r.reply_to_json)),
      cc: shapeList(parseJsonList(r.cc_json)),
      bcc: shapeList(parseJsonList(r.bcc_json)),
      from: r.from_addr,
      subject: r.subject,
      html: r.html_body,
      text: r.text_body,
      tags: JSON.parse(r.tags_json) as string[],
      latestStatus: r.latest_status as EmailStatus,
      scheduledAt: r.scheduled_at,
      domainId: r.domain_id,
      createdAt: r.created_at,
      updatedAt: r.updated_at,
    };
  }

  async function loadScoped(ctx: SendContext, id: string): Promise<EmailRow> {
    const row = await emails.findById(ctx.teamId, id);
    if (!row || (ctx.domainId !== null && row.domain_id !== ctx.domainId)) throw notFound(`email ${id} not found`);
    return row;
  }

  return {

    /** The one way in for outbound mail (architecture.md, House rules 1): API, batch, campaigns, submission, double opt-in, CLI. */
    async submit(ctx: SendContext, input: SendInput, opts: SubmitOptions = {}): Promise<{ emailId: string }> {
      return idempotent(ctx, opts, async (complete) => {
        const prepared = await prepare(ctx, input, opts);
        const response = { emailId: prepared.item.row.id };
        await emails.insertAccepted([prepared.item], complete && { ...complete, responseJson: JSON.stringify(response) }, inInsert([prepared]));
        announce([prepared]);
        return response;
      });
    },

    /**
     * The store reads of sends from `from` to `recipients` that a write transaction will hold
     * (prepareInTransaction), made before it opens: the sending domain's check (403 as submit's)
     * and the suppressions.
     */
    async readAhead(ctx: SendContext, from: string, recipients: string[], opts: { acceptedInSandbox?: boolean } = {}): Promise<SendReadAhead> {
      const domainName = domainOf(parseMailbox(from, 'from').address);
      const domain = await deps.domains.sendingDomain({ teamId: ctx.teamId, domainId: ctx.domainId }, domainName, { acceptedInSandbox: opts.acceptedInSandbox ?? !!deps.sandbox });
      const checked = new Set<string>();
      for (const a of recipients) {
        try {
          checked.add(addressKey(parseMailbox(a, 'to').address)); // keyed as prepare keys it
        } catch {
          // invalid: prepareInTransaction refuses it with a 400
        }
      }
      return { teamId: ctx.teamId, domainName, domain, suppressedAmong: { checked, suppressed: await deps.suppressions.findSuppressed(ctx.teamId, [...checked]) } };
    },

    /**
     * A send that commits with another write (the transactional outbox for mail: a double
     * opt-in confirmation with its contact), built inside that write's transaction from what
     * `ahead` read. Checks as submit does (400 on a body that cannot be sent; suppressed
     * recipients dropped, an email whose every To is suppressed stored as SUPPRESSED) and
     * throws before anything is queued; `queue()` then writes it in the open transaction, with
     * its events' outbox rows, and `announce()` follows the commit. No idempotency key: the
     * caller's write is what a retry repeats.
     */
    async prepareInTransaction(ctx: SendContext, input: SendInput, opts: Omit<SubmitOptions, 'idempotencyKey' | 'rawBody'>, ahead: SendReadAhead): Promise<SendInTransaction> {
      const prepared = await prepare(ctx, input, opts, '', ahead);
      return {
        emailId: prepared.item.row.id,
        queue() {
          emails.insertAcceptedInOpenTransaction([prepared.item]);
          events.inTransaction([busEventOf(prepared)]);
        },
        announce: () => announce([prepared]),
      };
    },

    /** All or nothing: any invalid item rejects the whole batch with 400 naming its index. */
    async submitBatch(ctx: SendContext, inputs: SendInput[], opts: SubmitOptions = {}): Promise<{ data: { emailId: string }[] }> {
      return idempotent(ctx, opts, async (complete) => {
        const prepared: Prepared[] = [];
        for (let i = 0; i < inputs.length; i++) prepared.push(await prepare(ctx, inputs[i]!, opts, `[${i}]`));
        const response = { data: prepared.map((p) => ({ emailId: p.item.row.id })) };
        await emails.insertAccepted(prepared.map((p) => p.item), complete && { ...complete, responseJson: JSON.stringify(response) }, inInsert(prepared));
        announce(prepared);
        return response;
      });
    },

    /**
     * Many independent sends (campaign batches): each item is validated and stored on its own
     * (one bad address never fails the others), and the inserts share group commits.
     */
    async submitEach(ctx: SendContext, items: { input: SendInput; opts: SubmitOptions }[]): Promise<({ emailId: string } | { error: Error })[]> {
      type Settled = { ok: true; prepared: Prepared } | { ok: false; error: Error };
      // One suppression lookup for the whole batch instead of one per message.
      const checked = new Set<string>();
      for (const { input } of items) {
        for (const v of [input.to, input.cc, input.bcc]) {
          for (const a of v === undefined || v === null ? [] : Array.isArray(v) ? v : [v]) {
            try {
              checked.add(addressKey(parseMailbox(a, 'to').address));
            } catch {
              // invalid: prepare() reports it for that item
            }
          }
        }
      }
      const suppressedAmong = { checked, suppressed: await deps.suppressions.findSuppressed(ctx.teamId, [...checked]) };
      const settled = await Promise.all(
        items.map(async ({ input, opts }): Promise<Settled> => {
          try {
            const prepared = await prepare(ctx, input, { ...opts, suppressedAmong });
            await emails.insertAccepted([prepared.item], undefined, inInsert([prepared]));
            return { ok: true, prepared };
          } catch (error) {
            return { ok: false, error: error as Error };
          }
        }),
      );
      announce(settled.flatMap((s) => (s.ok ? [s.prepared] : [])));
      return settled.map((s) => (s.ok ? { emailId: s.prepared.item.row.id } : { error: s.error }));
    },

    /**
     * At startup, before the API listens: keys a killed process left in flight answer like any
     * unused key again, so a client retrying its request after the restart is served at once
     * instead of being told 409 "still in progress" forever.
     */
    async releaseInFlightKeys(): Promise<number> {
      return deps.idempotency.releaseInFlight();
    },

    /** Hourly (cron): forgets idempotency keys past their 24 hours. */
    async purgeExpiredIdempotencyKeys(): Promise<number> {
      return deps.idempotency.purgeExpired(clock.nowMs(), IDEMPOTENCY_TTL_MS);
    },

    async get(ctx: SendContext, id: string) {
      const row = await loadScoped(ctx, id);
      const { replyTo, cc, bcc, ...item } = toListItem(row);
      // Event rows hold only statuses this service wrote, and data objects (or null).
      const emailEvents = (await emails.events(row.id)) as { emailId: string; status: EmailStatus; createdAt: string; data: Record<string, unknown> | null }[];
      // Retrieve-one: replyTo, cc and bcc are optional, not nullable (spec, Email: "nullable
      // in the list"); usesend's SDK types them string | string[] there.
      return {
        ...item,
        ...(replyTo === null ? {} : { replyTo }),
        ...(cc === null ? {} : { cc }),
        ...(bcc === null ? {} : { bcc }),
        // The email's own choice; null when the domain's switch decides (at send time).
        openTracking: trackingValue(row.open_tracking),
        clickTracking: trackingValue(row.click_tracking),
        teamId: row.team_id,
        emailEvents,
      };
    },

    async list(ctx: SendContext, q: EmailListQuery) {
      // Absent filters do not filter; an empty one names nothing, so nothing matches.
      if (q.domainIds?.length === 0 || q.tags?.length === 0) return { data: [], count: 0 };
      let domainIds = q.domainIds;
      if (ctx.domainId !== null) {
        // A key bound to a domain sees only that domain's emails.
        if (domainIds?.length && !domainIds.includes(ctx.domainId)) return { data: [], count: 0 };
        domainIds = [ctx.domainId];
      }
      const { page, count } = await orTooSlow(emails.listPage({ teamId: ctx.teamId, domainIds, startDate: q.startDate, endDate: q.endDate, tags: q.tags, offset: q.offset, limit: q.limit }));
      const ids = page.map((p) => p.id);
      if (page.reduce((sum, p) => sum + p.bodyChars, 0) <= LIST_INLINE_BODY_CHARS) {
        return { data: (await emails.findManyById(ctx.teamId, ids)).map(toListItem), count };
      }
      // Bodies may be up to the request limit each: a page of them read at once, and written as
      // one JSON string, took the heap (and past V8's longest string, the response). Items are
      // read one at a time as the response is written.
      const teamId = ctx.teamId;
      async function* items() {
        for (const id of ids) {
          const row = await emails.findById(teamId, id);
          if (row) yield toListItem(row);
        }
      }
      return { items: items(), count };
    },

    async reschedule(ctx: SendContext, id: string, scheduledAtInput: string): Promise<{ emailId: string }> {
      const row = await loadScoped(ctx, id);
      if (row.latest_status !== 'SCHEDULED') throw badRequest(`email ${id} is ${row.latest_status}; only a scheduled email can be rescheduled`);
      const now = clock.now();
      const at = parseScheduledAt(scheduledAtInput, now) ?? now;
      if (!(await emails.reschedule(ctx.teamId, id, at.toISOString(), at.getTime(), now.toISOString()))) {
        throw badRequest(`email ${id} is no longer scheduled: it is being sent`);
      }
      deps.onQueued?.();
      return { emailId: id };
    },

    async cancel(ctx: SendContext, id: string): Promise<{ emailId: string }> {
      const row = await loadScoped(ctx, id);
      if (row.latest_status !== 'SCHEDULED') throw badRequest(`email ${id} is ${row.latest_status}; only a scheduled email can be cancelled`);
      const now = clock.now().toISOString();
      const cancelled = emailBusEvent(statusEventType('CANCELLED'), row, 'CANCELLED', now);
      // The webhook outbox rows are written in the cancel's own transaction.
      if (!(await emails.cancel(ctx.teamId, id, now, statusRank('CANCELLED'), () => events.inTransaction([cancelled])))) {
        throw badRequest(`email ${id} is no longer scheduled: it is being sent`);
      }
      events.emit(cancelled);
      return { emailId: id };
    },
  };
}
export type EmailService = ReturnType<typeof createEmailService>;
