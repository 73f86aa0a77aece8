import { z } from 'zod';
import type { Clock } from '../../lib/clock.js';
import { newId } from '../../lib/ids.js';
import type { ContactBook, ContactBookRow, ContactBooksRepository } from '../../store/repositories/contact-books-repository.js';
import type { ContactRow } from '../../store/repositories/contacts-repository.js';
import type { DomainService } from '../domains/domain-service.js';
import { AppError, badRequest, forbidden, notFound, notUnique } from '../errors.js';
import { describeCampaigns } from '../campaigns/campaign-refs.js';
import type { CampaignRef } from '../../store/repositories/segments-repository.js';
import type { BusEvent, EventBus } from '../events.js';
import { domainOf, formatMailbox, parseMailbox } from '../emails/addresses.js';
import { canonicalHost } from '../domains/domain-names.js';
import { validateConfirmationContent } from './double-opt-in-content.js';
import { assertFoldable, assertNameFoldable, assertSubjectTemplateFoldable } from '../emails/email-headers.js';
import { orTooSlow } from '../query-too-slow.js';

export const DEFAULT_EMOJI = '📙';
export const MAX_VARIABLES = 100;
export const MAX_BOOK_PROPERTIES = 100;
const VARIABLE_NAME = /^[A-Za-z0-9_]+$/;
/** Built into every contact; a book variable of the same name would shadow them. */
const RESERVED_VARIABLES = new Set(['email', 'firstName', 'lastName']);

// Body of POST and PATCH /contactBooks (spec, Contact books). Everything is optional on PATCH.
const bookFields = {
  name: z.string().trim().min(1).max(200),
  emoji: z.string().trim().min(1).max(32),
  properties: z
    .record(z.string().min(1).max(100), z.string().max(2000))
    .refine((p) => Object.keys(p).length <= MAX_BOOK_PROPERTIES, `at most ${MAX_BOOK_PROPERTIES} properties`),
  variables: z
    .array(z.string().min(1).max(64).regex(VARIABLE_NAME, 'variable names are letters, digits and _ only'))
    .max(MAX_VARIABLES, `at most ${MAX_VARIABLES} variables`)
    .superRefine((names, ctx) => {
      names.forEach((n, i) => {
        if (RESERVED_VARIABLES.has(n)) ctx.addIssue({ code: 'custom', path: [i], message: `"${n}" is built in and cannot be declared` });
      });
    }),
  doubleOptInEnabled: z.boolean(),
  doubleOptInFrom: z.string().max(1000).nullable(),
  doubleOptInSubject: z.string().max(998).nullable(),
  // An editor document as a JSON string (spec); an object is accepted and stored as its JSON.
  doubleOptInContent: z
    .union([z.string().max(1_000_000), z.record(z.string(), z.unknown())])
    .nullable()
    .transform((v) => (v !== null && typeof v === 'object' ? JSON.stringify(v) : v)),
};

export const contactBookCreateSchema = z
  .object({
    name: bookFields.name,
    emoji: bookFields.emoji.optional(),
    properties: bookFields.properties.optional(),
    variables: bookFields.variables.optional(),
    doubleOptInEnabled: bookFields.doubleOptInEnabled.optional(),
    doubleOptInFrom: bookFields.doubleOptInFrom.optional(),
    doubleOptInSubject: bookFields.doubleOptInSubject.optional(),
    doubleOptInContent: bookFields.doubleOptInContent.optional(),
  })
  .strict();
export const contactBookPatchSchema = contactBookCreateSchema.partial().strict();

export type ContactBookCreateInput = z.infer<typeof contactBookCreateSchema>;
export type ContactBookPatchInput = z.infer<typeof contactBookPatchSchema>;

export interface ContactBookView {
  id: string;
  name: string;
  teamId: number;
  properties: Record<string, string>;
  variables: string[];
  emoji: string;
  doubleOptInEnabled: boolean;
  doubleOptInFrom: string | null;
  doubleOptInSubject: string | null;
  doubleOptInContent: string | null;
  createdAt: string;
  updatedAt: string;
  _count: { contacts: number };
}

/** Who is asking: contact books belong to the team; a domain-bound key may only name its own domain as sender. */
export interface BookScope {
  teamId: number;
  domainId: number | null;
}

export function bookView(b: ContactBookRow): ContactBookView {
  return {
    id: b.id,
    name: b.name,
    teamId: b.team_id,
    properties: JSON.parse(b.properties_json) as Record<string, string>,
    variables: JSON.parse(b.variables_json) as string[],
    emoji: b.emoji,
    doubleOptInEnabled: b.double_opt_in_enabled === 1,
    doubleOptInFrom: b.double_opt_in_from,
    doubleOptInSubject: b.double_opt_in_subject,
    doubleOptInContent: b.double_opt_in_content,
    createdAt: b.created_at,
    updatedAt: b.updated_at,
    _count: { contacts: b.contact_count },
  };
}

/**
 * The confirmation sender must be a verified domain of the team (400 otherwise, as the spec's
 * field rule); a key bound to one domain may not configure mail from another (403; architecture.md, Decisions: API keys).
 * Returns the normalised mailbox. Used when a book is written and again before each send,
 * because a domain can lose its verification in between.
 */
export async function resolveSender(domains: DomainService, scope: BookScope, from: string, field = 'doubleOptInFrom'): Promise<string> {
  const mailbox = parseMailbox(from, field);
  // As a send checks it: a name no header line can hold would fail every confirmation.
  assertFoldable(mailbox.name, field);
  assertNameFoldable(mailbox, field);
  let domain;
  try {
    domain = await domains.sendingDomain({ teamId: scope.teamId, domainId: null }, domainOf(mailbox.address));
  } catch (err) {
    if (err instanceof AppError && err.code === 'FORBIDDEN') throw badRequest(`${field}: ${err.message}`);
    throw err;
  }
  if (scope.domainId !== null && scope.domainId !== domain.id) throw forbidden(`${field}: this API key is restricted to domain ${scope.domainId}`);
  return formatMailbox(mailbox);
}

/** A book's double opt-in columns, by the field that sets each. */
const DOUBLE_OPT_IN_FIELDS = [
  ['doubleOptInFrom', 'double_opt_in_from'],
  ['doubleOptInEnabled', 'double_opt_in_enabled'],
  ['doubleOptInSubject', 'double_opt_in_subject'],
  ['doubleOptInContent', 'double_opt_in_content'],
] as const;

/**
 * A key bound to a domain changes a book's double opt-in settings only while the book confirms
 * from that domain (or from none yet): the confirmation email carries the words under its
 * sender's name, and the book being team-wide does not make another domain's words the key's
 * (architecture.md, Decisions: API keys). `field` is the first one the write would change.
 */
async function refuseOtherDomainsConfirmation(domains: DomainService, scope: BookScope, currentFrom: string | null, field: string): Promise<void> {
  if (scope.domainId === null || currentFrom === null) return;
  const own = await domains.get({ teamId: scope.teamId, domainId: scope.domainId }, scope.domainId);
  const senderDomain = canonicalHost(domainOf(parseMailbox(currentFrom, 'doubleOptInFrom').address));
  if (senderDomain !== canonicalHost(own.name)) {
    throw forbidden(`${field}: this API key is restricted to domain ${scope.domainId}, and this book's confirmation email is sent from ${senderDomain}`);
  }
}

export interface ContactBookServiceDeps {
  books: ContactBooksRepository;
  domains: DomainService;
  clock: Clock;
  /** Contact-side work of deleting a book (contact-service.ts): contact.deleted for every contact. */
  contacts: {
    deleteAllInBook(teamId: number, bookId: string): Promise<void>;
    /** Events for contacts deleted inside the caller's open transaction, written to the outbox there; emit them after the commit. */
    deletedEvents(rows: ContactRow[]): BusEvent[];
  };
  events: EventBus;
}

export function createContactBookService(deps: ContactBookServiceDeps) {
  const { books, clock } = deps;

  async function load(teamId: number, id: string): Promise<ContactBook> {
    const b = await books.findById(teamId, id);
    if (!b) throw notFound(`contact book ${id} not found`);
    return b;
  }

  const checkSender = (scope: BookScope, from: string, field?: string) => resolveSender(deps.domains, scope, from, field);

  function cleanSubject(subject: string | null | undefined): string | null | undefined {
    if (subject === undefined || subject === null) return subject;
    const s = subject.replace(/\r?\n|\r/g, ' ').trim();
    assertSubjectTemplateFoldable(s, 'doubleOptInSubject');
    return s === '' ? null : s;
  }

  return {
    load,
    checkSender,

    async create(scope: BookScope, input: ContactBookCreateInput): Promise<ContactBookView> {
      const enabled = input.doubleOptInEnabled ?? false;
      const from = input.doubleOptInFrom ? await checkSender(scope, input.doubleOptInFrom) : null;
      if (enabled && !from) throw badRequest('doubleOptInFrom: required when doubleOptInEnabled is true (the confirmation email needs a sender)');
      const now = clock.now().toISOString();
      const row = await books.insert({
        id: newId('cb'),
        team_id: scope.teamId,
        name: input.name,
        emoji: input.emoji ?? DEFAULT_EMOJI,
        properties_json: JSON.stringify(input.properties ?? {}),
        variables_json: JSON.stringify([...new Set(input.variables ?? [])]),
        double_opt_in_enabled: enabled ? 1 : 0,
        double_opt_in_from: from,
        double_opt_in_subject: cleanSubject(input.doubleOptInSubject) ?? null,
        double_opt_in_content: validateConfirmationContent(input.doubleOptInContent),
        created_at: now,
        updated_at: now,
        deleting_since: null,
      });
      return bookView(row);
    },

    async list(scope: BookScope): Promise<ContactBookView[]> {
      return (await orTooSlow(books.list(scope.teamId))).map(bookView);
    },

    async get(scope: BookScope, id: string): Promise<ContactBookView> {
      const b = await orTooSlow(books.findCounted(scope.teamId, id));
      if (!b) throw notFound(`contact book ${id} not found`);
      return bookView(b);
    },

    async update(scope: BookScope, id: string, patch: ContactBookPatchInput): Promise<ContactBookView> {
      const current = await load(scope.teamId, id);
      const changes: Parameters<ContactBooksRepository['update']>[2] = { updated_at: clock.now().toISOString() };
      if (patch.name !== undefined) changes.name = patch.name;
      if (patch.emoji !== undefined) changes.emoji = patch.emoji;
      if (patch.properties !== undefined) changes.properties_json = JSON.stringify(patch.properties);
      if (patch.variables !== undefined) changes.variables_json = JSON.stringify([...new Set(patch.variables)]);
      if (patch.doubleOptInSubject !== undefined) changes.double_opt_in_subject = cleanSubject(patch.doubleOptInSubject);
      if (patch.doubleOptInContent !== undefined) changes.double_opt_in_content = validateConfirmationContent(patch.doubleOptInContent);

      const enabled = patch.doubleOptInEnabled ?? current.double_opt_in_enabled === 1;
      let from = current.double_opt_in_from;
      if (patch.doubleOptInFrom !== undefined) {
        from = patch.doubleOptInFrom ? await checkSender(scope, patch.doubleOptInFrom) : null;
        changes.double_opt_in_from = from;
      } else if (enabled && current.double_opt_in_enabled !== 1 && from) {
        // Turning double opt-in on: the stored sender must still be usable now.
        await checkSender(scope, from);
      }
      if (enabled && !from) throw badRequest('doubleOptInFrom: required when doubleOptInEnabled is true (the confirmation email needs a sender)');
      if (patch.doubleOptInEnabled !== undefined) changes.double_opt_in_enabled = patch.doubleOptInEnabled ? 1 : 0;
      // Only what changes counts: a client that sends a field back as it read it changes nothing.
      const changed = DOUBLE_OPT_IN_FIELDS.find(([, column]) => changes[column] !== undefined && changes[column] !== current[column]);
      if (changed) await refuseOtherDomainsConfirmation(deps.domains, scope, current.double_opt_in_from, changed[0]);

      const updated = await books.update(scope.teamId, id, changes);
      if (!updated) throw notFound(`contact book ${id} not found`);
      return bookView(updated);
    },

    /**
     * Refused (409) while a scheduled, running or paused campaign sends to the book: it would
     * send to nobody. Checked before the contacts go, in the transaction that marks the book as
     * being deleted (nothing is scheduled on it from then on), and again in the final one.
     * A delete that failed half-way leaves the book marked; deleting it again finishes it.
     */
    async remove(scope: BookScope, id: string): Promise<{ id: string; success: boolean; message: string }> {
      await load(scope.teamId, id);
      const inUse = (blockedBy: CampaignRef[]) =>
        notUnique(`contact book ${id} is used by ${describeCampaigns(blockedBy)}: delete ${blockedBy.length === 1 ? 'that campaign' : 'those campaigns'} first, or wait until ${blockedBy.length === 1 ? 'it is' : 'they are'} sent`);
      // Checked and marked in one transaction: a campaign scheduled or created to send on the
      // book from then on is refused (409), so none is left needing a book whose contacts went.
      const begun = await books.beginDelete(scope.teamId, id, clock.now().toISOString());
      if (!begun) throw notFound(`contact book ${id} not found`);
      if (begun.blockedBy.length) throw inUse(begun.blockedBy);
      // Contacts go first in bounded batches (short transactions, architecture.md, House rules 6); the book and
      // anything added meanwhile go in the final transaction.
      await deps.contacts.deleteAllInBook(scope.teamId, id);
      let announced: BusEvent[] = [];
      const leftovers = await books.delete(scope.teamId, id, (rows) => {
        announced = deps.contacts.deletedEvents(rows);
      });
      if (!leftovers) throw notFound(`contact book ${id} not found`);
      if ('blockedBy' in leftovers) throw inUse(leftovers.blockedBy);
      for (const e of announced) deps.events.emit(e);
      return { id, success: true, message: 'Contact book deleted successfully' };
    },
  };
}
export type ContactBookService = ReturnType<typeof createContactBookService>;
