import type { ParsedMail } from 'mailparser';
import { detectExtension } from 'nodemailer/lib/mime-funcs';
import { addressKey, formatMailbox } from '../../core/emails/addresses.js';
import { isEngineOwnedHeader, isFoldable, MAX_CUSTOM_HEADER_NAME, MAX_CUSTOM_HEADER_VALUE, MAX_CUSTOM_HEADERS } from '../../core/emails/email-headers.js';
import { sendBodySchema, type SendInput } from '../../core/emails/send-schema.js';
import { submittedThreading, type Threading } from '../../core/emails/threading.js';
import { badRequest } from '../../core/errors.js';
import { issuePath, plainIssues } from '../../core/plain-issues.js';
import { nulMessage, nulPath, unpairedSurrogateMessage, unpairedSurrogatePath } from '../../lib/nul-text.js';
import { formatMailboxes, headerFields, mailboxes } from '../parsed-mail.js';

// A submitted message (RFC 6409) becomes the same send body the API takes, so it goes through
// submitEmail like any other send (architecture.md, House rules 1) and is recomposed, DKIM-signed and delivered
// by the engine. The envelope decides who receives it (RFC 5321 3.3: RCPT is the delivery
// list; headers are display): To and Cc keep the header recipients the envelope also has,
// and envelope recipients in neither become Bcc, which never appears in a header.
// In-Reply-To and References go to the composer beside the send body (messageThreading).

export interface SubmissionEnvelope {
  mailFrom: string;
  rcptTo: string[];
}

/** Custom headers that pass through: the X- family (RFC 6648 no longer reserves it, but it is where custom headers live). */
const CUSTOM_HEADER = /^x-/i;

/**
 * X-Posthorn-Tracking: the API's openTracking / clickTracking for a submitted message. It is an
 * instruction to Posthorn, so it is taken out of the message, never sent on.
 */
const TRACKING_HEADER = 'x-posthorn-tracking';
const TRACKING_VALUES: Record<string, { openTracking: boolean; clickTracking: boolean }> = {
  on: { openTracking: true, clickTracking: true },
  off: { openTracking: false, clickTracking: false },
  none: { openTracking: false, clickTracking: false },
  opens: { openTracking: true, clickTracking: false },
  clicks: { openTracking: false, clickTracking: true },
};

/**
 * Whether a custom header of a submitted message fits the API's rules for custom headers. A mail
 * client's user did not write them one by one, as an API caller does, and cannot fix them: one
 * that does not fit (an unbroken run too long to fold, a name or value over the API's bounds) is
 * left out, and so are those after the first MAX_CUSTOM_HEADERS, rather than the whole message
 * refused (docs/inbound.md).
 */
function passesOn(name: string, value: string): boolean {
  return name.length <= MAX_CUSTOM_HEADER_NAME && value.length <= MAX_CUSTOM_HEADER_VALUE && isFoldable(value);
}

/**
 * The message's own In-Reply-To and References (the first of each), which the API's custom
 * headers may not carry: the composer writes them (SubmitOptions.threading), so a reply sent
 * from a mail client stays in its thread. Ids that are not valid msg-ids are left out rather
 * than the message refused.
 */
export function messageThreading(parsed: ParsedMail): Threading {
  let inReplyTo: string | undefined;
  let references: string | undefined;
  for (const { name, value } of headerFields(parsed.headerLines)) {
    const lower = name.toLowerCase();
    if (lower === 'in-reply-to') inReplyTo ??= value;
    else if (lower === 'references') references ??= value;
  }
  return submittedThreading(inReplyTo, references);
}

function attachmentName(filename: string | undefined, contentType: string, index: number): string {
  const clean = (filename ?? '').replace(/[\r\n\0/\\]+/g, '_').trim();
  if (clean) return clean;
  const ext = contentType === 'message/rfc822' ? 'eml' : detectExtension(contentType) || 'bin';
  return `attachment-${index + 1}.${ext}`;
}

export function messageToSendInput(parsed: ParsedMail, envelope: SubmissionEnvelope): SendInput {
  const envelopeKeys = new Map(envelope.rcptTo.map((a) => [addressKey(a), a]));
  const inEnvelope = (m: { address: string }) => envelopeKeys.has(addressKey(m.address));

  const from = mailboxes(parsed.from)[0];
  const fromText = from ? formatMailbox({ name: from.name.replace(/[\r\n]+/g, ' '), address: from.address }) : envelope.mailFrom;
  if (!fromText) throw badRequest('From: the message has no From header and the envelope sender is empty');

  const seen = new Set<string>();
  const pick = (list: { name: string; address: string }[]) =>
    list.filter(inEnvelope).filter((m) => {
      const k = addressKey(m.address);
      if (seen.has(k)) return false;
      seen.add(k);
      return true;
    });
  const to = pick(mailboxes(parsed.to));
  const cc = pick(mailboxes(parsed.cc));
  const bcc = [...envelopeKeys.entries()].filter(([k]) => !seen.has(k)).map(([, address]) => address);
  if (!to.length) {
    // The composed message's To comes from here; a Bcc-only send would have to expose the
    // blind recipients in To, so it is refused rather than silently leaked.
    throw badRequest('To: at least one envelope recipient must appear in the To header (a message with only blind recipients cannot be sent)');
  }

  const headers: Record<string, string> = {};
  let tracking: { openTracking: boolean; clickTracking: boolean } | undefined;
  for (const { name, value } of headerFields(parsed.headerLines)) {
    const lower = name.toLowerCase();
    if (lower === TRACKING_HEADER) {
      const choice = Object.hasOwn(TRACKING_VALUES, value.toLowerCase()) ? TRACKING_VALUES[value.toLowerCase()] : undefined;
      if (!choice) throw badRequest(`${name}: must be one of ${Object.keys(TRACKING_VALUES).join(', ')}`);
      tracking ??= choice; // first occurrence wins, as for other headers
      continue;
    }
    if (!CUSTOM_HEADER.test(name) || isEngineOwnedHeader(lower) || !value) continue;
    if (Object.keys(headers).some((k) => k.toLowerCase() === lower)) continue; // first occurrence wins
    if (!passesOn(name, value) || Object.keys(headers).length >= MAX_CUSTOM_HEADERS) continue;
    headers[name] = value;
  }

  const replyTo = formatMailboxes(parsed.replyTo);
  const attachments = (parsed.attachments ?? [])
    .filter((a) => a.content.length > 0)
    .map((a, i) => ({ filename: attachmentName(a.filename, a.contentType, i), content: a.content.toString('base64') }));

  const body = {
    from: fromText,
    to: to.map((m) => formatMailbox({ name: m.name.replace(/[\r\n]+/g, ' '), address: m.address })),
    cc: cc.length ? cc.map((m) => formatMailbox({ name: m.name.replace(/[\r\n]+/g, ' '), address: m.address })) : undefined,
    bcc: bcc.length ? bcc : undefined,
    replyTo: replyTo.length ? replyTo : undefined,
    subject: parsed.subject?.replace(/\r?\n|\r/g, ' ').trim() || undefined,
    text: parsed.text ? parsed.text : undefined,
    html: typeof parsed.html === 'string' && parsed.html ? parsed.html : undefined,
    headers: Object.keys(headers).length ? headers : undefined,
    attachments: attachments.length ? attachments : undefined,
    ...tracking,
  };
  if (!body.subject) throw badRequest('Subject: the message needs a non-empty Subject header');
  // Refused as the API refuses them (lib/nul-text.ts): the sender's client is told which field.
  const nul = nulPath(body, '');
  if (nul !== undefined) throw badRequest(nulMessage(nul));
  // A UTF-16 encoded word can decode to half a character.
  const surrogate = unpairedSurrogatePath(body, '');
  if (surrogate !== undefined) throw badRequest(unpairedSurrogateMessage(surrogate));
  const checked = sendBodySchema.safeParse(body, plainIssues);
  if (!checked.success) {
    const issue = checked.error.issues[0]!;
    throw badRequest(`${issuePath(issue.path) || 'message'}: ${issue.message}`);
  }
  return checked.data;
}
