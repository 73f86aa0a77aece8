import { badRequest } from '../errors.js';

// Headers the engine writes itself; a caller setting them could break threading, DKIM or
// routing, so they are refused with 400 rather than silently dropped.
export const ENGINE_OWNED_HEADERS: ReadonlySet<string> = new Set([
  'from',
  'to',
  'cc',
  'bcc',
  'subject',
  'date',
  'message-id',
  'mime-version',
  'content-type',
  'content-transfer-encoding',
  'dkim-signature',
  'return-path',
  'received',
  'in-reply-to',
  'references',
  'content-disposition',
  'content-id',
  'sender',
  'reply-to',
  'list-unsubscribe',
  'list-unsubscribe-post',
  'x-posthorn-email-id',
]);

const HEADER_NAME = /^[!-9;-~]+$/; // RFC 5322 2.2: printable US-ASCII except colon
/**
 * RFC 5322 2.1.1 caps a line at 998 octets, and a header can only be folded at whitespace: an
 * unbroken run longer than this can never be written legally, so it is refused up front
 * (400) rather than failing later at delivery time.
 */
export const MAX_UNBROKEN_HEADER_RUN = 900;

export function assertFoldable(value: string, field: string): void {
  let run = 0;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    run = c === 32 || c === 9 ? 0 : run + (c > 0x7f ? 3 : 1); // non-ASCII grows when encoded
    if (run > MAX_UNBROKEN_HEADER_RUN) throw badRequest(`${field}: contains a word longer than ${MAX_UNBROKEN_HEADER_RUN} characters, which cannot be written in a mail header`);
  }
}
export const MAX_CUSTOM_HEADERS = 50;

/** Validates custom headers (no CR/LF anywhere: no header injection) and returns them. */
export function validateCustomHeaders(headers: Record<string, string> | undefined): Record<string, string> {
  if (!headers) return {};
  const entries = Object.entries(headers);
  if (entries.length > MAX_CUSTOM_HEADERS) throw badRequest(`headers: at most ${MAX_CUSTOM_HEADERS} custom headers`);
  for (const [name, value] of entries) {
    if (!HEADER_NAME.test(name)) throw badRequest(`headers: "${name.replace(/[\r\n]/g, '\\n')}" is not a valid header name`);
    if (/[\r\n\0]/.test(value)) throw badRequest(`headers.${name}: must not contain CR, LF or NUL`);
    if (ENGINE_OWNED_HEADERS.has(name.toLowerCase())) throw badRequest(`headers.${name}: this header is set by Posthorn and cannot be overridden`);
    assertFoldable(value, `headers.${name}`);
  }
  return Object.fromEntries(entries);
}
