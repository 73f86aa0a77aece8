import { badRequest } from './errors.js';

/*
 * Cursors of lists that page by row id, newest first (webhook attempts, the operator's audit
 * log and queue listings): opaque base64url of a letter naming the list and the id, so a
 * cursor of one list is refused by another, and clients treat them as tokens, not numbers.
 */

export function encodeIdCursor(kind: string, id: number): string {
  return Buffer.from(`${kind}${id}`).toString('base64url');
}

/** The id in a cursor of this kind of list, or a 400 naming the parameter. */
export function decodeIdCursor(kind: string, cursor: string, param = 'cursor'): number {
  const text = /^[A-Za-z0-9_-]{1,40}$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString('utf8') : '';
  const m = text.startsWith(kind) ? /^(\d{1,15})$/.exec(text.slice(kind.length)) : null;
  if (!m) throw badRequest(`${param}: not a cursor returned by this endpoint (pass nextCursor as is)`);
  return Number(m[1]);
}
