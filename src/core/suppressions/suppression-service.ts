import { z } from 'zod';
import type { Clock } from '../../lib/clock.js';
import type { SuppressionReason, SuppressionRow, SuppressionsRepository } from '../../store/repositories/suppressions-repository.js';
import { isValidAddress, lowerAddressTerm, mailboxKey } from '../emails/addresses.js';
import { badRequest, notFound } from '../errors.js';
import { orTooSlow } from '../query-too-slow.js';

/*
 * The team's suppression list (spec, Suppressions; architecture.md, Decisions: suppressions). Addresses are keyed trimmed and
 * lowercased, the same key the send path checks, so a listed address is never mailed whatever
 * its case; a quoted local part that needs no quotes is keyed without them, as the send path
 * writes the mailbox (`"ann"@x` is `ann@x`). HARD_BOUNCE and COMPLAINT are added by the delivery engine and inbound intake;
 * MANUAL by callers. An existing entry keeps its first reason and source: that records why the
 * address was first stopped.
 */

export const SUPPRESSION_REASONS = ['HARD_BOUNCE', 'COMPLAINT', 'MANUAL'] as const;
/** Per bulk request, the same bound as the contact bulk endpoints. */
export const MAX_BULK_SUPPRESSIONS = 1000;

const reason = z.enum(SUPPRESSION_REASONS);
const source = z.string().trim().max(200);
const emailList = z
  .array(z.string().min(1).max(320))
  .min(1, 'at least 1 address')
  .max(MAX_BULK_SUPPRESSIONS, `at most ${MAX_BULK_SUPPRESSIONS} addresses per request`);

export const suppressionAddSchema = z.object({ email: z.string().min(1).max(320), reason: reason.optional(), source: source.nullable().optional() }).strict();
export const suppressionBulkAddSchema = z.object({ emails: emailList, reason: reason.optional(), source: source.nullable().optional() }).strict();
export const suppressionBulkRemoveSchema = z.object({ emails: emailList }).strict();

export interface SuppressionView {
  email: string;
  reason: SuppressionReason;
  source: string | null;
  createdAt: string;
}

const view = (r: SuppressionRow): SuppressionView => ({ email: r.email, reason: r.reason, source: r.source, createdAt: r.created_at });

/** The list key of an address; 400 naming the field when it is not one. */
export function suppressionKey(raw: string, field = 'email'): string {
  const email = mailboxKey(raw);
  if (!isValidAddress(email)) throw badRequest(`${field}: "${raw}" is not a valid email address`);
  return email;
}

export function createSuppressionService(deps: { suppressions: SuppressionsRepository; clock: Clock }) {
  const { suppressions, clock } = deps;

  return {
    async list(teamId: number, q: { search?: string; reason?: SuppressionReason; offset: number; limit: number }): Promise<{ items: SuppressionView[]; total: number }> {
      const search = lowerAddressTerm(q.search?.trim() ?? '') || undefined;
      const { rows, total } = await orTooSlow(suppressions.list(teamId, { ...q, search }));
      return { items: rows.map(view), total };
    },

    /** Adds an address (MANUAL unless told); adding one already listed keeps and returns the entry. */
    async add(teamId: number, input: { email: string; reason?: SuppressionReason; source?: string | null }): Promise<SuppressionView> {
      const email = suppressionKey(input.email);
      await suppressions.add(teamId, email, input.reason ?? 'MANUAL', input.source || null, clock.now().toISOString());
      const row = await suppressions.get(teamId, email);
      if (!row) throw notFound(`${email} is not on the suppression list`); // removed concurrently
      return view(row);
    },

    async get(teamId: number, rawEmail: string): Promise<SuppressionView> {
      const email = suppressionKey(rawEmail);
      const row = await suppressions.get(teamId, email);
      if (!row) throw notFound(`${email} is not on the suppression list`);
      return view(row);
    },

    /** Removing a hard bounce lets the address be attempted again: the send path reads this list live. */
    async remove(teamId: number, rawEmail: string): Promise<{ email: string; success: boolean }> {
      const email = suppressionKey(rawEmail);
      if ((await suppressions.remove(teamId, [email])) === 0) throw notFound(`${email} is not on the suppression list`);
      return { email, success: true };
    },

    /** Duplicates and already listed addresses are accepted; any malformed address refuses the request. */
    async bulkAdd(teamId: number, input: { emails: string[]; reason?: SuppressionReason; source?: string | null }): Promise<{ success: boolean; count: number; alreadySuppressed: number }> {
      const emails = [...new Set(input.emails.map((e, i) => suppressionKey(e, `emails[${i}]`)))];
      const added = await suppressions.addMany(teamId, emails, input.reason ?? 'MANUAL', input.source || null, clock.now().toISOString());
      return { success: true, count: added, alreadySuppressed: emails.length - added };
    },

    async bulkRemove(teamId: number, input: { emails: string[] }): Promise<{ success: boolean; count: number }> {
      const emails = input.emails.map((e, i) => suppressionKey(e, `emails[${i}]`));
      return { success: true, count: await suppressions.remove(teamId, emails) };
    },
  };
}
export type SuppressionService = ReturnType<typeof createSuppressionService>;
