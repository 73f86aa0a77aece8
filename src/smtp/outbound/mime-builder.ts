// Turns a stored email into RFC 5322 / MIME bytes, ready for DKIM signing and SMTP DATA.
// The MIME work (tree layout, RFC 2047 header encoding, RFC 2231 filenames, transfer
// encodings, folding) is nodemailer's MailComposer; this file decides what goes in and
// checks what comes out.
import MailComposer from 'nodemailer/lib/mail-composer';
import type { MailComposerAttachment } from 'nodemailer/lib/mail-composer';
import { detectMimeType } from 'nodemailer/lib/mime-funcs';
import { COMPOSER_OWNED_HEADERS } from '../../core/emails/email-headers.js';
import { plainTextAlternative } from '../../render/html-to-plain-text.js';
import { installHeaderKeyMemo } from './header-key-memo.js';
import { serializeMimeTree } from './mime-serializer.js';

installHeaderKeyMemo();

export interface ComposeInput {
  /** May be a display-name form: "Acme <hi@acme.com>". */
  from: string;
  to: string[];
  cc: string[];
  replyTo: string[];
  // Bcc is not an input: Bcc recipients exist only in the SMTP envelope, never in the headers.
  subject: string;
  text?: string | null;
  html?: string | null;
  /**
   * Without `text`: the HTML a plain-text alternative is made from, here and not by the caller
   * because composing runs in a signing worker, off the main thread. The HTML as given, before
   * tracking rewrote its links. Over HTML_TO_TEXT_MAX_CHARS, or unreadable to the converter, the
   * message goes HTML-only.
   */
  textFromHtml?: string | null;
  /** Custom headers, already validated upstream (no CR/LF). Engine-set ones (List-Unsubscribe...) come here too. */
  headers: Record<string, string>;
  attachments: { filename: string; content: string /* base64 */; contentType?: string }[];
  /** "<id@domain>" form. */
  messageId: string;
  date: Date;
  inReplyTo?: string | null;
  references?: string[];
}

/** RFC 5322 2.1.1: a line is at most 998 octets, CRLF excluded. */
const MAX_LINE_OCTETS = 998;
/** RFC 5322 2.2: field name is printable US-ASCII other than colon. */
const HEADER_NAME = /^[!-9;-~]+$/;
const DEFAULT_CONTENT_TYPE = 'application/octet-stream';

/** Content type by file extension (nodemailer's table), application/octet-stream when unknown. */
export function contentTypeForFilename(filename: string): string {
  const base = filename.split(/[/\\]/).pop() ?? '';
  const dot = base.lastIndexOf('.');
  // nodemailer would also read an extension-less name as an extension ("pdf" -> application/pdf)
  if (dot <= 0 || dot === base.length - 1) return DEFAULT_CONTENT_TYPE;
  const type = detectMimeType(base) || DEFAULT_CONTENT_TYPE;
  // The table names multipart/x-gzip first for ".gzip" (x-ustar, x-zip are there too): a part with
  // a multipart type is a container, which the composer refuses, so the email failed at sending.
  // Bytes of that kind are the application/ type of the same name (application/x-gzip).
  return type.replace(/^multipart\//i, 'application/');
}

/** Composes the message. Rejects input that would produce an invalid message; never writes a Bcc header. */
export async function composeMessage(input: ComposeInput): Promise<Buffer> {
  const headerCase = checkCustomHeaders(input.headers);
  const text = input.text ?? (input.textFromHtml ? plainTextAlternative(input.textFromHtml) : undefined);
  const composer = new MailComposer({
    from: input.from,
    to: nonEmpty(input.to),
    cc: nonEmpty(input.cc),
    replyTo: nonEmpty(input.replyTo),
    subject: input.subject,
    text: text ? crlf(text) : undefined,
    html: input.html ? crlf(input.html) : undefined,
    headers: input.headers,
    attachments: input.attachments.map(toAttachment),
    messageId: input.messageId,
    date: input.date,
    inReplyTo: input.inReplyTo || undefined,
    references: input.references?.length ? input.references : undefined,
    // No `newline: 'win'`: nodemailer's own output (headers, boundaries, base64 and QP) is
    // already CRLF and text/html were made CRLF above; its line-ending stream stage cost
    // ~15% of composing (profiled), so the rare bare CR/LF left (a raw message/* part) is
    // fixed on the finished buffer by crlfBuffer() instead.
    // nodemailer re-cases header names ("X-MyHeader" -> "X-Myheader"); names are case-
    // insensitive, but callers expect to see theirs as written
    normalizeHeaderKey: (key) => headerCase.get(key.toLowerCase()) ?? key,
    // content is always inline bytes; never let a value be read as a path or URL
    disableFileAccess: true,
    disableUrlAccess: true,
  });
  const tree = composer.compile();
  // nodemailer's bytes without its stream machinery (mime-serializer.ts); build() for anything else
  const message = crlfBuffer(serializeMimeTree(tree) ?? (await tree.build()));
  assertLineLengths(message);
  assertHeaderLines(message);
  return message;
}

/**
 * The top header block is fields and folds only (RFC 5322 2.2, 2.2.3): every line is `name:`
 * or begins with SP or HTAB. nodemailer folds before any JavaScript white space, so a U+2028
 * that reached a header raw (a UTF-8 local part) began a line of its own; input validation
 * keeps such characters out, and this makes a slip there fail the message instead of sending
 * a header block that readers can split into fields nobody asked for.
 */
function assertHeaderLines(message: Buffer): void {
  const headerEnd = message.indexOf('\r\n\r\n');
  const block = message.toString('latin1', 0, headerEnd === -1 ? message.length : headerEnd);
  for (const line of block.split('\r\n')) {
    if (!/^[ \t]/.test(line) && !/^[!-9;-~]+:/.test(line)) {
      throw new Error(`composeMessage: the header block would hold a line that is neither a field nor a fold: ${JSON.stringify(line.slice(0, 80))}`);
    }
  }
}

/** Validates custom headers and returns lowercase name -> the caller's casing. */
function checkCustomHeaders(headers: Record<string, string>): Map<string, string> {
  const casing = new Map<string, string>();
  for (const [name, value] of Object.entries(headers)) {
    if (!HEADER_NAME.test(name)) throw new Error(`composeMessage: invalid header name ${JSON.stringify(name)}`);
    if (COMPOSER_OWNED_HEADERS.has(name.toLowerCase())) throw new Error(`composeMessage: header "${name}" is written by the composer and can not be set`);
    if (typeof value !== 'string' || /[\r\n\0]/.test(value)) throw new Error(`composeMessage: header "${name}" must be a string without CR, LF or NUL`);
    casing.set(name.toLowerCase(), name);
  }
  return casing;
}

function nonEmpty(list: string[]): string[] | undefined {
  return list.length ? list : undefined;
}

/** Every line break, bare CR included (RFC 5322 2.3 allows neither bare CR nor bare LF), as CRLF. */
function crlf(text: string): string {
  return text.replace(/\r\n|\r|\n/g, '\r\n');
}

/** The message with every bare CR or LF made CRLF (RFC 5322 2.3); the same buffer when there is none. */
export function crlfBuffer(message: Buffer): Buffer {
  let bare = false;
  for (let i = message.indexOf(0x0a); i !== -1; i = message.indexOf(0x0a, i + 1)) {
    if (i === 0 || message[i - 1] !== 0x0d) {
      bare = true;
      break;
    }
  }
  if (!bare) {
    for (let i = message.indexOf(0x0d); i !== -1; i = message.indexOf(0x0d, i + 1)) {
      if (message[i + 1] !== 0x0a) {
        bare = true;
        break;
      }
    }
  }
  return bare ? Buffer.from(message.toString('latin1').replace(/\r\n|\r|\n/g, '\r\n'), 'latin1') : message;
}

function toAttachment(attachment: ComposeInput['attachments'][number]): MailComposerAttachment {
  // decoded here rather than with nodemailer's `encoding: 'base64'` (same decoder,
  // Buffer.from), so that message/* parts can be inspected below
  const content = Buffer.from(attachment.content, 'base64');
  let contentType = attachment.contentType || contentTypeForFilename(attachment.filename);
  if (/^multipart\//i.test(contentType)) {
    // nodemailer would make it a container node and drop the content
    throw new Error(`composeMessage: attachment "${attachment.filename}" can not have a multipart content type`);
  }
  if (/^message\//i.test(contentType) && !fitsSevenBit(content)) {
    // A message/* part can not be base64-encoded (RFC 2046 5.2.1), so nodemailer sends one
    // that is not 7bit-clean as 8bit: that needs 8BITMIME at every hop (RFC 6152) and breaks
    // on lines over 998 octets. As opaque bytes it travels base64 and still opens by name.
    contentType = DEFAULT_CONTENT_TYPE;
  }
  return { filename: attachment.filename, content, contentType };
}

/** ASCII without NUL, lines within the RFC 5322 limit. */
function fitsSevenBit(bytes: Buffer): boolean {
  let lineLength = 0;
  for (const c of bytes) {
    if (c === 0 || c > 0x7f) return false;
    if (c === 0x0a || c === 0x0d) lineLength = 0;
    else if (++lineLength > MAX_LINE_OCTETS) return false;
  }
  return true;
}

/**
 * RFC 5322 2.1.1. nodemailer folds at whitespace and encodes bodies, but it can not fold a
 * header with an unbroken run longer than a line (a 1000-character token in a custom
 * header, Subject or display name), and sends it as is. Rejecting beats a message that
 * relays truncate or bounce.
 */
function assertLineLengths(message: Buffer): void {
  const headerEnd = message.indexOf('\r\n\r\n');
  let field = '';
  let start = 0;
  while (start < message.length) {
    let end = message.indexOf(0x0a, start);
    if (end === -1) end = message.length;
    const lineEnd = end > start && message[end - 1] === 0x0d ? end - 1 : end;
    const inHeader = headerEnd === -1 || start <= headerEnd;
    if (inHeader && message[start] !== 0x20 && message[start] !== 0x09) {
      field = message.toString('latin1', start, Math.min(lineEnd, start + 80)).split(':')[0]!;
    }
    if (lineEnd - start > MAX_LINE_OCTETS) {
      const where = inHeader ? `header "${field}"` : 'body';
      throw new RangeError(
        `composeMessage: ${where} has a ${lineEnd - start}-octet line, over the ${MAX_LINE_OCTETS} of RFC 5322 2.1.1 (an unbroken run of characters can not be folded)`,
      );
    }
    start = end + 1;
  }
}
