import type { ParsedMail } from 'mailparser';
import type { DsnRecipient, TextBounce } from '../../core/received/inbound-types.js';
import { classifyReply, parseEnhancedCode } from '../outbound/classify-reply.js';
import { parseFieldGroups } from '../parsed-mail.js';
import { englishGloss, foldText, isForeignAutoReplyText, isForeignBounceText } from './text-bounce-phrases.js';

// Bounces that are not RFC 3464 DSNs: Exim's text/plain bounce with X-Failed-Recipients, qmail's
// "Hi. This is the qmail-send program", and other MTAs' prose from the null reverse-path. Read
// conservatively, because a wrongly suppressed recipient is worse than a missed bounce:
// - the message must be clearly a bounce: an X-Failed-Recipients field (Exim), or the null
//   reverse-path (RFC 5321 4.5.5) and a recognised bounce text;
// - an auto-reply (vacation, out of office) never is, whatever it says;
// - an address counts only with X-Failed-Recipients naming it, or with an SMTP 4yz/5yz reply or an
//   enhanced status code (RFC 3463) in its own block of the text.
// Besides English, the bounce and auto-reply texts and the words of a reply ("Benutzer unbekannt",
// "buzón lleno") are read in German, French, Spanish, Portuguese, Italian and Dutch
// (text-bounce-phrases.ts); the rules stay the same.
// Which deliveries the addresses may touch is core's decision (report-service.ts).

/** Where the prose ends and the returned original begins (Exim, qmail, sendmail, Courier, others). */
const ORIGINAL_MARKERS = [
  /^-+ ?This is a copy of the message/im,
  /^--- ?Below this line is a copy of the message/im,
  /^-+ ?(?:The )?original message/im,
  /^-+ ?Original message follows/im,
  /^-+ ?Returned message/im,
  /^-+ ?Transcript of session follows/im,
  /^-+ ?The body of the message is/im,
  /^-+ ?Message headers follow/im,
];

/** Phrases of MTA bounce texts; without one, mail from the null reverse-path is not taken as a bounce. */
const BOUNCE_TEXT =
  /qmail-send program|mail delivery (?:software|system|subsystem)|could ?n[o']t be delivered|was not delivered|has not yet been delivered|not been delivered|undeliverable|undelivered mail|delivery (?:has )?failed|delivery failure|delivery to the following recipients? failed|failed permanently|permanent (?:fatal )?error|returned mail|(?:wasn't|was not|unable|not able) to deliver|following address(?:\(es\)|es)? failed|message not delivered/i;

/** Vacation and out-of-office texts (subject or prose). */
const AUTO_REPLY_TEXT = /out of (?:the )?office|on vacation|vacation (?:reply|notice|message)|on (?:annual |parental |sick )?leave|away from (?:my|the) (?:desk|office)|auto(?:matic)?[ -]?(?:reply|response|responder|answer)|autoreply|abwesenheit|absence/i;

/** Fields only auto-responders write (Postfix vacation, Yahoo, many webmail ones). */
const AUTO_REPLY_FIELDS = ['x-autoreply', 'x-autorespond', 'x-autoresponder', 'x-vacation'];

// The lookbehind starts a local part only where its run of characters starts: tried from inside
// a run too, a long run without '@' (a 1 MB X-Failed-Recipients) was scanned quadratically.
const ADDRESS = /(?<![^\s<>()"',;:@])[^\s<>()"',;:@]+@[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?/;
/** A line that opens an address's block: the address first, bare or in <>, then ":" or nothing much. */
const ADDRESS_LINE = new RegExp(`^\\s*<?(${ADDRESS.source})>?:?(?:\\s|$)`);
/** An SMTP reply code where servers' texts put one: line start, after "said:", "error:", "(reason:" or a colon. */
const SMTP_CODE = /(?:^|[:(]\s*|\b(?:said|error|reason)\b:?\s+)([45]\d\d)(?=[ \t-]|$)/i;
/** An enhanced status code (RFC 3463), also qmail's "(#5.1.1)"; not a piece of an IP address. */
const ENHANCED_CODE = /(?<![\w.])([45])\.(\d{1,3})\.(\d{1,3})(?!\.?\d)/;

function fieldsOf(parsed: ParsedMail, raw: Buffer): [string, string][] {
  const text = raw.toString('latin1');
  const end = /\r?\n\r?\n/.exec(text);
  return parseFieldGroups(end ? text.slice(0, end.index) : text)[0] ?? (parsed.headerLines ?? []).map((l) => [l.key, l.line.slice(l.line.indexOf(':') + 1).trim()]);
}

/** A bounce's own words fit in far less; the rest of a large message is its returned original. */
const PROSE_LIMIT = 64 * 1024;

function prose(parsed: ParsedMail): string {
  const body = (parsed.text ?? '').slice(0, PROSE_LIMIT);
  let end = body.length;
  for (const marker of ORIGINAL_MARKERS) {
    const m = marker.exec(body);
    if (m && m.index < end) end = m.index;
  }
  return body.slice(0, end);
}

interface Block {
  address: string;
  lines: string[];
}

/** The text split into per-address blocks: an address line and what follows it up to the next one or a blank line. */
function addressBlocks(text: string): Block[] {
  const blocks: Block[] = [];
  let current: Block | null = null;
  for (const line of text.split(/\r?\n/)) {
    if (!line.trim()) {
      current = null;
      continue;
    }
    const m = ADDRESS_LINE.exec(line);
    if (m) {
      current = { address: m[1]!, lines: [line] };
      blocks.push(current);
    } else if (current) {
      current.lines.push(line);
    }
  }
  return blocks;
}

interface Reply {
  smtpCode: number | null;
  status: string | null;
  /** The line that carries the code, e.g. "550 5.1.1 <a@b>: User unknown". */
  text: string;
}

function replyIn(block: Block): Reply | null {
  for (const line of block.lines) {
    const trimmed = line.trim();
    const smtp = SMTP_CODE.exec(trimmed);
    const enhanced = ENHANCED_CODE.exec(trimmed);
    if (!smtp && !enhanced) continue;
    const smtpCode = smtp ? Number(smtp[1]) : null;
    const status = enhanced ? `${enhanced[1]}.${Number(enhanced[2])}.${Number(enhanced[3])}` : null;
    // The reply as the remote wrote it, from its code on; qmail's sentence keeps its own words.
    const text = smtp ? trimmed.slice(smtp.index + smtp[0].length - smtp[1]!.length) : trimmed;
    return { smtpCode, status, text };
  }
  return null;
}

function recipient(address: string, reply: Reply | null, forceFailed: boolean): DsnRecipient | null {
  const klass = reply ? String(reply.smtpCode ?? reply.status)[0] : null;
  // X-Failed-Recipients names a failure whatever the last reply said (Exim gives up on a 4yz
  // after its retry time); without it the reply's class decides, and no reply means no claim.
  const action = forceFailed || klass === '5' ? 'failed' : klass === '4' ? 'delayed' : null;
  if (!action) return null;
  const effectiveCode = reply?.smtpCode ?? (klass === '4' ? 450 : 550);
  let text = reply?.text ?? '';
  // The classifier reads the enhanced code first; a reply without one it finds gets the status read here.
  if (reply?.status && parseEnhancedCode(text) !== reply.status) text = `${reply.status} ${text}`.trim();
  // The classifier reads English: another language's "user unknown" or "mailbox full" is given in its words.
  const gloss = englishGloss(text);
  const verdict = classifyReply(effectiveCode, gloss ? `${text} (${gloss})` : text);
  return {
    finalRecipient: address,
    originalRecipient: null,
    action,
    status: reply?.status ?? null,
    diagnosticCode: reply?.text || null,
    smtpCode: reply?.smtpCode ?? null,
    remoteMta: null,
    willRetryUntil: null,
    hardBounce: action === 'failed' && verdict.hardBounce,
    category: verdict.category ?? 'other',
    source: 'text',
  };
}

/**
 * The failed and delayed recipients of a plain-text bounce, or null when the message is not
 * clearly one. `mailFrom` is the envelope's reverse-path ('' for the null one).
 */
export function readTextBounce(raw: Buffer, parsed: ParsedMail | null, mailFrom: string): { recipients: DsnRecipient[]; textBounce: TextBounce } | null {
  if (!parsed) return null;
  const fields = fieldsOf(parsed, raw);
  const values = (name: string) => fields.filter(([k]) => k === name).map(([, v]) => v);
  const subject = parsed.subject ?? '';
  const text = prose(parsed);

  const failedField = values('x-failed-recipients')
    .flatMap((v) => v.split(','))
    .map((a) => (/<([^<>]+)>/.exec(a)?.[1] ?? a).trim())
    .filter((a) => ADDRESS.test(a) && !/\s/.test(a));
  const autoSubmitted = values('auto-submitted').some((v) => /^\s*auto-replied/i.test(v));
  const precedence = values('precedence').some((v) => /auto[_-]?reply/i.test(v));
  // Auto-replies never bounce. Exim marks its bounces Auto-Submitted: auto-replied too, so that
  // field alone vetoes only a message without X-Failed-Recipients; the vacation signs always do.
  const folded = foldText(`${subject}\n${text}`);
  if (AUTO_REPLY_FIELDS.some((f) => values(f).length) || precedence || AUTO_REPLY_TEXT.test(subject) || AUTO_REPLY_TEXT.test(text) || isForeignAutoReplyText(folded)) return null;
  if (autoSubmitted && !failedField.length) return null;

  const bounceText = () => BOUNCE_TEXT.test(subject) || BOUNCE_TEXT.test(text) || isForeignBounceText(folded);
  const evidence: TextBounce['evidence'] | null = failedField.length ? 'x-failed-recipients' : mailFrom === '' && bounceText() ? 'bounce-text' : null;
  if (!evidence) return null;
  const reportingMta = /qmail-send program at ([A-Za-z0-9.-]+[A-Za-z0-9])/i.exec(text)?.[1] ?? null;

  // Each address's reply from its first block that has one, indexed once: a search of every block
  // per address took addresses x blocks (a 30 MB X-Failed-Recipients against 64 KB of prose).
  const blocks = addressBlocks(text);
  const replies = new Map<string, Reply>();
  for (const b of blocks) {
    const key = b.address.toLowerCase();
    if (replies.has(key)) continue;
    const reply = replyIn(b);
    if (reply) replies.set(key, reply);
  }
  const replyFor = (address: string) => replies.get(address.toLowerCase()) ?? null;
  const recipients: DsnRecipient[] = [];
  const seen = new Set<string>();
  const candidates = evidence === 'x-failed-recipients' ? failedField : blocks.map((b) => b.address);
  for (const address of candidates) {
    const key = address.toLowerCase();
    if (seen.has(key)) continue;
    seen.add(key);
    const r = recipient(address, replyFor(address), evidence === 'x-failed-recipients');
    if (r) recipients.push(r);
  }
  return recipients.length ? { recipients, textBounce: { evidence, reportingMta } } : null;
}
