import type { ParsedMail } from 'mailparser';
import type { DsnRecipient, FeedbackReport, OriginalMessageRef, ParsedReport } from '../../core/received/inbound-types.js';
import { classifyReply, parseEnhancedCode } from '../outbound/classify-reply.js';
import { replaceUnstorable } from '../../lib/nul-text.js';
import { headerBlock, parseFieldGroups } from '../parsed-mail.js';
import { readTextBounce } from './text-bounce.js';

// Reads the machine-readable parts of a report:
// - RFC 3464 DSN: multipart/report; report-type=delivery-status with a message/delivery-status
//   part (message/global-delivery-status per RFC 6533): per-message fields, then one block per
//   recipient with Final-Recipient, Action, Status, Diagnostic-Code...
// - RFC 5965 ARF: multipart/report; report-type=feedback-report with message/feedback-report.
// - The returned original (message/rfc822, message/global, text/rfc822-headers) for linking.
// - A plain-text bounce (Exim's X-Failed-Recipients, qmail's, other MTAs' prose from the null
//   reverse-path): type 'text', its recipients read into DSN blocks (text-bounce.ts).
// Anything else is type 'other'. Never throws: garbage in, 'other' out.

const DSN_TYPES = new Set(['message/delivery-status', 'message/global-delivery-status']);
const ORIGINAL_TYPES = new Set(['message/rfc822', 'message/global', 'text/rfc822-headers', 'message/global-headers', 'message/rfc822-headers']);
const ARF_TYPE = 'message/feedback-report';

/**
 * "rfc822; user@host" (RFC 3464 2.3.2) or "<user@host>" to the bare address. A "utf-8" address
 * (RFC 6533 3) may write a character as \x{HEX}, its code point: it is that character, so that
 * `b\x{FC}cher.example` names the same mailbox as `bücher.example` and `xn--bcher-kva.example`.
 */
function addressField(value: string | undefined): string | null {
  if (!value) return null;
  const semi = value.indexOf(';');
  let address = (semi >= 0 ? value.slice(semi + 1) : value).trim().replace(/^<|>$/g, '').trim();
  if (semi >= 0 && value.slice(0, semi).trim().toLowerCase() === 'utf-8') address = address.replace(EMBEDDED_UNICODE_CHAR, unicodeChar);
  return address.includes('@') ? address : null;
}

/** RFC 6533 3 EmbeddedUnicodeChar: "\x{" HEXPOINT "}". */
const EMBEDDED_UNICODE_CHAR = /\\x\{([0-9A-Fa-f]{1,6})\}/g;

/** The character of a code point, or the escape as written when it names none (a surrogate, past U+10FFFF). */
function unicodeChar(escape: string, hex: string): string {
  const cp = parseInt(hex, 16);
  return cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) ? escape : String.fromCodePoint(cp);
}

/** "dns; mx.example.net" to "mx.example.net". */
function mtaField(value: string | undefined): string | null {
  if (!value) return null;
  const semi = value.indexOf(';');
  return (semi >= 0 ? value.slice(semi + 1) : value).trim() || null;
}

function field(group: [string, string][], name: string): string | undefined {
  return group.find(([k]) => k === name)?.[1];
}

/** Reads one recipient block and classifies its reply with the outbound classifier's table. */
function dsnRecipient(group: [string, string][]): DsnRecipient | null {
  const action = (field(group, 'action') ?? '').toLowerCase().split(/[\s(]/)[0] ?? '';
  const finalRecipient = addressField(field(group, 'final-recipient'));
  const originalRecipient = addressField(field(group, 'original-recipient'));
  if (!action && !finalRecipient) return null;
  const statusRaw = field(group, 'status');
  const status = statusRaw ? (parseEnhancedCode(statusRaw) ?? null) : null;
  // Diagnostic-Code: diagnostic-type ";" *text (RFC 3464 2.3.6); "smtp" carries a reply.
  const diagnosticRaw = field(group, 'diagnostic-code');
  let diagnosticCode: string | null = null;
  let smtpCode: number | null = null;
  if (diagnosticRaw) {
    const semi = diagnosticRaw.indexOf(';');
    const type = semi >= 0 ? diagnosticRaw.slice(0, semi).trim().toLowerCase() : '';
    diagnosticCode = (semi >= 0 ? diagnosticRaw.slice(semi + 1) : diagnosticRaw).trim() || null;
    const code = diagnosticCode ? /^([245]\d\d)(?:[\s-]|$)/.exec(diagnosticCode) : null;
    if (code && (type === 'smtp' || type === '' || type.startsWith('x-'))) smtpCode = Number(code[1]);
  }
  // Without an SMTP reply the status class stands in for one (RFC 3463 class 4 / 5).
  const statusClass = status?.[0];
  const effectiveCode = smtpCode ?? (statusClass === '5' ? 550 : statusClass === '4' ? 450 : action === 'failed' ? 550 : 450);
  // The classifier reads the enhanced code first; a diagnostic without one gets the Status.
  let text = diagnosticCode ?? '';
  if (status && !parseEnhancedCode(text)) text = `${status} ${text}`.trim();
  const verdict = classifyReply(effectiveCode, text);
  return {
    finalRecipient,
    originalRecipient,
    action,
    status,
    diagnosticCode,
    smtpCode,
    remoteMta: mtaField(field(group, 'remote-mta')),
    willRetryUntil: field(group, 'will-retry-until') ?? null,
    // Only a permanent failure can mean the mailbox is gone; a delay never suppresses.
    hardBounce: action === 'failed' && verdict.hardBounce,
    category: verdict.category ?? 'other',
    source: 'dsn',
  };
}

function feedbackReport(text: string): { report: FeedbackReport; reportingMta: string | null } {
  const fields = parseFieldGroups(text).flat();
  const all = (name: string) => fields.filter(([k]) => k === name).map(([, v]) => v);
  const one = (name: string) => all(name)[0] ?? null;
  return {
    report: {
      feedbackType: (one('feedback-type') ?? '').toLowerCase().trim(),
      userAgent: one('user-agent'),
      originalMailFrom: addressField(one('original-mail-from') ?? undefined) ?? one('original-mail-from'),
      originalRcptTo: all('original-rcpt-to').map((v) => addressField(v)).filter((a): a is string => !!a),
      arrivalDate: one('arrival-date') ?? one('received-date'),
      sourceIp: one('source-ip'),
      reportedDomain: one('reported-domain'),
    },
    reportingMta: mtaField(one('reporting-mta') ?? undefined),
  };
}

/** Message-ID, X-Posthorn-Email-ID, Return-Path and To of the returned original. */
function originalRef(text: string): OriginalMessageRef {
  const fields = parseFieldGroups(headerBlock(text))[0] ?? [];
  const get = (name: string) => field(fields, name) ?? null;
  const messageId = get('message-id')?.match(/<[^<>\s]+>/)?.[0] ?? get('message-id');
  const to = (get('to') ?? '')
    .split(',')
    .map((p) => (/<([^<>]+)>/.exec(p)?.[1] ?? p).trim())
    .filter((a) => /^[^\s@]+@[^\s@]+$/.test(a));
  return {
    messageId: messageId || null,
    posthornEmailId: get('x-posthorn-email-id')?.trim() || null,
    returnPath: get('return-path')?.replace(/^<|>$/g, '').trim() || null,
    to,
  };
}

interface MimePart {
  contentType: string;
  params: Record<string, string>;
  body: Buffer;
}

/** "type/sub; a=b; c=\"d\"" to its lowercased type and parameters (RFC 2045 5.1). */
function contentType(value: string | undefined): { type: string; params: Record<string, string> } {
  const [type = '', ...rest] = (value ?? 'text/plain').split(';');
  const params: Record<string, string> = {};
  // A name starts where a run of name characters starts (the lookbehind): tried from inside a run
  // too, a long run without '=' (a 1 MB field from a remote) was scanned quadratically, for minutes.
  for (const m of rest.join(';').matchAll(/(?<![A-Za-z0-9_.*-])([A-Za-z0-9_.*-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;\s]+)/g)) {
    const raw = m[2]!;
    params[m[1]!.toLowerCase()] = raw.startsWith('"') ? raw.slice(1, -1).replace(/\\(.)/g, '$1') : raw;
  }
  return { type: type.trim().toLowerCase(), params };
}

function hexValue(c: number | undefined): number {
  if (c === undefined) return -1;
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  return -1;
}

/**
 * RFC 2045 6.7 quoted-printable to bytes, in one pass into a buffer of the input's size: a
 * message of the largest accepted size costs that much again, not a JS array of every byte.
 */
function decodeQuotedPrintable(input: Buffer): Buffer {
  const out = Buffer.allocUnsafe(input.length);
  let n = 0;
  for (let i = 0; i < input.length; i++) {
    const c = input[i]!;
    if (c === 0x3d) {
      // A soft line break ("=" at the end of a line) is removed.
      if (input[i + 1] === 0x0d && input[i + 2] === 0x0a) {
        i += 2;
        continue;
      }
      if (input[i + 1] === 0x0a) {
        i += 1;
        continue;
      }
      const high = hexValue(input[i + 1]);
      const low = hexValue(input[i + 2]);
      if (high >= 0 && low >= 0) {
        out[n++] = high * 16 + low;
        i += 2;
        continue;
      }
    }
    out[n++] = c;
  }
  return out.subarray(0, n);
}

function splitHead(buf: Buffer): { head: string; body: Buffer } {
  const text = buf.toString('latin1');
  const m = /\r?\n\r?\n/.exec(text);
  if (!m) return { head: text, body: Buffer.alloc(0) };
  return { head: text.slice(0, m.index), body: buf.subarray(m.index + m[0].length) };
}

/**
 * The direct children of a multipart/report (RFC 6522), split by hand: mailparser renders an
 * inline message/rfc822 into the text and drops it as a part, and a report's parts are
 * simple (RFC 2046 5.2.1: message/* is 7bit, 8bit or binary), so this is the sturdier read.
 */
function reportParts(raw: Buffer): { reportType: string; parts: MimePart[] } | null {
  const top = splitHead(raw);
  const fields = parseFieldGroups(top.head)[0] ?? [];
  const ct = contentType(field(fields, 'content-type'));
  const boundary = ct.params.boundary;
  if (!ct.type.startsWith('multipart/') || !boundary) return null;
  const body = top.body.toString('latin1');
  const delimiter = new RegExp(`(?:^|\\r?\\n)--${boundary.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(--)?[ \\t]*(?=\\r?\\n|$)`, 'g');
  const marks = [...body.matchAll(delimiter)];
  const parts: MimePart[] = [];
  for (let i = 0; i < marks.length - 1; i++) {
    const mark = marks[i]!;
    if (mark[1]) break; // the close delimiter
    const start = mark.index! + mark[0].length;
    const chunk = body.slice(start, marks[i + 1]!.index).replace(/^\r?\n/, '');
    const part = splitHead(Buffer.from(chunk, 'latin1'));
    const headers = parseFieldGroups(part.head)[0] ?? [];
    const pct = contentType(field(headers, 'content-type'));
    const cte = (field(headers, 'content-transfer-encoding') ?? '').trim().toLowerCase();
    let content = part.body;
    // Only the parts read below are decoded (a report's prose or attachments can be most of 30 MB).
    const read = DSN_TYPES.has(pct.type) || ORIGINAL_TYPES.has(pct.type) || pct.type === ARF_TYPE;
    if (read && cte === 'base64') content = Buffer.from(content.toString('latin1').replace(/[^A-Za-z0-9+/=]/g, ''), 'base64');
    else if (read && cte === 'quoted-printable') content = decodeQuotedPrintable(content);
    parts.push({ contentType: pct.type, params: pct.params, body: content });
  }
  return { reportType: (ct.params['report-type'] ?? '').toLowerCase(), parts };
}

/**
 * What a DSN or feedback report says. Its text comes from other servers and may hold NUL or an
 * unpaired surrogate, which no store keeps alike (lib/nul-text.ts): U+FFFD stands in their place.
 */
export function parseReport(raw: Buffer, parsed: ParsedMail | null, mailFrom: string | null = null): ParsedReport {
  return replaceUnstorable(readReport(raw, parsed, mailFrom));
}

/** A message that is no report: a plain-text bounce when it clearly is one, else 'other'. */
function textOrOther(base: ParsedReport, raw: Buffer, parsed: ParsedMail | null, mailFrom: string | null): ParsedReport {
  // An unknown reverse-path is not the null one: only X-Failed-Recipients can make it a bounce.
  const found = readTextBounce(raw, parsed, mailFrom ?? '<unknown>');
  return found ? { ...base, type: 'text', recipients: found.recipients, reportingMta: found.textBounce.reportingMta, textBounce: found.textBounce } : base;
}

function readReport(raw: Buffer, parsed: ParsedMail | null, mailFrom: string | null): ParsedReport {
  const empty: ParsedReport = { type: 'other', reportingMta: null, recipients: [], feedback: null, original: null, subject: null, from: null };
  try {
    const subject = parsed?.subject ?? null;
    const from = parsed?.from?.value?.[0]?.address ?? null;
    const split = reportParts(raw);
    if (!split) return textOrOther({ ...empty, subject, from }, raw, parsed, mailFrom);
    const { parts, reportType } = split;
    const text = (p: MimePart) => p.body.toString('utf8');
    const originalPart = parts.find((p) => ORIGINAL_TYPES.has(p.contentType));
    const original = originalPart ? originalRef(text(originalPart)) : null;
    const base = { ...empty, subject, from, original };

    const arfPart = parts.find((p) => p.contentType === ARF_TYPE);
    if (arfPart && reportType !== 'delivery-status') {
      const { report, reportingMta } = feedbackReport(text(arfPart));
      return { ...base, type: 'arf', feedback: report, reportingMta };
    }
    const dsnPart = parts.find((p) => DSN_TYPES.has(p.contentType));
    if (dsnPart) {
      const groups = parseFieldGroups(text(dsnPart));
      // RFC 3464 2.1: the first group holds per-message fields, the rest one recipient each.
      const perMessage = groups[0] && !field(groups[0], 'final-recipient') ? groups.shift()! : [];
      const recipients = groups.map(dsnRecipient).filter((r): r is DsnRecipient => r !== null);
      return { ...base, type: 'dsn', reportingMta: mtaField(field(perMessage, 'reporting-mta')), recipients };
    }
    return textOrOther(base, raw, parsed, mailFrom);
  } catch {
    return empty;
  }
}
