import { z } from 'zod';
import type { Clock } from '../../lib/clock.js';
import { newId } from '../../lib/ids.js';
import type { ContactBooksRepository } from '../../store/repositories/contact-books-repository.js';
import type { ContactsRepository } from '../../store/repositories/contacts-repository.js';
import type { FilterGroup } from '../../store/repositories/contact-filter-sql.js';
import type { SegmentRow, SegmentsRepository } from '../../store/repositories/segments-repository.js';
import { contactView, type ContactView } from '../contacts/contact-service.js';
import { badRequest, notFound, notUnique } from '../errors.js';
import { describeCampaigns } from '../campaigns/campaign-refs.js';
import { parseSegmentFilters } from './segment-filters.js';
import { isForeignKeyViolation } from '../../store/store-errors.js';
import { orTooSlow } from '../query-too-slow.js';

// Filters are checked by parseSegmentFilters (which names the bad condition); zod only
// requires them to be present here.
/** filters are checked by parseSegmentFilters (messages name the condition by its path). */
const FILTERS_DOC = 'A filter group {match: "all" | "any", conditions: [{field, op, value} | group]}, as the SegmentFilterGroup schema of responses.';

export const segmentCreateSchema = z
  .object({
    name: z.string().trim().min(1).max(200),
    contactBookId: z.string().min(1).max(100),
    filters: z.unknown().refine((v) => v !== undefined, 'required').meta({ description: FILTERS_DOC }),
  })
  .strict();
export const segmentPatchSchema = z
  .object({
    name: z.string().trim().min(1).max(200).optional(),
    filters: z.unknown().optional().meta({ description: FILTERS_DOC }),
  })
  .strict();

export interface SegmentView {
  id: string;
  name: string;
  teamId: number;
  contactBookId: string;
  filters: FilterGroup;
  createdAt: string;
  updatedAt: string;
}

function view(s: SegmentRow): SegmentView {
  return {
    id: s.id,
    name: s.name,
    teamId: s.team_id,
    contactBookId: s.contact_book_id,
    filters: JSON.parse(s.filters_json) as FilterGroup,
    createdAt: s.created_at,
    updatedAt: s.updated_at,
  };
}

export function createSegmentService(deps: { segments: SegmentsRepository; books: ContactBooksRepository; contacts: ContactsRepository; clock: Clock }) {
  const { segments, books, contacts, clock } = deps;

  async function load(teamId: number, id: string): Promise<SegmentRow> {
    const s = await segments.findById(teamId, id);
    if (!s) throw notFound(`segment ${id} not found`);
    return s;
  }

  return {
    async create(teamId: number, input: { name: string; contactBookId: string; filters: unknown }): Promise<SegmentView> {
      const filters = parseSegmentFilters(input.filters);
      if (!(await books.findById(teamId, input.contactBookId))) throw badRequest(`contactBookId: contact book ${input.contactBookId} not found`);
      const now = clock.now().toISOString();
      try {
        const row = await segments.insert({
          id: newId('sg'),
          team_id: teamId,
          contact_book_id: input.contactBookId,
          name: input.name,
          filters_json: JSON.stringify(filters),
          created_at: now,
          updated_at: now,
        });
        return view(row);
      } catch (err) {
        // The book was deleted after it was read: answered as a request after the deletion is.
        if (isForeignKeyViolation(err, 'segments')) throw badRequest(`contactBookId: contact book ${input.contactBookId} not found`);
        throw err;
      }
    },

    async list(teamId: number, q: { contactBookId?: string; offset: number; limit: number }): Promise<{ items: SegmentView[]; total: number }> {
      const { rows, total } = await orTooSlow(segments.list(teamId, q));
      return { items: rows.map(view), total };
    },

    async get(teamId: number, id: string): Promise<SegmentView> {
      return view(await load(teamId, id));
    },

    async update(teamId: number, id: string, patch: { name?: string; filters?: unknown }): Promise<SegmentView> {
      await load(teamId, id);
      const changes: Parameters<SegmentsRepository['update']>[2] = { updated_at: clock.now().toISOString() };
      if (patch.name !== undefined) changes.name = patch.name;
      if (patch.filters !== undefined) changes.filters_json = JSON.stringify(parseSegmentFilters(patch.filters));
      const updated = await segments.update(teamId, id, changes);
      if (!updated) throw notFound(`segment ${id} not found`);
      return view(updated);
    },

    /**
     * Removes the saved filter only; the contacts it matched stay as they are. Refused (409)
     * while a campaign that has not started uses it: it would send to nobody. A started one
     * keeps the filter it started with, and a draft is refused when it is scheduled.
     */
    async remove(teamId: number, id: string): Promise<{ id: string; success: boolean; message: string }> {
      const { deleted, blockedBy } = await segments.delete(teamId, id);
      if (blockedBy.length) {
        throw notUnique(`segment ${id} is used by ${describeCampaigns(blockedBy)}, not started yet: delete ${blockedBy.length === 1 ? 'that campaign' : 'those campaigns'} first, or delete the segment once ${blockedBy.length === 1 ? 'it has' : 'they have'} started (a started campaign keeps the segment's filter)`);
      }
      if (!deleted) throw notFound(`segment ${id} not found`);
      return { id, success: true, message: 'Segment deleted successfully' };
    },

    /**
     * An unsaved filter evaluated against a book (the console's filter builder shows the
     * live member count): validated exactly as create validates it, so what previews saves.
     */
    async preview(teamId: number, input: { contactBookId: string; filters: unknown }, page: { offset: number; limit: number }): Promise<{ items: ContactView[]; total: number }> {
      const filters = parseSegmentFilters(input.filters);
      if (!(await books.findById(teamId, input.contactBookId))) throw badRequest(`contactBookId: contact book ${input.contactBookId} not found`);
      const { rows, total } = await orTooSlow(contacts.listMatching({ teamId, bookId: input.contactBookId }, filters, page));
      return { items: rows.map(contactView), total };
    },

    /** Membership is evaluated now, in SQL, and never stored. */
    async contacts(teamId: number, id: string, page: { offset: number; limit: number }): Promise<{ items: ContactView[]; total: number }> {
      const s = await load(teamId, id);
      const filters = JSON.parse(s.filters_json) as FilterGroup;
      const { rows, total } = await orTooSlow(contacts.listMatching({ teamId: s.team_id, bookId: s.contact_book_id }, filters, page));
      return { items: rows.map(contactView), total };
    },
  };
}
export type SegmentService = ReturnType<typeof createSegmentService>;
