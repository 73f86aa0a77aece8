import { badRequest } from '../errors.js';
import { assertValidALabels, parseMailbox, parseMailboxList, type Mailbox } from './addresses.js';
import { assertFoldable, assertNameFoldable, validateCustomHeaders } from './email-headers.js';
import { parseScheduledAt } from './scheduled-at.js';
import type { SendInput } from './send-schema.js';

export const MAX_RECIPIENTS = 100;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

export interface SendFields {
  subject: string;
  /** Why a personalised subject cannot be written as a message (stored as RENDERING_FAILURE). */
  renderingFailure?: string;
  html: string | null;
  text: string | null;
  from: Mailbox;
  to: Mailbox[];
  cc: Mailbox[];
  bcc: Mailbox[];
  replyTo: Mailbox[];
  headers: Record<string, string>;
  attachments: { filename: string; content: string }[];
  tags: string[];
  scheduledAt: Date | null;
}

/**
 * The fields of a send body checked and parsed, once any template is rendered (`content`):
 * everything that needs no store, so the CLI can refuse a bad body before it opens one.
 * Throws a 400 naming the field (prefixed with `field` in a batch).
 */
export function sendFields(
  input: SendInput,
  content: { subject: string | undefined; html: string | null; text: string | null },
  now: Date,
  opts: { field?: string; personalised?: boolean } = {},
): SendFields {
  const field = opts.field ?? '';
  const f = (name: string) => (field ? `${field}.${name}` : name);
  let subject = content.subject;
  const { html, text } = content;
  if (!subject) throw badRequest(`${f('subject')}: required unless templateId is given`);
  if (/[\r\n]/.test(subject)) subject = subject.replace(/\r?\n|\r/g, ' '); // folded subjects from forms; never a header break
  let renderingFailure: string | undefined;
  try {
    assertFoldable(subject, f('subject'));
  } catch (err) {
    if (!opts.personalised) throw err;
    renderingFailure = (err as Error).message;
  }
  if (!html && !text) throw badRequest(`${field || 'body'}: either text or html is required (or a templateId)`);

  const from = assertValidALabels(parseMailbox(input.from, f('from')), f('from'));
  assertFoldable(from.name, f('from'));
  assertNameFoldable(from, f('from'));
  const to = mailboxes(input.to, f('to'), true);
  const cc = mailboxes(input.cc, f('cc'), true);
  const bcc = mailboxes(input.bcc, f('bcc'));
  const replyTo = mailboxes(input.replyTo, f('replyTo'), true);
  if (to.length === 0) throw badRequest(`${f('to')}: at least one recipient is required`);
  if (to.length + cc.length + bcc.length > MAX_RECIPIENTS) throw badRequest(`${field || 'body'}: at most ${MAX_RECIPIENTS} recipients in to, cc and bcc together`);

  const headers = validateCustomHeaders(input.headers, f('headers'));
  const attachments = (input.attachments ?? []).map((a, i) => {
    const content = a.content.replace(/\s+/g, '');
    // White space only is no content, as "" is (refused by the schema in the same words).
    if (content === '') throw badRequest(`${f(`attachments[${i}].content`)}: must not be empty`);
    if (content.length % 4 !== 0 || !BASE64.test(content)) throw badRequest(`${f(`attachments[${i}].content`)}: must be base64`);
    if (/[\r\n\0/\\]/.test(a.filename)) throw badRequest(`${f(`attachments[${i}].filename`)}: must be a plain file name`);
    return { filename: a.filename, content };
  });
  const tags = [...new Set(input.tags ?? [])];

  const scheduledAt = input.scheduledAt ? parseScheduledAt(input.scheduledAt, now, f('scheduledAt')) : null;
  return { subject, ...(renderingFailure !== undefined ? { renderingFailure } : {}), html, text, from, to, cc, bcc, replyTo, headers, attachments, tags, scheduledAt };
}

/**
 * A send's address list, each place named as parseMailboxList names it (`to[1]`); an invalid
 * A-label is refused too, and in a header field (`inHeader`; Bcc is envelope only) a display
 * name that cannot be written in legal lines.
 */
function mailboxes(input: string | string[] | null | undefined, field: string, inHeader = false): Mailbox[] {
  return parseMailboxList(input, field).map((m, i) => {
    const place = Array.isArray(input) ? `${field}[${i}]` : field;
    if (inHeader) assertNameFoldable(m, place);
    return assertValidALabels(m, place);
  });
}
