import { canonicalJson } from '../../lib/canonical-json.js';
import { newId } from '../../lib/ids.js';
import type { ContactBook } from '../../store/repositories/contact-books-repository.js';
import type { ContactChanges, ContactRow } from '../../store/repositories/contacts-repository.js';
import type { ContactsTable } from '../../store/tables/database.js';

// How a write turns its input into a contact row: a new one, or the changes to an existing one
// (names, properties, and the subscription rules that keep an import from undoing an unsubscribe).

export const isPending = (r: Pick<ContactRow, 'subscribed' | 'unsubscribe_reason'>) => r.subscribed === 0 && r.unsubscribe_reason === null;

/** A blank name is no name. */
export function cleanName(v: string | null | undefined): string | null | undefined {
  if (v === undefined || v === null) return v;
  const s = v.trim();
  return s === '' ? null : s;
}

/**
 * How a write treats `subscribed` on an existing contact:
 * - explicit (PATCH): the caller is acting on this one contact, so true resubscribes and false unsubscribes;
 * - import (create of an existing email, PUT upsert, bulk): false unsubscribes, but true never
 *   resubscribes someone who unsubscribed and never skips a pending confirmation, so re-importing
 *   an old list cannot undo an unsubscribe (usesend-notes 3.10, upsert rules).
 */
export type SubscribeMode = 'explicit' | 'import';

export interface Fields {
  firstName?: string | null;
  lastName?: string | null;
  properties?: Record<string, string>;
  subscribed?: boolean;
}

export function merge(existing: ContactRow, input: Fields, mode: SubscribeMode, book: ContactBook, nowIso: string): ContactRow | undefined {
  const after: ContactRow = { ...existing };
  const firstName = cleanName(input.firstName);
  const lastName = cleanName(input.lastName);
  if (firstName !== undefined) after.first_name = firstName;
  if (lastName !== undefined) after.last_name = lastName;
  if (input.properties !== undefined) after.properties_json = canonicalJson(input.properties);
  if (input.subscribed === false) {
    after.subscribed = 0;
    after.unsubscribe_reason = existing.unsubscribe_reason ?? 'UNSUBSCRIBED';
  } else if (input.subscribed === true) {
    if (mode === 'explicit') {
      after.subscribed = 1;
      after.unsubscribe_reason = null;
    } else if (isPending(existing) && book.double_opt_in_enabled !== 1) {
      // Pending from a time the book required confirmation; it no longer does.
      after.subscribed = 1;
    }
  }
  const changed =
    after.first_name !== existing.first_name ||
    after.last_name !== existing.last_name ||
    after.properties_json !== existing.properties_json ||
    after.subscribed !== existing.subscribed ||
    after.unsubscribe_reason !== existing.unsubscribe_reason;
  if (!changed) return undefined;
  after.updated_at = nowIso;
  return after;
}

export function newContact(teamId: number, book: ContactBook, email: string, input: Fields, nowIso: string): { row: ContactsTable; confirm: boolean } {
  // Double opt-in: a new contact waits, unsubscribed, until it confirms. An explicit
  // subscribed:false means "not subscribed", so no confirmation is sent to it.
  const optOut = input.subscribed === false;
  const pending = !optOut && book.double_opt_in_enabled === 1;
  return {
    row: {
      id: newId('ct'),
      team_id: teamId,
      contact_book_id: book.id,
      email,
      first_name: cleanName(input.firstName) ?? null,
      last_name: cleanName(input.lastName) ?? null,
      subscribed: optOut || pending ? 0 : 1,
      unsubscribe_reason: optOut ? 'UNSUBSCRIBED' : null,
      properties_json: canonicalJson(input.properties ?? {}),
      created_at: nowIso,
      updated_at: nowIso,
    },
    confirm: pending,
  };
}

export function changesOf(after: ContactRow): ContactChanges {
  return {
    email: after.email,
    first_name: after.first_name,
    last_name: after.last_name,
    subscribed: after.subscribed,
    unsubscribe_reason: after.unsubscribe_reason,
    properties_json: after.properties_json,
    updated_at: after.updated_at,
  };
}
