import type { AddressObject, EmailAddress, HeaderLines, ParsedMail } from 'mailparser';
import { formatMailbox } from '../core/emails/addresses.js';
import { HTML_TO_TEXT_MAX_CHARS } from '../render/html-to-plain-text.js';

// Small helpers over mailparser's result, shared by the inbound and submission listeners.

/** Longest time we let mailparser work on one message before treating it as unparseable. */
const PARSE_TIMEOUT_MS = 30_000;

/**
 * The text of an HTML-only message as mailparser would make it, or undefined when too large or
 * unreadable to convert: on port 25 any server could otherwise hold up the process for minutes.
 */
async function textOfHtml(html: string): Promise<string | undefined> {
  if (html.length > HTML_TO_TEXT_MAX_CHARS) return undefined;
  try {
    const { htmlToText } = await import('html-to-text');
    return htmlToText(html);
  } catch {
    // Nesting too deep for the converter: the rest of the message is still read.
    return undefined;
  }
}

/** mailparser took longer than its time: the message may be fine and the process busy. */
export class ParseTimeoutError extends Error {
  constructor(ms: number) {
    super(`parsing the message took longer than ${ms} ms`);
  }
}

export interface ParseOptions {
  skipHtmlToText?: boolean;
  /** PARSE_TIMEOUT_MS unless set (tests). */
  timeoutMs?: number;
  /** Reject with ParseTimeoutError when parsing takes too long, instead of resolving null as for unparseable MIME. */
  throwOnTimeout?: boolean;
}

/**
 * Parses a message; null when mailparser gives up or (unless throwOnTimeout) takes too long.
 * Malformed MIME is ordinary on a public port and must never take the listener down.
 */
export async function parseMessage(raw: Buffer, opts: ParseOptions = {}): Promise<ParsedMail | null> {
  const timeoutMs = opts.timeoutMs ?? PARSE_TIMEOUT_MS;
  let timer: NodeJS.Timeout | undefined;
  let timedOut = false;
  const timeout = new Promise<null>((resolve) => {
    timer = setTimeout(() => {
      timedOut = true;
      resolve(null);
    }, timeoutMs);
    timer.unref();
  });
  try {
    // keepDeliveryStatus: RFC 3464 message/delivery-status stays a part of its own instead of
    // being merged into the text body, so bounces can be read field by field.
    // Loaded with the first message parsed (inbound, submission, the sandbox): ~24 MB a sender-only server never needs.
    const { simpleParser } = await import('mailparser');
    // mailparser's own HTML-to-text has no bound, and HTML it cannot convert fails the whole
    // message (subject, addresses, attachments): the text of an HTML-only message is made here.
    const parsed = await Promise.race([simpleParser(raw, { keepDeliveryStatus: true, skipHtmlToText: true }), timeout]);
    if (timedOut && opts.throwOnTimeout) throw new ParseTimeoutError(timeoutMs);
    if (parsed && !opts.skipHtmlToText && !parsed.text && typeof parsed.html === 'string') {
      // mailparser leaves '' there: none when it cannot be made.
      parsed.text = await textOfHtml(parsed.html);
    }
    return parsed;
  } catch (err) {
    if (err instanceof ParseTimeoutError) throw err;
    return null;
  } finally {
    clearTimeout(timer);
  }
}

/** Every mailbox of an address header, group members included, as {name, address}. */
export function mailboxes(field: AddressObject | AddressObject[] | undefined): { name: string; address: string }[] {
  const out: { name: string; address: string }[] = [];
  const visit = (list: EmailAddress[]) => {
    for (const a of list) {
      if (a.group) visit(a.group);
      else if (a.address) out.push({ name: a.name ?? '', address: a.address });
    }
  };
  for (const obj of field === undefined ? [] : Array.isArray(field) ? field : [field]) visit(obj.value ?? []);
  return out;
}

/** `Name <addr>` strings for display and storage. */
export function formatMailboxes(field: AddressObject | AddressObject[] | undefined): string[] {
  return mailboxes(field).map((m) => formatMailbox({ name: m.name.replace(/[\r\n]+/g, ' '), address: m.address }));
}

/**
 * Header fields in message order with their original names; values unfolded (RFC 5322 2.2.3),
 * encoded words not decoded. mailparser keeps each line as a binary string, one character per
 * byte: 8-bit text (UTF-8 headers, RFC 6532) is read as UTF-8 where it is valid UTF-8, as
 * mailparser reads the fields it decodes, else left as bytes. Read as bytes, a submitted
 * "X-Note: café" was passed on as "cafÃ©".
 */
export function headerFields(lines: HeaderLines | undefined): { name: string; value: string }[] {
  const out: { name: string; value: string }[] = [];
  for (const { line: binary } of lines ?? []) {
    const line = utf8OrBytes(binary);
    const colon = line.indexOf(':');
    if (colon < 1) continue;
    out.push({ name: line.slice(0, colon).trim(), value: line.slice(colon + 1).replace(/\r?\n(?=[ \t])/g, '').trim() });
  }
  return out;
}

function utf8OrBytes(binary: string): string {
  if (/^[\x00-\x7f]*$/.test(binary)) return binary;
  const utf8 = Buffer.from(binary, 'latin1').toString('utf8');
  return utf8.includes('\uFFFD') ? binary : utf8;
}

/**
 * Parses a bare header block (RFC 5322 2.2) such as the fields of a delivery-status or
 * feedback-report part, or text/rfc822-headers: groups separated by blank lines, each a list
 * of [lowercased name, unfolded value] in order.
 */
export function parseFieldGroups(text: string): [string, string][][] {
  const groups: [string, string][][] = [];
  let current: [string, string][] = [];
  let last: [string, string] | undefined;
  for (const line of text.split(/\r?\n/)) {
    if (line.trim() === '') {
      if (current.length) groups.push(current);
      current = [];
      last = undefined;
      continue;
    }
    if (/^[ \t]/.test(line) && last) {
      last[1] = `${last[1]} ${line.trim()}`;
      continue;
    }
    const colon = line.indexOf(':');
    if (colon < 1) continue;
    last = [line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()];
    current.push(last);
  }
  if (current.length) groups.push(current);
  return groups;
}

/** Header block of a message: everything before the first empty line. */
export function headerBlock(message: string): string {
  const m = /\r?\n\r?\n/.exec(message);
  return m ? message.slice(0, m.index) : message;
}
