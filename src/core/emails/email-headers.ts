import { listVariables, substituteVariables } from '../../render/variables.js';
import { badRequest } from '../errors.js';
import { formatMailbox, type Mailbox } from './addresses.js';

/**
 * Header fields the message composer (smtp/outbound/mime-builder.ts) writes itself, from the
 * typed fields of an email or as part of the MIME structure, plus trace and authentication
 * fields that only relays and signers add. One of them among the custom headers would
 * duplicate or fight the composer's own, so the composer refuses it.
 */
export const COMPOSER_OWNED_HEADERS: ReadonlySet<string> = new Set([
  // originator, destination and identification fields (RFC 5322 3.6)
  'from',
  'sender',
  'reply-to',
  'to',
  'cc',
  'bcc',
  'subject',
  'date',
  'message-id',
  'in-reply-to',
  'references',
  // MIME structure (RFC 2045, RFC 2183, RFC 2392)
  'mime-version',
  'content-type',
  'content-transfer-encoding',
  'content-disposition',
  'content-id',
  // added in transit or by the signer (RFC 5321 4.4, RFC 6376)
  'return-path',
  'received',
  'dkim-signature',
]);

/**
 * Fields the engine itself puts among an email's custom headers, so the composer must take
 * them: List-Unsubscribe and List-Unsubscribe-Post (campaign one-click unsubscribe, RFC 8058;
 * both DKIM-signed, RFC 8058 4), and X-Posthorn-Email-ID, which ties bounces and reports back
 * to the email.
 */
const ENGINE_ADDED_HEADERS = ['list-unsubscribe', 'list-unsubscribe-post', 'x-posthorn-email-id'];

/**
 * Fields that only a receiving server or an intermediary writes, as Received is: results (RFC
 * 8601, RFC 8617, RFC 7208 9.1), set by a sender, would claim checks that never ran
 * ("dkim=pass") to any reader that does not strip them; Delivered-To (RFC 9228) and Postfix's
 * X-Original-To are written at final delivery, and a receiver that finds its own address there
 * already (Postfix) rejects the mail as a loop. Refused by the API only, not by the composer,
 * so mail accepted with one before still goes out.
 */
const RECEIVER_ADDED_HEADERS = ['authentication-results', 'arc-seal', 'arc-message-signature', 'arc-authentication-results', 'received-spf', 'delivered-to', 'x-original-to'];

// Headers the engine writes itself (or a receiver does); a caller setting them could break
// threading, DKIM or routing, so they are refused with 400 rather than silently dropped.
export const ENGINE_OWNED_HEADERS: ReadonlySet<string> = new Set([...COMPOSER_OWNED_HEADERS, ...ENGINE_ADDED_HEADERS, ...RECEIVER_ADDED_HEADERS]);

/**
 * A resent block (RFC 5322 3.6.6: Resent-From, -Sender, -To, -Cc, -Bcc, -Date, -Message-ID)
 * belongs to a message reintroduced by whoever resends it, never to a fresh one, and some clients
 * show Resent-From or Resent-Sender as the sender: a key bound to one domain could name another
 * domain's. Every resent-* name is refused, as the fields above are; by the API only, as
 * RECEIVER_ADDED_HEADERS are, so mail accepted with one before still goes out.
 */
const RESENT_PREFIX = 'resent-';

/** Whether a caller may not set header `name` (any casing): Posthorn, a receiver or a resender writes it. */
export function isEngineOwnedHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return ENGINE_OWNED_HEADERS.has(lower) || lower.startsWith(RESENT_PREFIX);
}

const HEADER_NAME = /^[!-9;-~]+$/; // RFC 5322 2.2: printable US-ASCII except colon
/**
 * RFC 5322 2.1.1 caps a line at 998 octets, and a header can only be folded at whitespace: an
 * unbroken run longer than this can never be written legally, so it is refused up front
 * (400) rather than failing later at delivery time.
 */
export const MAX_UNBROKEN_HEADER_RUN = 900;

/** Whether a header value can be folded into legal lines: no unbroken run over MAX_UNBROKEN_HEADER_RUN. */
export function isFoldable(value: string): boolean {
  let run = 0;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    run = c === 32 || c === 9 ? 0 : run + (c > 0x7f ? 3 : 1); // non-ASCII grows when encoded
    if (run > MAX_UNBROKEN_HEADER_RUN) return false;
  }
  return true;
}

export function assertFoldable(value: string, field: string): void {
  if (!isFoldable(value)) throw badRequest(`${field}: contains a word longer than ${MAX_UNBROKEN_HEADER_RUN} characters, which cannot be written in a mail header`);
}
/**
 * 400 naming `field` when a mailbox's display name, as the header writes it, holds an unbroken
 * run too long to fold. An ASCII name that needs quotes is written as a quoted-string with each
 * `"` and `\` escaped (formatMailbox), up to twice its length: 600 backslashes in a field of
 * 1000 characters are a 1202-octet word. A name with other characters is written as encoded
 * words, which the composer splits into short ones.
 */
export function assertNameFoldable(m: Mailbox, field: string): void {
  if (m.name && /^[\x00-\x7f]*$/.test(m.name)) assertFoldable(formatMailbox({ name: m.name, address: '' }), field);
}
/**
 * 400 naming `field` when a subject template (a template's, a campaign's, a confirmation's) can
 * never be written, whatever its placeholders become: each is taken as a space, the most a value
 * can do to part the words around it. Refused when stored, not at every send.
 */
export function assertSubjectTemplateFoldable(subject: string, field: string): void {
  const spaces = Object.fromEntries(listVariables(subject).map((name) => [name, ' ']));
  assertFoldable(substituteVariables(subject, spaces, { escapeHtml: false }), field);
}
export const MAX_CUSTOM_HEADERS = 50;
/** The send schema's bounds on a custom header's name and value (core/emails/send-schema.ts). */
export const MAX_CUSTOM_HEADER_NAME = 200;
export const MAX_CUSTOM_HEADER_VALUE = 4000;

/** Validates custom headers (no CR/LF anywhere: no header injection) and returns them; errors name `field` (`[2].headers` in a batch). */
export function validateCustomHeaders(headers: Record<string, string> | undefined, field = 'headers'): Record<string, string> {
  if (!headers) return {};
  const entries = Object.entries(headers);
  if (entries.length > MAX_CUSTOM_HEADERS) throw badRequest(`${field}: at most ${MAX_CUSTOM_HEADERS} custom headers`);
  const seen = new Map<string, string>();
  for (const [name, value] of entries) {
    if (!HEADER_NAME.test(name)) throw badRequest(`${field}: "${name.replace(/[\r\n]/g, '\\n')}" is not a valid header name`);
    if (/[\r\n\0]/.test(value)) throw badRequest(`${field}.${name}: must not contain CR, LF or NUL`);
    // The composer writes no field for white space alone: it would vanish without a word.
    if (value.trim() === '') throw badRequest(`${field}.${name}: must not be blank`);
    const lower = name.toLowerCase();
    if (isEngineOwnedHeader(lower)) throw badRequest(`${field}.${name}: this header is set by Posthorn and cannot be overridden`);
    // Header names ignore case: two casings are one header, which the composer wrote twice under
    // one of the two spellings.
    const first = seen.get(lower);
    if (first !== undefined) throw badRequest(`${field}.${name}: the same header as ${first} (header names ignore case); give it once`);
    seen.set(lower, name);
    assertFoldable(value, `${field}.${name}`);
  }
  return Object.fromEntries(entries);
}
