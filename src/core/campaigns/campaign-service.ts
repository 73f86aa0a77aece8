import type { Clock } from '../../lib/clock.js';
import { newId } from '../../lib/ids.js';
import type { Logger } from '../../lib/logger.js';
import type { CampaignRow, CampaignScope, CampaignsRepository } from '../../store/repositories/campaigns-repository.js';
import type { ContactBooksRepository } from '../../store/repositories/contact-books-repository.js';
import type { SegmentsRepository } from '../../store/repositories/segments-repository.js';
import type { CampaignStatus } from '../../store/tables/database.js';
import type { FilterNode } from '../../store/repositories/contact-filter-sql.js';
import type { ContactService } from '../contacts/contact-service.js';
import type { DomainService } from '../domains/domain-service.js';
import { parseMailbox, parseMailboxList, domainOf } from '../emails/addresses.js';
import { MAX_RECIPIENTS, trackingColumn, trackingValue, type EmailService } from '../emails/email-service.js';
import { parseScheduledAt } from '../emails/scheduled-at.js';
import { assertFoldable, assertNameFoldable, assertSubjectTemplateFoldable } from '../emails/email-headers.js';
import { badRequest, notFound, notUnique, type AppError } from '../errors.js';
import type { EventBus } from '../events.js';
import { personalizeCampaign, renderCampaignBody, withUnsubscribeLink } from './campaign-content.js';
import { signUnsubscribeToken } from './unsubscribe-token.js';
import { createUnsubscribeLinks } from './unsubscribe-links.js';
import { createCampaignCounters } from './campaign-counters.js';
import { isRecipientGone, isStorageFailure, isUniqueViolation } from '../../store/store-errors.js';
import { orTooSlow } from '../query-too-slow.js';

export const DEFAULT_BATCH_SIZE = 500;
export const MAX_BATCH_SIZE = 100_000;
/** Contacts submitted per store round trip inside one batch (bounds memory for huge batches). */
const FAN_OUT_CHUNK = 1000;
/** How long a node holds a campaign batch it is sending (released when done; a dead node's is swept sooner). */
const BATCH_LEASE_MS = 10 * 60_000;
/**
 * Batches of one campaign that may fail in a row, for a reason other than the store being out of
 * reach, before it is paused: a fault that repeats (a bug, data it cannot handle) would otherwise
 * be retried every second for ever, an error line each time, while nobody gets mail.
 */
export const MAX_BATCH_FAILURES = 5;
/** `any` of nothing matches no contact. */
const NOBODY: FilterNode = { match: 'any', conditions: [] };

export interface CampaignInput {
  name: string;
  from: string;
  subject: string;
  contactBookId: string;
  segmentId?: string | null;
  previewText?: string | null;
  content?: string | null;
  html?: string | null;
  replyTo?: string | string[] | null;
  cc?: string | string[] | null;
  bcc?: string | string[] | null;
  sendNow?: boolean;
  scheduledAt?: string | null;
  batchSize?: number;
  /** Tracking of every email the campaign sends; null or absent, the domain's switch. */
  openTracking?: boolean | null;
  clickTracking?: boolean | null;
}

/** A key bound to a domain (domainId) sees and manages only the campaigns sent from it. */
export type { CampaignScope };

export interface CampaignServiceDeps {
  campaigns: CampaignsRepository;
  contactBooks: ContactBooksRepository;
  segments: SegmentsRepository;
  contacts: ContactService;
  emails: EmailService;
  domains: DomainService;
  events: EventBus;
  clock: Clock;
  logger: Logger;
  secret: string;
  publicUrl: string;
  hostname: string;
  /** Time between two batches of one campaign (batchSize messages per window). */
  batchWindowMs: number;
  /** This node: the owner of the campaign batches it sends. */
  owner: string;
  /** config.sandbox of this process: kept on a campaign it schedules, starts or resumes, for its batches' emails. */
  sandbox?: boolean;
}

const list = (v: string | string[] | null | undefined) => (v === undefined || v === null ? [] : Array.isArray(v) ? v : [v]);

export function createCampaignService(deps: CampaignServiceDeps) {
  const { campaigns, clock } = deps;
  const running = new Set<string>();
  /** As kept on a campaign this process schedules, starts or resumes: its batches send as that. */
  const inSandbox = () => (deps.sandbox ? 1 : 0);
  const unsubscribeLinks = createUnsubscribeLinks({ campaigns, contacts: deps.contacts, secret: deps.secret, publicUrl: deps.publicUrl });
  const counters = createCampaignCounters({ campaigns, contacts: deps.contacts });

  function view(c: CampaignRow) {
    return {
      id: c.id,
      name: c.name,
      from: c.from_addr,
      subject: c.subject,
      previewText: c.preview_text,
      contactBookId: c.contact_book_id,
      segmentId: c.segment_id,
      content: c.content,
      html: c.html,
      status: c.status,
      scheduledAt: c.scheduled_at,
      batchSize: c.batch_size,
      openTracking: trackingValue(c.open_tracking),
      clickTracking: trackingValue(c.click_tracking),
      // An integer, as usesend's campaign resource has it: a window under a minute reads as 1.
      batchWindowMinutes: Math.ceil(deps.batchWindowMs / 60_000),
      total: c.total,
      sent: c.sent,
      delivered: c.delivered,
      opened: c.opened,
      clicked: c.clicked,
      bounced: c.bounced,
      hardBounced: c.hard_bounced,
      complained: c.complained,
      unsubscribed: c.unsubscribed,
      machineOpened: c.machine_opened,
      machineClicked: c.machine_clicked,
      replyTo: JSON.parse(c.reply_to_json) as string[],
      cc: JSON.parse(c.cc_json) as string[],
      bcc: JSON.parse(c.bcc_json) as string[],
      createdAt: c.created_at,
      updatedAt: c.updated_at,
    };
  }

  async function load(scope: CampaignScope, id: string): Promise<CampaignRow> {
    // Another domain's campaign is not found for a bound key, as its emails are (the query carries the domain).
    const c = await campaigns.findById(scope, id);
    if (!c) throw notFound(`campaign ${id} not found`);
    return c;
  }

  /** Checks everything a campaign refers to; returns normalised columns. */
  async function validate(scope: CampaignScope, input: Partial<CampaignInput>, current?: CampaignRow) {
    const out: Partial<CampaignRow> = {};
    // Which one is the body is not guessed (the other would be dropped without a word).
    if (input.content && input.html) throw badRequest('html: give either content or html, not both (content is an editor document, rendered to HTML)');
    if (input.from !== undefined) {
      const from = parseMailbox(input.from, 'from');
      // As a send checks it: a name no header line can hold would fail every message of the campaign.
      assertFoldable(from.name, 'from');
      assertNameFoldable(from, 'from');
      // Verified, the team's, and inside the key's domain (403 otherwise), like any send.
      const domain = await deps.domains.sendingDomain(scope, domainOf(from.address));
      out.from_addr = input.from;
      out.domain_id = domain.id;
    }
    const bookId = input.contactBookId ?? current?.contact_book_id;
    if (input.contactBookId !== undefined && !(await deps.contactBooks.findById(scope.teamId, input.contactBookId))) {
      throw badRequest(`contactBookId: contact book ${input.contactBookId} not found`);
    }
    if (input.contactBookId !== undefined) out.contact_book_id = input.contactBookId;
    // A segment filters its own book only: checked when either side changes.
    const segmentId = input.segmentId !== undefined ? input.segmentId : (current?.segment_id ?? null);
    if (segmentId !== null && (input.segmentId !== undefined || input.contactBookId !== undefined)) {
      const seg = await deps.segments.findById(scope.teamId, segmentId);
      if (!seg) throw badRequest(`segmentId: segment ${segmentId} not found`);
      if (seg.contact_book_id !== bookId) throw badRequest(`segmentId: segment ${segmentId} belongs to another contact book`);
    }
    if (input.segmentId !== undefined) out.segment_id = input.segmentId;
    for (const [field, key] of [['replyTo', 'reply_to_json'], ['cc', 'cc_json'], ['bcc', 'bcc_json']] as const) {
      const v = input[field];
      if (v !== undefined) out[key] = JSON.stringify(parseMailboxList(v, field).map((m) => m.address));
    }
    // Every message goes to its contact and all the copies: refused here, not at every send.
    const copies = (key: 'cc_json' | 'bcc_json') => (JSON.parse(out[key] ?? current?.[key] ?? '[]') as string[]).length;
    if (1 + copies('cc_json') + copies('bcc_json') > MAX_RECIPIENTS) {
      throw badRequest(`${input.bcc !== undefined ? 'bcc' : 'cc'}: cc and bcc together take at most ${MAX_RECIPIENTS - 1} addresses (each message also goes to its contact)`);
    }
    if (input.name !== undefined) out.name = input.name;
    if (input.subject !== undefined) {
      // Every message would be a rendering failure.
      assertSubjectTemplateFoldable(input.subject, 'subject');
      out.subject = input.subject;
    }
    if (input.previewText !== undefined) out.preview_text = input.previewText;
    // The preview text is rendered into the HTML (the preheader): a change of it alone re-renders too.
    if (input.content !== undefined || input.html !== undefined || input.previewText !== undefined) {
      // Given HTML replaces the body, an editor draft included.
      const content = input.content !== undefined ? input.content : input.html ? null : current?.content;
      const html = input.html !== undefined ? input.html : content ? null : current?.html;
      if (content || html) {
        const rendered = renderCampaignBody({ content, html, previewText: input.previewText !== undefined ? input.previewText : current?.preview_text });
        out.content = content ?? null;
        out.html = content ? rendered.html : (html ?? null);
        out.text_body = rendered.text;
      } else {
        // A draft may go without a body until it is scheduled (schedule refuses it then).
        out.content = null;
        out.html = null;
        out.text_body = null;
      }
    }
    if (input.batchSize !== undefined) out.batch_size = input.batchSize;
    if (input.openTracking !== undefined) out.open_tracking = trackingColumn(input.openTracking);
    if (input.clickTracking !== undefined) out.click_tracking = trackingColumn(input.clickTracking);
    return out;
  }

  /**
   * The campaign's audience filter: none for the whole book; once started, the segment's filter
   * as of the start (an edit or delete meanwhile changes no audience already counted); before, a
   * segment deleted meanwhile (or moved to another book) selects nobody, never the whole book.
   */
  async function filterFor(c: CampaignRow): Promise<FilterNode | null> {
    if (!c.segment_id) return null;
    if (c.segment_filters_json !== null) return JSON.parse(c.segment_filters_json) as FilterNode;
    const seg = await deps.segments.findById(c.team_id, c.segment_id);
    if (!seg || seg.contact_book_id !== c.contact_book_id) return NOBODY;
    return JSON.parse(seg.filters_json) as FilterNode;
  }

  /**
   * Why a campaign on this book (and segment, if any) would have nobody to send to, if so: the
   * book is gone (400) or being deleted (409: its contacts are going), or the segment is gone
   * (400). `gone` words a missing one as the request would: "not found" when it is named now,
   * "no longer exists" when a stored campaign names it.
   */
  async function audienceProblem(teamId: number, bookId: string, segmentId: string | null, gone: 'not found' | 'no longer exists'): Promise<AppError | null> {
    const book = await deps.contactBooks.findById(teamId, bookId);
    if (!book) return badRequest(`contactBookId: contact book ${bookId} ${gone}`);
    if (book.deleting_since !== null) return notUnique(`contactBookId: contact book ${bookId} is being deleted`);
    if (segmentId) {
      const seg = await deps.segments.findById(teamId, segmentId);
      if (!seg || seg.contact_book_id !== bookId) return badRequest(`segmentId: segment ${segmentId} ${gone}`);
    }
    return null;
  }

  /**
   * Why the campaign has nobody to send to, if so: its contact book was deleted (or is being
   * deleted), or (before it started with the segment's filter) its segment. Deleting either is
   * refused while a scheduled campaign needs it; a draft may still point at one, and is
   * refused when scheduled.
   */
  const audienceGone = (c: CampaignRow) => audienceProblem(c.team_id, c.contact_book_id, c.segment_filters_json === null ? c.segment_id : null, 'no longer exists');

  function resolveWhen(scheduledAt: string | null | undefined): string {
    const now = clock.now();
    return (scheduledAt ? (parseScheduledAt(scheduledAt, now) ?? now) : now).toISOString();
  }

  /** Sends one batch of a due campaign. Durable: the cursor and each contact's row are stored. */
  /** Batches failed in a row by campaign (this node's count; a success clears it). */
  const failures = new Map<string, number>();

  async function pauseIfFailingAgain(id: string, err: unknown): Promise<void> {
    if (isStorageFailure(err)) return; // the store out of reach: the next tick tries again
    const count = (failures.get(id) ?? 0) + 1;
    if (count < MAX_BATCH_FAILURES) {
      failures.set(id, count);
      return;
    }
    failures.delete(id);
    try {
      const paused = await campaigns.update(id, { status: 'PAUSED', updated_at: clock.now().toISOString() }, ['RUNNING']);
      if (paused) deps.logger.error({ campaignId: id, err }, `campaign paused: its batch failed ${count} times in a row; resume it once the cause (in the error) is fixed`);
    } catch (pauseErr) {
      deps.logger.error({ err: pauseErr, campaignId: id }, 'a failing campaign could not be paused');
    }
  }

  async function runBatch(c: CampaignRow): Promise<void> {
    const now = clock.now();
    if (c.status === 'SCHEDULED') {
      // Scheduled, then its segment or book went (a delete that raced the schedule): paused,
      // saying why, rather than sent to nobody and marked SENT.
      const gone = await audienceGone(c);
      if (gone) {
        await campaigns.update(c.id, { status: 'PAUSED', updated_at: now.toISOString() }, ['SCHEDULED']);
        deps.logger.warn({ campaignId: c.id }, `campaign paused before it started: ${gone.message}`);
        return;
      }
      // The audience is the book's contacts as of the first start (a restart after a pause keeps it).
      const startedAt = c.started_at ?? now.toISOString();
      const filter = await filterFor(c);
      const total = (await campaigns.countReached(c.id)) + (await campaigns.countEligible({ ...c, started_at: startedAt }, filter));
      const segmentFilters = c.segment_id ? JSON.stringify(filter) : null;
      const started = await campaigns.start(c.id, { total, started_at: startedAt, segment_filters_json: segmentFilters, next_batch_at: null, updated_at: now.toISOString() }, now.toISOString());
      if (!started) return; // deleted or rescheduled meanwhile
      c = started;
    }
    const book = await deps.contactBooks.findById(c.team_id, c.contact_book_id);
    if (!book) {
      await campaigns.update(c.id, { status: 'PAUSED', updated_at: now.toISOString() }, ['RUNNING']);
      deps.logger.warn({ campaignId: c.id }, 'campaign paused: its contact book was deleted');
      return;
    }
    if (c.accepted_in_sandbox === 1 && !deps.sandbox) {
      // A trial: its next batch would be real mail to every contact left, which nobody asked
      // for. Resuming it here (outside sandbox mode) is that ask.
      await campaigns.update(c.id, { status: 'PAUSED', updated_at: now.toISOString() }, ['RUNNING']);
      deps.logger.warn({ campaignId: c.id }, 'campaign paused: it was scheduled in sandbox mode and this server is not in sandbox mode; resume it to send the rest for real');
      return;
    }
    // Its emails are accepted as the campaign was (a server in sandbox mode holds real mail
    // instead of capturing it); before this was kept, as this process.
    const acceptedInSandbox = c.accepted_in_sandbox === null ? undefined : c.accepted_in_sandbox === 1;
    const variables = JSON.parse(book.variables_json) as string[];
    const filter = await filterFor(c);
    const body = { subject: c.subject, html: withUnsubscribeLink(c.html ?? ''), text: c.text_body ?? '' };
    const domainCache = new Map();
    let remaining = c.batch_size;
    let cursor = c.cursor;
    while (remaining > 0) {
      const contacts = await campaigns.nextContacts({ ...c, cursor }, filter, Math.min(FAN_OUT_CHUNK, remaining));
      if (contacts.length === 0) {
        await campaigns.update(c.id, { status: 'SENT', cursor, next_batch_at: null, updated_at: clock.now().toISOString() }, ['RUNNING']);
        return;
      }
      const items = contacts.map((contact) => {
        const properties = JSON.parse(contact.properties_json) as Record<string, string>;
        const token = signUnsubscribeToken(deps.secret, c.id, contact.id);
        const unsubscribeUrl = `${deps.publicUrl}/unsubscribe/${token}`;
        // No prototype: a book variable may be named "toString" or "__proto__", and a contact
        // without it must read as missing (its fallback), not as Object's inherited member.
        const values: Record<string, string | undefined> = Object.assign(Object.create(null) as Record<string, string | undefined>, {
          email: contact.email,
          firstName: contact.first_name ?? undefined,
          lastName: contact.last_name ?? undefined,
          unsubscribeUrl,
        });
        for (const v of variables) values[v] = Object.hasOwn(properties, v) ? properties[v] : undefined;
        const personal = personalizeCampaign(body, values);
        return {
          input: {
            from: c.from_addr,
            to: contact.email,
            subject: personal.subject,
            html: personal.html,
            // None when the campaign's HTML had none made (too large, unreadable): HTML-only.
            text: personal.text || undefined,
            replyTo: list(JSON.parse(c.reply_to_json) as string[]).length ? (JSON.parse(c.reply_to_json) as string[]) : undefined,
            cc: (JSON.parse(c.cc_json) as string[]).length ? (JSON.parse(c.cc_json) as string[]) : undefined,
            bcc: (JSON.parse(c.bcc_json) as string[]).length ? (JSON.parse(c.bcc_json) as string[]) : undefined,
            openTracking: trackingValue(c.open_tracking) ?? undefined,
            clickTracking: trackingValue(c.click_tracking) ?? undefined,
          },
          opts: {
            campaignId: c.id,
            contactId: contact.id,
            // A contact whose data makes the message unwritable is that email's RENDERING_FAILURE, not a refused send.
            personalised: true,
            domainCache,
            acceptedInSandbox,
            // RFC 2369 + RFC 8058: a URL for one-click POST and a mailto for older clients.
            systemHeaders: {
              'List-Unsubscribe': `<${unsubscribeUrl}>, <mailto:unsubscribe+${token}@${deps.hostname}>`,
              'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
              Precedence: 'bulk',
            },
          },
        };
      });
      const results = await deps.emails.submitEach({ teamId: c.team_id, domainId: null, apiKeyId: null }, items);
      // A contact reached before a restart fails its insert on the (campaign, contact) key:
      // that is the no-duplicates guarantee at work, not an error. Nor is a contact who left
      // (unsubscribed, suppressed, deleted) after this chunk was read: the insert checks again
      // in its transaction and stores nothing, so they are skipped and never counted as sent.
      const failed = results.filter((r): r is { error: Error } => 'error' in r && !isUniqueViolation(r.error, 'campaign_recipients') && !isRecipientGone(r.error));
      if (failed.length) {
        // A message the store could not take (a full disk, the database out of reach) was not
        // refused, even when none of the chunk was taken: the next batch starts at that contact
        // instead of skipping it for good or pausing the campaign (the (campaign, contact) key
        // refuses the ones after it that were stored).
        const unstored = results.findIndex((r) => 'error' in r && isStorageFailure(r.error));
        if (unstored >= 0) {
          const retryFrom = unstored === 0 ? cursor : contacts[unstored - 1]!.id;
          await campaigns.update(c.id, { cursor: retryFrom, next_batch_at: clock.nowMs() + deps.batchWindowMs, updated_at: clock.now().toISOString() }, ['RUNNING']);
          deps.logger.error({ campaignId: c.id, error: (results[unstored] as { error: Error }).error.message }, 'campaign batch stopped: a message could not be stored; the next batch tries again');
          return;
        }
        // A verification lapse or a deleted domain fails every item: pause rather than skip everyone.
        if (failed.length === results.length && results.length > 0) {
          await campaigns.update(c.id, { status: 'PAUSED', cursor, updated_at: clock.now().toISOString() }, ['RUNNING']);
          deps.logger.error({ campaignId: c.id, error: failed[0]!.error.message }, 'campaign paused: sending failed for a whole batch');
          return;
        }
        deps.logger.warn({ campaignId: c.id, failed: failed.length, first: failed[0]!.error.message }, 'some campaign messages were refused');
      }
      cursor = contacts[contacts.length - 1]!.id;
      remaining -= contacts.length;
      // Progress is durable per chunk: a restart continues after this cursor, and the
      // (campaign, contact) key refuses anyone already reached.
      const still = await campaigns.update(c.id, { cursor, updated_at: clock.now().toISOString() }, ['RUNNING']);
      if (!still) return; // paused or deleted while sending: stop here, resume continues from the cursor
      // The lease is held while the batch progresses, so one longer than a lease is not taken
      // for a dead node's and sent alongside by another; a node that lost it meanwhile (stalled
      // past it, or taken for dead) leaves the rest to the node that has it.
      if (!(await campaigns.renewBatch(c.id, deps.owner, clock.nowMs() + BATCH_LEASE_MS))) return;
    }
    await campaigns.update(c.id, { next_batch_at: clock.nowMs() + deps.batchWindowMs, updated_at: clock.now().toISOString() }, ['RUNNING']);
  }

  return {
    view,

    async create(scope: CampaignScope, input: CampaignInput) {
      // A draft's body may come later by PATCH; one that is to go out needs it now.
      if ((input.sendNow || input.scheduledAt) && !input.content && !input.html) throw badRequest('content or html is required to schedule a campaign');
      if (input.sendNow && input.scheduledAt) throw badRequest('sendNow: give either sendNow or scheduledAt, not both');
      const cols = await validate(scope, input);
      const now = clock.now().toISOString();
      const scheduled = input.sendNow || input.scheduledAt ? resolveWhen(input.scheduledAt) : null;
      const row = {
        id: newId('cp'),
        team_id: scope.teamId,
        name: input.name,
        from_addr: input.from,
        domain_id: cols.domain_id ?? null,
        subject: input.subject,
        preview_text: input.previewText ?? null,
        contact_book_id: input.contactBookId,
        segment_id: input.segmentId ?? null,
        content: cols.content ?? null,
        html: cols.html ?? null,
        text_body: cols.text_body ?? null,
        reply_to_json: cols.reply_to_json ?? '[]',
        cc_json: cols.cc_json ?? '[]',
        bcc_json: cols.bcc_json ?? '[]',
        status: (scheduled ? 'SCHEDULED' : 'DRAFT') as CampaignStatus,
        scheduled_at: scheduled,
        started_at: null,
        segment_filters_json: null,
        batch_size: input.batchSize ?? DEFAULT_BATCH_SIZE,
        open_tracking: cols.open_tracking ?? null,
        click_tracking: cols.click_tracking ?? null,
        accepted_in_sandbox: scheduled ? inSandbox() : null,
        cursor: null,
        next_batch_at: null,
        total: 0,
        sent: 0,
        delivered: 0,
        opened: 0,
        clicked: 0,
        bounced: 0,
        hard_bounced: 0,
        complained: 0,
        unsubscribed: 0,
        machine_opened: 0,
        machine_clicked: 0,
        created_at: now,
        updated_at: now,
        deleted_at: null,
      };
      // One to send needs its audience: checked again in the inserting transaction, so a delete
      // of the book or segment is either seen here or refused for this campaign (409).
      if (!(await campaigns.insert(row, { withAudience: scheduled !== null }))) {
        throw (await audienceProblem(scope.teamId, row.contact_book_id, row.segment_id, 'not found')) ?? badRequest('contactBookId: the contact book or segment changed meanwhile; try again');
      }
      return view(row);
    },

    async list(scope: CampaignScope, q: { status?: CampaignStatus; search?: string; offset: number; limit: number }) {
      const { rows, total } = await orTooSlow(campaigns.list(scope, q));
      return { items: rows.map(view), total };
    },

    async get(scope: CampaignScope, id: string) {
      return view(await load(scope, id));
    },

    /**
     * Whether a SENT campaign's counters can still move: some recipient is neither sent nor
     * settled, and some email of it is still on its way (a suppressed or failed one never is).
     */
    async stillDelivering(scope: CampaignScope, id: string): Promise<boolean> {
      const c = await load(scope, id);
      if (c.status !== 'SENT' || (c.sent >= c.total && c.delivered + c.bounced >= c.sent)) return false;
      return campaigns.hasEmailsUnderway(c.id);
    },

    async update(scope: CampaignScope, id: string, patch: Partial<CampaignInput>) {
      const c = await load(scope, id);
      if (c.status !== 'DRAFT') throw badRequest(`campaign ${id} is ${c.status}; only a draft can be updated`);
      const cols = await validate(scope, patch, c);
      const updated = await campaigns.update(id, { ...cols, updated_at: clock.now().toISOString() }, ['DRAFT']);
      if (!updated) throw badRequest(`campaign ${id} is no longer a draft`);
      return view(updated);
    },

    async remove(scope: CampaignScope, id: string) {
      const c = await campaigns.softDelete(scope, id, clock.now().toISOString());
      if (!c) throw notFound(`campaign ${id} not found`);
      return view(c);
    },

    async schedule(scope: CampaignScope, id: string, input: { scheduledAt?: string | null; batchSize?: number }) {
      const c = await load(scope, id);
      if (c.status !== 'DRAFT' && c.status !== 'SCHEDULED') {
        throw badRequest(`campaign ${id} is ${c.status}; only a draft or scheduled campaign can be scheduled`);
      }
      if (!c.html) throw badRequest('content or html is required before scheduling');
      await deps.domains.sendingDomain(scope, domainOf(parseMailbox(c.from_addr, 'from').address));
      const gone = await audienceGone(c);
      if (gone) throw gone;
      const updated = await campaigns.update(
        id,
        { status: 'SCHEDULED', scheduled_at: resolveWhen(input.scheduledAt), batch_size: input.batchSize ?? c.batch_size, accepted_in_sandbox: inSandbox(), updated_at: clock.now().toISOString() },
        ['DRAFT', 'SCHEDULED'],
        { withBody: true, withAudience: true },
      );
      if (!updated) throw (await audienceGone(c)) ?? badRequest(`campaign ${id} changed state meanwhile`);
      return { success: true, campaign: view(updated) };
    },

    async pause(scope: CampaignScope, id: string) {
      const c = await load(scope, id);
      if (c.status !== 'RUNNING') throw badRequest(`campaign ${id} is ${c.status}; only a running campaign can be paused`);
      const updated = await campaigns.update(id, { status: 'PAUSED', updated_at: clock.now().toISOString() }, ['RUNNING']);
      if (!updated) throw badRequest(`campaign ${id} changed state meanwhile`);
      return { success: true, campaign: view(updated) };
    },

    async resume(scope: CampaignScope, id: string) {
      const c = await load(scope, id);
      if (c.status !== 'PAUSED') throw badRequest(`campaign ${id} is ${c.status}; only a paused campaign can be resumed`);
      // Resuming sends: a bound key (which finds only its domain's campaigns) resumes only while
      // the from-address is still on its domain, as schedule checks. Unbound keys keep resuming
      // as before: a lapsed verification pauses the campaign again at its next batch.
      if (scope.domainId !== null) await deps.domains.sendingDomain(scope, domainOf(parseMailbox(c.from_addr, 'from').address));
      // A campaign that started goes on running: its start time ahead of now only means the
      // server clock was set back since, and waiting for it would stall the campaign by the jump.
      const gone = await audienceGone(c);
      if (gone) throw gone;
      const future = c.started_at === null && c.scheduled_at !== null && Date.parse(c.scheduled_at) > clock.nowMs();
      // Paused before it started (its segment or book was gone then): it starts as scheduled, its audience counted then.
      const unstarted = c.started_at === null && c.cursor === null;
      // The next batch keeps its time: a pause and a resume never make room for another batch
      // within the window of the last one (a pause longer than the window resumes at once).
      const updated = await campaigns.update(id, { status: future || unstarted ? 'SCHEDULED' : 'RUNNING', accepted_in_sandbox: inSandbox(), updated_at: clock.now().toISOString() }, ['PAUSED'], { withAudience: true });
      if (!updated) throw (await audienceGone(c)) ?? badRequest(`campaign ${id} changed state meanwhile`);
      return { success: true, campaign: view(updated) };
    },

    /** Runs one batch of every campaign with work due. Called by the scheduler every second. */
    async tick(): Promise<number> {
      await campaigns.clampNextBatches(clock.nowMs(), deps.batchWindowMs);
      const due = await campaigns.due(clock.now().toISOString(), clock.nowMs());
      let ran = 0;
      for (const listed of due) {
        if (running.has(listed.id)) continue;
        running.add(listed.id);
        try {
          // Leased for this node: nodes sharing a store never send one batch twice, and a node
          // that dies mid-batch leaves it to the others (core/cluster).
          const c = await campaigns.claimBatch(listed.id, deps.owner, clock.now().toISOString(), clock.nowMs(), clock.nowMs() + BATCH_LEASE_MS);
          if (!c) continue;
          try {
            await runBatch(c);
            failures.delete(c.id);
            ran++;
          } finally {
            await campaigns.releaseBatch(c.id, deps.owner);
          }
        } catch (err) {
          deps.logger.error({ err, campaignId: listed.id }, 'campaign batch failed');
          await pauseIfFailingAgain(listed.id, err);
        } finally {
          running.delete(listed.id);
        }
      }
      return ran;
    },

    /** At startup on SQLite (one node per database file): a batch lease left behind belonged to a dead process. */
    async releaseStaleBatches(): Promise<number> {
      return campaigns.releaseAllBatches();
    },

    ...unsubscribeLinks,
    ...counters,
  };
}
export type CampaignService = ReturnType<typeof createCampaignService>;
