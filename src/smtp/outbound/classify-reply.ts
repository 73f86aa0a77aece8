/**
 * What a remote server's reply means for one recipient: try again later
 * (deferred) or give up now (bounced), and whether the address itself is dead
 * (hardBounce: the recipient goes on the suppression list).
 *
 * RFC 5321 §4.2.1 says 4yz is transient and 5yz permanent, but "5xx = hard"
 * is the classic mistake (Postal #266, #741, #1243): providers send 5xx for
 * blocklists, rate limits and full mailboxes, and even for "try again later".
 * So, like ZoneMTA's config/bounces.txt and KumoMTA's bounce classifier, the
 * decision is a table: the enhanced status code (RFC 3463, carried after the
 * reply code per RFC 2034) picks the category, and text rules override it
 * where real servers are known to lie. Rules are ordered; the first match wins.
 */

export type ReplyCategory =
  | 'recipient' // the mailbox does not exist / is disabled: hard bounce
  | 'mailbox-full' // RFC 3463 X.2.2
  | 'policy' // X.7.x: not authorized, DMARC/SPF, content policy
  | 'blocklist' // our IP or domain is on a DNSBL / reputation block
  | 'spam' // content judged as spam
  | 'rate' // too many messages / connections, throttled, greylisted
  | 'message' // the message itself: too big, bad content/encoding (X.3.4, X.6.x)
  | 'sender' // our MAIL FROM address was refused (X.1.7, X.1.8)
  | 'system' // the remote system: routing, capacity, protocol (X.3.x, X.4.x, X.5.x)
  | 'connection' // no usable SMTP session: refused, timeout, TLS, greeting
  | 'other';

export interface ReplyClass {
  kind: 'deferred' | 'bounced';
  /** true only when the address is known to be dead; the caller suppresses that recipient. */
  hardBounce: boolean;
  /** A "try again in N minutes" hint from the server, in ms. */
  retryAfterMs?: number;
  /** Human-readable why, for logs and the delivery row. */
  reason: string;
  /** Optional so hand-written ReplyClass values elsewhere need not set it; classifyReply always does. */
  category?: ReplyCategory;
}

/** A hint beyond a day is either a typo or a server we should not trust with our schedule. */
const MAX_RETRY_HINT_MS = 24 * 60 * 60 * 1000;
const MS_PER_SECOND = 1000;
const MS_PER_MINUTE = 60 * MS_PER_SECOND;
const MS_PER_HOUR = 60 * MS_PER_MINUTE;

// ------------------------------------------------------------ enhanced codes

/**
 * RFC 3463 §2: class.subject.detail, class 2/4/5, subject and detail 1-3 digits.
 * RFC 2034 §4 puts it right after the reply code ("550-5.1.1 ..." on every
 * line of a multi-line reply); we also strip an optional leading reply code.
 */
const LEADING_ENHANCED_CODE = /^(?:\d{3}[ -])?\s*([245])\.(\d{1,3})\.(\d{1,3})(?![\d.]*\d)/;
/**
 * Servers that put it elsewhere ("mailbox unavailable (5.1.1)"). The guards keep
 * an IPv4 address such as 5.1.1.9 or 10.5.1.1 from passing for one.
 */
const ANYWHERE_ENHANCED_CODE = /(?<![\d.])([245])\.(\d{1,3})\.(\d{1,3})(?!\.?\d)/;

/** "5.1.1" from a reply such as "550 5.1.1 User unknown" or "5.1.1 User unknown"; undefined when none. */
export function parseEnhancedCode(response: string): string | undefined {
  const firstLine = response.split(/\r?\n/, 1)[0] ?? '';
  // Leading white space is trimmed, not matched: a leading \s* before the optional code's own
  // \s* made a line of spaces quadratic (a remote's 1 MB reply or DSN field: minutes).
  const m = LEADING_ENHANCED_CODE.exec(firstLine.trimStart()) ?? ANYWHERE_ENHANCED_CODE.exec(response);
  if (!m) return undefined;
  // Normalise "5.01.001" style padding some servers emit.
  return `${m[1]}.${Number(m[2])}.${Number(m[3])}`;
}

// ------------------------------------------------------------ retry hints

/**
 * "try again in 5 minutes", "retry in 30 seconds", "try again after 2 hours",
 * "please wait 90 sec". Postal honours the same hint (app/senders/smtp_sender.rb).
 */
const RETRY_HINT =
  /\b(?:try(?:\s+(?:again|later))?|retry|wait)\s+(?:(?:in|after|for)\s+)?(\d{1,6}(?:\.\d+)?)\s*(seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h)\b/i;

export function parseRetryHintMs(response: string): number | undefined {
  const m = RETRY_HINT.exec(response);
  if (!m) return undefined;
  const amount = Number(m[1]);
  const unit = m[2]!.toLowerCase();
  const perUnit = unit.startsWith('h') ? MS_PER_HOUR : unit.startsWith('m') ? MS_PER_MINUTE : MS_PER_SECOND;
  const ms = Math.round(amount * perUnit);
  if (!Number.isFinite(ms) || ms <= 0) return undefined;
  return Math.min(ms, MAX_RETRY_HINT_MS);
}

// ------------------------------------------------------------ the table

type Verdict = 'defer' | 'hard' | 'soft';

interface Rule {
  /** Enhanced code prefix this rule applies to ("5.1.1", "5.7."), or any when absent. */
  enhanced?: RegExp;
  /** Basic reply code(s) this rule applies to, or any when absent. */
  codes?: readonly number[];
  /** Text that must appear in the reply, or any when absent. */
  text?: RegExp;
  verdict: Verdict;
  category: ReplyCategory;
  why: string;
}

/**
 * Texts of mailboxes that do not exist or are closed for good. Yahoo's
 * "This user doesn't have a yahoo.com account", Postfix's "User unknown in
 * local recipient table", Exchange's "RecipientNotFound", Domino's "not listed
 * in Domino Directory".
 */
const MAILBOX_GONE_TEXT =
  /user unknown|unknown user|no such (?:user|mailbox|recipient|account|address)|user (?:not found|does not exist|doesn'?t exist)|mailbox (?:unavailable|not found|does not exist|disabled|is disabled|inactive)|does not exist|doesn'?t exist|doesn'?t have an? \S+ account|recipient (?:address )?rejected|unknown recipient|invalid recipient|recipient ?not ?found|not a valid (?:mailbox|recipient|user)|account (?:has been )?(?:disabled|deactivated|closed|suspended)|address (?:unknown|not found|no longer)|unrouteable address|not listed in (?:\S+ )?directory/i;

/** Our IP/domain is on a list or our reputation is the problem; retrying from here will not help soon. */
const BLOCKLIST_TEXT =
  /spamhaus|spamcop|barracuda|sorbs|block ?list|black ?list|dnsbl|\brbl\b|(?<!not )\blisted (?:on|in|at|by)\b|is listed|are listed|blocked|reputation/i;
const SPAM_TEXT = /\bspam\b|junk mail|unsolicited/i;
const POLICY_TEXT =
  /policy|not authori[sz]ed|access denied|relay(?:ing)? (?:denied|not permitted|access denied)|dmarc|\bspf\b|\bdkim\b|authentication (?:required|failed)|rejected for policy/i;

/**
 * 5xx texts that really mean "later". Ordered before everything else for 5xx,
 * because a server that says "try again later" will accept the message later,
 * whatever its reply code says. Includes RFC 5321 §4.5.3.1.10: a 552 "too
 * many recipients" is the RFC 821 mistake for 452 and is to be treated as
 * temporary. "Service unavailable" is deliberately absent: it is Postfix's
 * wording for a DNSBL hit ("554 5.7.1 Service unavailable; Client host [...]
 * blocked using zen.spamhaus.org"), which is a blocklist bounce.
 */
const LATER_TEXT =
  /try (?:again )?later|try again in|retry (?:later|in|after)|please try again|temporar(?:il)?y|greylist|graylist|too many (?:connections|concurrent|messages|sessions|recipients)|rate limit|ratelimit|throttl|\bdeferred\b|\bbusy\b/i;

/**
 * "try again in 5 minutes" or greylisting: an explicit "come back". Narrower than RETRY_HINT:
 * "blocked; wait 5 minutes before asking for delisting" is no invitation to retry.
 */
const EXPLICIT_LATER_TEXT = /\b(?:try(?:\s+again)?|retry)\s+(?:in|after)\s+\d{1,6}(?:\.\d+)?\s*(?:seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h)\b|greylist|graylist/i;

/**
 * The reply is about our MAIL FROM, not the recipient. Postfix checks sender restrictions at
 * RCPT by default (smtpd_delay_reject), so "550 5.1.0 <bounces+...>: Sender address rejected"
 * and "554 5.0.0 ... Sender domain does not exist" come as a recipient's refusal, with codes
 * and texts that otherwise mean a dead mailbox. Amazon SES says "Email address is not verified"
 * of the From.
 */
const SENDER_TEXT =
  /sender (?:address |domain )?(?:rejected|refused|denied|unknown|invalid|not (?:found|allowed|permitted|verified|authori[sz]ed))|sender (?:address |domain )?(?:does not|doesn'?t) exist|sender verif\w* failed|(?:unknown|invalid|bad) sender|email address is not verified|from address (?:rejected|not verified)/i;

/**
 * A relay (smarthost) refusing us: no or bad AUTH, relaying not allowed for us, a sender it has
 * not verified. With a relay configured this is the operator's setting, the same for every
 * message; bouncing would mark every recipient BOUNCED for a fixable mistake, so it defers.
 */
const RELAY_CONFIG_TEXT =
  /relay(?:ing)? (?:access )?(?:denied|not permitted|not allowed|prohibited)|authentication (?:required|failed)|not authenticated|must (?:first )?authenticate|\bauth(?:entication)? first\b|not verified|not authori[sz]ed to (?:relay|send)/i;

const MAILBOX_FULL_TEXT = /mailbox (?:is )?full|over ?quota|quota exceeded|exceeded (?:\S+ )?(?:storage|quota)|insufficient (?:system )?storage|out of storage|mailbox size limit/i;

/**
 * For permanent (5yz) replies. Order matters; first match wins.
 *
 *  #  match                                  verdict  why
 *  0  a timed "try again in N", greylisting  defer    an explicit instruction, whatever the code
 *  R  with a relay configured: 530, 535,     defer    the relay refuses us: the operator's setting,
 *     5.7.0, 5.7.8, relay-config text                  not the message (checked before rule 0)
 * 0b  sender text, or the reply names our     soft     about our MAIL FROM: never a hard bounce of
 *     MAIL FROM address                                the recipient (see SENDER_TEXT)
 *  1  5.1.1 5.1.0 5.1.10 5.2.1 5.1.2 5.1.3   hard     mailbox/domain does not exist, disabled, bad syntax
 *     5.1.6
 *  2  text "try later"/"temporarily"/...     defer    server says later, whatever the code
 *  3  5.2.2 or "mailbox full" text           soft     see below
 *  4  5.7.x + blocklist / spam text          soft     blocklist: our IP/domain, not the recipient
 *  5  5.7.x                                  soft     policy (auth, DMARC, relay, content policy)
 *  6  blocklist text                         soft     a DNSBL/reputation text under any other code
 *  7  spam text                              soft
 *  8  policy text                            soft
 *  9  5.1.7 5.1.8                            soft     our sender address was refused
 * 10  5.3.4 5.2.3 5.6.x                      soft     the message: too big, bad content
 * 11  5.0.0 5.5.0 + mailbox-gone text        hard     generic codes say nothing, the text does:
 *                                                     Outlook.com's "550 5.5.0 Requested action not
 *                                                     taken: mailbox unavailable"
 * 12  5.3.x 5.4.x 5.5.x                      soft     remote system, routing or protocol trouble
 * 13  mailbox-gone text                      hard     "user unknown", "no such user", "does not exist",
 *                                                     "mailbox unavailable", "recipient rejected"
 * 14  anything else 5yz                      soft     bounce but do not suppress: an unknown 5xx is
 *                                                     not proof the address is dead
 *
 * The "does not exist" codes (1) come before the vague "later" texts (2): they are the server's
 * structured statement about this address, and their texts often say "try again" in passing
 * ("550 5.1.1 user unknown; please try again with a valid address", "mailbox busy or unknown").
 * Only a timed hint or greylisting (0) outranks them.
 * Mailbox full (5.2.2) is a soft bounce, not a deferral: the server chose a
 * permanent code (Gmail sends 452 4.2.2 while it expects the owner to clean
 * up, 552 5.2.2 for abandoned mailboxes), so 72 hours of retries would mostly
 * delay the bad news. Not hard: the address exists and may be emptied.
 * The text rules for blocklist/policy (6-8) come before the mailbox text
 * (13) because "Recipient address rejected: blocked using zen.spamhaus.org"
 * is about us, not the recipient, and before the vague system codes (12)
 * because AT&T says "553 5.3.0 ... DNSBL ... is_blocked". The specific
 * enhanced code rules (1, 4, 5) come first: they are the server's
 * structured statement.
 */
const PERMANENT_RULES: readonly Rule[] = [
  { text: EXPLICIT_LATER_TEXT, verdict: 'defer', category: 'rate', why: 'permanent code but the server asks to try again at a set time' },
  { enhanced: /^5\.1\.(?:0|1|10)$/, verdict: 'hard', category: 'recipient', why: 'mailbox does not exist' },
  { enhanced: /^5\.2\.1$/, verdict: 'hard', category: 'recipient', why: 'mailbox disabled' },
  { enhanced: /^5\.1\.[236]$/, verdict: 'hard', category: 'recipient', why: 'bad destination address or mailbox moved' },
  { text: LATER_TEXT, verdict: 'defer', category: 'rate', why: 'permanent code but the server asks to try again later' },
  { enhanced: /^5\.2\.2$/, verdict: 'soft', category: 'mailbox-full', why: 'mailbox full' },
  { text: MAILBOX_FULL_TEXT, verdict: 'soft', category: 'mailbox-full', why: 'mailbox full' },
  { enhanced: /^5\.7\./, text: BLOCKLIST_TEXT, verdict: 'soft', category: 'blocklist', why: 'sender blocklisted' },
  { enhanced: /^5\.7\./, text: SPAM_TEXT, verdict: 'soft', category: 'spam', why: 'rejected as spam' },
  { enhanced: /^5\.7\./, verdict: 'soft', category: 'policy', why: 'rejected by policy' },
  { text: BLOCKLIST_TEXT, verdict: 'soft', category: 'blocklist', why: 'sender blocklisted' },
  { text: SPAM_TEXT, verdict: 'soft', category: 'spam', why: 'rejected as spam' },
  { text: POLICY_TEXT, verdict: 'soft', category: 'policy', why: 'rejected by policy' },
  { enhanced: /^5\.1\.[78]$/, verdict: 'soft', category: 'sender', why: 'sender address refused' },
  { enhanced: /^5\.(?:3\.4|2\.3|6\.\d+)$/, verdict: 'soft', category: 'message', why: 'message refused (size or content)' },
  { enhanced: /^5\.[05]\.0$/, text: MAILBOX_GONE_TEXT, verdict: 'hard', category: 'recipient', why: 'mailbox does not exist' },
  { enhanced: /^5\.[345]\./, verdict: 'soft', category: 'system', why: 'remote system or protocol error' },
  { text: MAILBOX_GONE_TEXT, verdict: 'hard', category: 'recipient', why: 'mailbox does not exist' },
];

/**
 * For transient (4yz) replies: always deferred (RFC 5321 §4.2.1: "the
 * command was not accepted ... but the error condition is temporary"); these
 * rules only name the category for logs and for a later per-destination
 * back-off. 421/450/451/452 included; 452 "too many recipients" means "send
 * the rest in another transaction" (RFC 5321 §4.5.3.1.10), a deferral too.
 */
const TRANSIENT_RULES: readonly Rule[] = [
  { enhanced: /^4\.2\.2$/, verdict: 'defer', category: 'mailbox-full', why: 'mailbox full (temporary)' },
  { text: MAILBOX_FULL_TEXT, verdict: 'defer', category: 'mailbox-full', why: 'mailbox full (temporary)' },
  { text: /greylist|graylist/i, verdict: 'defer', category: 'rate', why: 'greylisted' },
  { text: BLOCKLIST_TEXT, verdict: 'defer', category: 'blocklist', why: 'temporarily blocked' },
  { enhanced: /^4\.7\./, verdict: 'defer', category: 'policy', why: 'temporary policy refusal' },
  { text: /rate|too many|throttl|volume|complaints/i, verdict: 'defer', category: 'rate', why: 'rate limited' },
  { enhanced: /^4\.[345]\./, verdict: 'defer', category: 'system', why: 'remote system busy or unavailable' },
  { codes: [421], verdict: 'defer', category: 'system', why: 'service not available, closing connection' },
];

function matches(rule: Rule, code: number, enhanced: string | undefined, text: string): boolean {
  if (rule.codes && !rule.codes.includes(code)) return false;
  if (rule.enhanced && (enhanced === undefined || !rule.enhanced.test(enhanced))) return false;
  if (rule.text && !rule.text.test(text)) return false;
  return true;
}

function verdictToClass(verdict: Verdict, category: ReplyCategory, reason: string, retryAfterMs: number | undefined): ReplyClass {
  const base: ReplyClass =
    verdict === 'defer'
      ? { kind: 'deferred', hardBounce: false, reason, category }
      : { kind: 'bounced', hardBounce: verdict === 'hard', reason, category };
  // A hint only makes sense for something we will retry.
  if (verdict === 'defer' && retryAfterMs !== undefined) base.retryAfterMs = retryAfterMs;
  return base;
}

function summarise(response: string): string {
  return response.replace(/\s+/g, ' ').trim().slice(0, 300);
}

/**
 * Classifies one failed reply (any stage: MAIL, RCPT, DATA). `code` is the
 * basic reply code; `response` the reply text with or without the code.
 * A code that is not 4yz/5yz (a server misbehaving, or a caller passing a
 * 2yz by mistake) is treated as temporary: deferring is the safe answer.
 */
export function classifyReply(code: number, response: string, context: { mailFrom?: string; relay?: boolean } = {}): ReplyClass {
  const text = response ?? '';
  const enhanced = parseEnhancedCode(text);
  const hint = parseRetryHintMs(text);
  const said = summarise(text) || String(code);

  if (context.relay && code >= 500 && code <= 599 && (code === 530 || code === 535 || enhanced === '5.7.0' || enhanced === '5.7.8' || RELAY_CONFIG_TEXT.test(text))) {
    return verdictToClass('defer', 'policy', `the relay refused us (check the relay settings): ${said}`, hint);
  }
  if (code >= 500 && code <= 599) {
    const later = PERMANENT_RULES[0]!;
    if (matches(later, code, enhanced, text)) return verdictToClass(later.verdict, later.category, `${later.why}: ${said}`, hint);
    const mailFrom = context.mailFrom?.toLowerCase();
    if (SENDER_TEXT.test(text) || (mailFrom && text.toLowerCase().includes(mailFrom))) {
      return verdictToClass('soft', 'sender', `our sender address was refused, not the recipient: ${said}`, hint);
    }
    for (const rule of PERMANENT_RULES) {
      if (matches(rule, code, enhanced, text)) return verdictToClass(rule.verdict, rule.category, `${rule.why}: ${said}`, hint);
    }
    return verdictToClass('soft', 'other', `permanent failure: ${said}`, undefined);
  }
  if (code >= 400 && code <= 499) {
    for (const rule of TRANSIENT_RULES) {
      if (matches(rule, code, enhanced, text)) return verdictToClass('defer', rule.category, `${rule.why}: ${said}`, hint);
    }
    return verdictToClass('defer', 'other', `temporary failure: ${said}`, hint);
  }
  return verdictToClass('defer', 'other', `unexpected reply: ${said}`, hint);
}

/**
 * Connection-level failures (refused, timeout, greeting 421/554, TLS required
 * but unavailable, relay AUTH refused) are never about the recipient, so they
 * always defer: the caller tries the next MX host, then retries on schedule,
 * and finally gives up (FAILED) when the retry age runs out. RFC 5321 §5.1:
 * an unreachable or refusing MX means "try the next one", not "bounce".
 * A greeting reply's own retry hint is still honoured.
 */
export function classifyConnectionFailure(detail: string, response?: string): ReplyClass {
  const hint = response !== undefined ? parseRetryHintMs(response) : undefined;
  return verdictToClass('defer', 'connection', `connection failed: ${summarise(detail)}`, hint);
}
