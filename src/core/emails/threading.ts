// In-Reply-To and References (RFC 5322 3.6.4): the composer writes them, from the API's
// inReplyToId or from a message submitted over SMTP, never from custom headers.

/**
 * References keeps at most this many ids: the first (the thread's root, which RFC 5322 3.6.4
 * asks to keep when trimming) and the most recent ones. Clients thread on the root and the
 * last few; an unbounded list grows by one id with every reply of a long exchange.
 */
export const MAX_REFERENCES = 20;

/**
 * Longest msg-id kept, brackets included. RFC 5322 sets no bound but the line: an id can not be
 * folded, and ids this long are not written by any mail system; one over it is dropped.
 */
export const MAX_MSG_ID_CHARS = 250;

// msg-id = "<" id-left "@" id-right ">", id-left = dot-atom-text, id-right = dot-atom-text /
// no-fold-literal; the obsolete forms (quoted strings, CFWS inside) are not kept.
const ATEXT = "[A-Za-z0-9!#$%&'*+\\-/=?^_`{|}~]+";
const DOT_ATOM_TEXT = `${ATEXT}(?:\\.${ATEXT})*`;
const NO_FOLD_LITERAL = '\\[[!-Z^-~]*\\]';
const MSG_ID = new RegExp(`^<${DOT_ATOM_TEXT}@(?:${DOT_ATOM_TEXT}|${NO_FOLD_LITERAL})>$`);

export function isMsgId(value: string): boolean {
  return value.length <= MAX_MSG_ID_CHARS && MSG_ID.test(value);
}

/**
 * The valid msg-ids of an In-Reply-To or References value as a client wrote it, in order, each
 * once. Anything else (a phrase, a malformed or overlong id) is left out: a mail client's user
 * can not fix it, and a bad id in the field would only confuse the recipient's threading.
 * Comments (RFC 5322 3.2.2: parenthesised, nestable, with quoted-pairs) and quoted strings are
 * not ids even when they hold one, so they are skipped; an unclosed one runs to the end.
 * One linear pass, no backtracking: the value comes from submitted mail.
 */
export function msgIdsOf(value: string): string[] {
  const ids = new Set<string>();
  const n = value.length;
  let i = 0;
  while (i < n) {
    const c = value[i];
    if (c === '(') {
      let depth = 1;
      for (i++; i < n && depth > 0; i++) {
        const d = value[i];
        if (d === '\\') i++;
        else if (d === '(') depth++;
        else if (d === ')') depth--;
      }
    } else if (c === '"') {
      for (i++; i < n && value[i] !== '"'; i++) if (value[i] === '\\') i++;
      i++;
    } else if (c === '<') {
      // A bracketed run is one unit, kept if it is a msg-id (a domain literal may hold '(' or
      // '"'). A '<' with no '>' before the next '<' is a stray character; the scan stops at that
      // '<', so each character is scanned at most twice.
      let j = i + 1;
      while (j < n && value[j] !== '<' && value[j] !== '>') j++;
      if (j < n && value[j] === '>') {
        const candidate = value.slice(i, j + 1);
        if (isMsgId(candidate)) ids.add(candidate);
        i = j + 1;
      } else i++;
    } else i++;
  }
  return [...ids];
}

/** References bounded to MAX_REFERENCES: each id once, the first kept and then the most recent ones. */
export function boundReferences(ids: readonly string[]): string[] {
  const unique = [...new Set(ids)];
  return unique.length <= MAX_REFERENCES ? unique : [unique[0]!, ...unique.slice(unique.length - (MAX_REFERENCES - 1))];
}

/** A message's threading fields as the composer writes them. */
export interface Threading {
  /** One or more msg-ids, space separated; null for none. */
  inReplyTo: string | null;
  references: string[];
}

/**
 * The threading fields of a submitted message, from the first In-Reply-To and the first
 * References field it has (unfolded values); invalid ids left out, both bounded.
 */
export function submittedThreading(inReplyTo: string | undefined, references: string | undefined): Threading {
  const parents = inReplyTo === undefined ? [] : msgIdsOf(inReplyTo).slice(0, MAX_REFERENCES);
  return { inReplyTo: parents.length ? parents.join(' ') : null, references: references === undefined ? [] : boundReferences(msgIdsOf(references)) };
}
