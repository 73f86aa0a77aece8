import { domainToASCII, domainToUnicode } from 'node:url';
import addressparser from 'nodemailer/lib/addressparser';
import { badRequest } from '../errors.js';

export interface Mailbox {
  name: string;
  /** Local part as given, domain lowercased and in A-labels (punycode). */
  address: string;
}

// Pragmatic RFC 5321 mailbox check: a dot-atom or quoted local part, and a domain of
// LDH labels (or an IDN already in A-labels / Unicode letters and marks: the vowel signs of
// Devanagari and many scripts are marks, as is the diaeresis of a decomposed ü; one leading a
// label is refused by the IDNA conversion below).
const LOCAL = /^(?:[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*|"(?:[^"\\\r\n]|\\.)+")$/;
const DOMAIN_LABEL = /^(?!-)[\p{L}\p{M}\p{N}-]{1,63}(?<!-)$/u;
const NOT_PRINTABLE = /(?![ \t])[\p{C}\p{Z}]/u;

const ASCII = /^[\x00-\x7f]*$/;

/**
 * A domain as DNS, SMTP and every comparison need it: lowercased, an IDN in A-labels
 * ("bücher.example" is "xn--bcher-kva.example", one domain however it was written). '' when
 * it is not a valid IDN.
 */
export function asciiDomain(domain: string): string {
  return ASCII.test(domain) ? domain.toLowerCase() : domainToASCII(domain);
}

/**
 * Whether every A-label ("xn--...") of an ASCII domain is the punycode of a valid IDN: the
 * domain converts to Unicode and back to itself. "xn--zz.example" is no name DNS can hold,
 * so mail to it could only bounce. Checked where mail is sent, not by isValidAddress, so
 * addresses stored before still parse.
 */
export function hasValidALabels(domain: string): boolean {
  const lower = domain.toLowerCase();
  if (!/(^|\.)xn--/.test(lower)) return true;
  const unicode = domainToUnicode(lower);
  return unicode !== '' && domainToASCII(unicode) === lower;
}

/** 400 naming `field` unless the mailbox's domain passes hasValidALabels. */
export function assertValidALabels(m: Mailbox, field: string): Mailbox {
  if (!hasValidALabels(m.address.slice(m.address.lastIndexOf('@') + 1))) throw badRequest(`${field}: "${m.address}" is not a valid email address (its domain is not a valid internationalized name)`);
  return m;
}

export function isValidAddress(address: string): boolean {
  if (address.length > 254) return false;
  const at = address.lastIndexOf('@');
  if (at < 1) return false;
  const local = address.slice(0, at);
  const domain = address.slice(at + 1);
  if (local.length > 64 || !LOCAL.test(local)) return false;
  // A quoted local part may hold UTF-8 (RFC 6531), but no control, format, unassigned or
  // surrogate code point and no white space beyond SP and HTAB: nodemailer folds header lines
  // before any JavaScript white space, so a U+2028 or U+00A0 there began a header line of its
  // own ('"c\u2028X-Injected: 1"@example.org' wrote a line "\u2028X-Injected: 1...").
  if (NOT_PRINTABLE.test(local)) return false;
  const ascii = asciiDomain(domain);
  if (ascii === '') return false;
  // The name DNS and RCPT TO get (RFC 1035 2.3.4): an A-label is longer than its Unicode form.
  if (ascii.length > 253 || ascii.split('.').some((l) => l.length > 63) || local.length + 1 + ascii.length > 254) return false;
  const labels = domain.split('.');
  return labels.length >= 2 && labels.every((l) => DOMAIN_LABEL.test(l)) && !/^\d+$/.test(labels[labels.length - 1]!);
}

/**
 * The domain lowercased and in A-labels; local parts are case-sensitive in theory (RFC 5321
 * 2.4) but we keep them as given.
 */
export function normalizeAddress(address: string): string {
  const at = address.lastIndexOf('@');
  return `${address.slice(0, at)}@${asciiDomain(address.slice(at + 1))}`;
}

/** Key used for suppression and contact matching: trimmed, fully lowercased, the domain in A-labels. */
export function addressKey(address: string): string {
  const trimmed = address.trim();
  const key = trimmed.toLowerCase();
  if (ASCII.test(key)) return key;
  const at = trimmed.lastIndexOf('@');
  if (at < 0) return key;
  // The domain converted as typed, as asciiDomain converts the envelope's: lowercased first,
  // a capital Σ ending a word would be a final ς (toLowerCase's one rule by context), which
  // IDNA keeps as another letter, so the key would name another domain than the mail goes to.
  const domain = trimmed.slice(at + 1);
  return `${trimmed.slice(0, at).toLowerCase()}@${asciiDomain(domain) || domain.toLowerCase()}`;
}

/**
 * The key contacts are stored, looked up and kept unique by: addressKey of the address with
 * quotes its local part does not need dropped (unquoted), so `"ann"@x` is `ann@x`, the mailbox a
 * send writes; quotes a local part needs (`"a b"@x`) stay.
 */
export function mailboxKey(address: string): string {
  return addressKey(unquoted(address.trim()));
}

/**
 * A term that searches stored addresses, lowercased as addressKey keys them: in the domain (what
 * follows the last `@`, or the whole term without one) a capital Σ is σ wherever it stands, as
 * IDNA maps it; toLowerCase makes it ς at a word's end, which is another domain's letter.
 */
export function lowerAddressTerm(term: string): string {
  const at = term.lastIndexOf('@');
  return `${term.slice(0, at + 1)}${term.slice(at + 1).replaceAll('Σ', 'σ')}`.toLowerCase();
}

export function domainOf(address: string): string {
  return asciiDomain(address.slice(address.lastIndexOf('@') + 1));
}

/**
 * The addr-spec a mailbox string holds, read by its structure (RFC 5322 3.4): outside quoted
 * strings and comments, either no angle brackets at all (the whole input, comments aside, is
 * the address) or exactly one `<...>`, last, after the display name. Null for anything else: a
 * second angle-addr, text after the `>`, unbalanced quotes, comments or brackets, or an `@` in
 * an unquoted display name (`a@b.example Name <c@d.example>` holds two addresses, and which one
 * is meant is anyone's guess; quoted, the name may say what it likes).
 */
function addrSpecOf(input: string): string | null {
  let inQuote = false;
  let depth = 0;
  let open = -1;
  let close = -1;
  let atInName = false;
  let groupSyntax = false;
  let bare = '';
  for (let i = 0; i < input.length; i++) {
    const c = input[i]!;
    if (inQuote) {
      if (c === '\\') {
        bare += c + (input[i + 1] ?? '');
        i++;
        continue;
      }
      if (c === '"') inQuote = false;
      bare += c;
    } else if (depth > 0) {
      if (c === '\\') i++;
      else if (c === '(') depth++;
      else if (c === ')') depth--;
    } else if (c === '"') {
      inQuote = true;
      bare += c;
    } else if (c === '(') depth++;
    else if (c === ')') return null;
    else if (c === '<') {
      if (open >= 0) return null;
      open = i;
    } else if (c === '>') {
      if (close >= 0 || open < 0) return null;
      close = i;
    } else if (close >= 0 && !/\s/.test(c)) return null;
    else {
      if (c === '@' && open < 0) atInName = true;
      // An unquoted ':' or ';' is group syntax (RFC 5322 3.4): "Team: a <x@y>;" would put the
      // text before the colon out of the name, and addressparser reads it so.
      if ((c === ':' || c === ';') && open < 0) groupSyntax = true;
      bare += c;
    }
  }
  if (inQuote || depth > 0 || groupSyntax || (open >= 0 && close < 0) || (open >= 0 && atInName)) return null;
  return open >= 0 ? input.slice(open + 1, close).trim() : bare.trim();
}

/** `"john"@x` and `john@x` are one address (RFC 5321 4.1.2): quotes around a plain dot-atom local part dropped. */
export function unquoted(address: string): string {
  const m = /^"([A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*)"(@.*)$/s.exec(address);
  return m ? m[1]! + m[2]! : address;
}

// Most mailboxes are `user@example.com` or `Plain Words <user@example.com>`: ASCII words and a
// dot-atom address on LDH labels, which leave the full parse nothing to decide. They skip it
// (nodemailer's addressparser and the structure check were ~6% of an API send's CPU); a test
// checks on generated inputs that both paths give the same mailbox.
const SIMPLE_ADDRESS = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+$/;
const SIMPLE_NAMED = /^([A-Za-z0-9]+(?: [A-Za-z0-9]+)*) <([^<>\s]+)>$/;

/** The mailbox when the input is of the simple kinds above and valid; undefined otherwise (then the full parse decides). */
export function simpleMailbox(input: string): Mailbox | undefined {
  let name = '';
  let address = input;
  if (!SIMPLE_ADDRESS.test(input)) {
    const m = SIMPLE_NAMED.exec(input);
    if (!m || !SIMPLE_ADDRESS.test(m[2]!)) return undefined;
    name = m[1]!;
    address = m[2]!;
  }
  return isValidAddress(address) ? { name, address: normalizeAddress(address) } : undefined;
}

/** Parses one mailbox such as `Acme <hi@acme.com>` or `hi@acme.com`; 400 naming the field otherwise. */
export function parseMailbox(input: string, field: string): Mailbox {
  return simpleMailbox(input) ?? parseMailboxFully(input, field);
}

/** parseMailbox without the shortcut for simple inputs (exported for the test that compares the two). */
export function parseMailboxFully(input: string, field: string): Mailbox {
  if (/[\r\n]/.test(input)) throw badRequest(`${field}: must not contain line breaks`);
  const parsed = addressparser(input, { flatten: true });
  if (parsed.length !== 1 || !parsed[0]!.address) throw badRequest(`${field}: "${input}" is not a single valid email address`);
  const { name, address } = parsed[0] as { name: string; address: string };
  // addressparser is lenient: of `Evil <x@evil.com> <victim@example.net>` it takes the first
  // angle-addr and folds the rest into the name, of `victim@example.net junk x@evil.com` the
  // last address-looking word, and it drops characters it cannot place (a NUL in a quoted
  // local part). A display name built from user input could then pick the recipient. So the
  // address it found must be exactly the one the input holds where a mailbox puts it.
  const spec = addrSpecOf(input);
  if (spec === null || unquoted(spec) !== unquoted(address)) throw badRequest(`${field}: "${input}" is not a single valid email address`);
  if (!isValidAddress(address)) throw badRequest(`${field}: "${address}" is not a valid email address`);
  return { name, address: normalizeAddress(address) };
}

/** A string or array of addresses (each may carry a display name) to a list of mailboxes. */
export function parseMailboxList(input: string | string[] | null | undefined, field: string): Mailbox[] {
  if (input === undefined || input === null) return [];
  const list = Array.isArray(input) ? input : [input];
  return list.map((item, i) => parseMailbox(item, Array.isArray(input) ? `${field}[${i}]` : field));
}

/** Formats a mailbox for a header; nodemailer encodes the display name. */
export function formatMailbox(m: Mailbox): string {
  if (!m.name) return m.address;
  // RFC 5322 3.2.5: a phrase of atext words needs no quotes; anything else is quoted.
  const plain = /^[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~ ]+$/.test(m.name) && !/^ | $|  /.test(m.name);
  return plain ? `${m.name} <${m.address}>` : `"${m.name.replace(/["\\]/g, '\\$&')}" <${m.address}>`;
}
