import { domainToASCII } from 'node:url';

/*
 * LIKE patterns (ESCAPE '\') for a text search over stored addresses: contacts.email and
 * suppressions.email, which hold the domain in A-labels (core/emails/addresses.ts, addressKey:
 * `ute@bücher.example` is stored `ute@xn--bcher-kva.example`). A search that writes the domain
 * in Unicode must find what the same search in A-labels finds (docs/api.md, "Searching
 * addresses"). Every search is evaluated here, when it runs, so saved segments and campaign
 * snapshots follow the rule without being rewritten.
 *
 * The rule. The term is always matched as typed. When it holds a domain with a non-ASCII label,
 * the term with that domain in A-labels is matched too, each converted label as a whole label:
 * - the domain is what follows the term's last `@`; without an `@`, a term with a dot is read
 *   as a domain or the tail of one (`bücher.example`, `.bücher.example`), and a term with
 *   neither is a fragment of a word (`bücher`) and is only matched as typed;
 * - a converted label is whole where the term bounds it (an `@` or a dot before it, a dot after
 *   it) and is taken as whole where the term ends: after it comes a dot or the end of the
 *   address, before it (without an `@` in the term) an `@` or a dot. So `@bücher` finds
 *   `@xn--bcher-kva.example` but not `@xn--bchershop-q9a.example`, and `bücher.example` finds
 *   `mail.bücher.example` but not `mybücher.example`: the A-label of part of a label is no part
 *   of the label's A-label, so a partial label cannot be found in the stored form;
 * - startsWith without an `@` is the start of a local part, never a domain: as typed only;
 * - a domain holding anything a stored domain cannot (a LIKE wildcard, a space) is not
 *   converted: it matches no stored domain in either form.
 * An ASCII term is one pattern, exactly the one it always was: A-labels are ASCII, so typed in
 * that form the term already matches the stored text.
 */

export type AddressMatchOp = 'contains' | 'startsWith' | 'endsWith';

const ASCII = /^[\x00-\x7f]*$/;
/** The label separators of UTS #46 (IDNA mapping): full stop, ideographic and full-width ones. */
const DOTS = /[.\u3002\uff0e\uff61]/g;
const HAS_DOT = /[.\u3002\uff0e\uff61]/;
/** What a domain may be written with: letters, marks, digits, hyphens and separators. */
const DOMAIN_TEXT = /^[\p{L}\p{M}\p{N}.\u3002\uff0e\uff61-]+$/u;
const A_LABEL = /^[a-z0-9-]+$/;

/** LIKE pattern text with the user's text taken literally (used with ESCAPE '\'). */
export function likeLiteral(value: string): string {
  return value.replace(/[\\%_]/g, (c) => `\\${c}`);
}

const OPEN = { contains: '%', startsWith: '', endsWith: '%' } as const;
const CLOSE = { contains: '%', startsWith: '%', endsWith: '' } as const;

/** The patterns a search for `term` over stored addresses matches (any of them), the term as typed first. */
export function addressLikePatterns(op: AddressMatchOp, term: string): string[] {
  const typed = `${OPEN[op]}${likeLiteral(term)}${CLOSE[op]}`;
  if (ASCII.test(term)) return [typed];
  const at = term.lastIndexOf('@');
  if (at < 0 && (op === 'startsWith' || !HAS_DOT.test(term))) return [typed];
  const domain = term.slice(at + 1);
  if (ASCII.test(domain) || !DOMAIN_TEXT.test(domain)) return [typed];
  const labels = domain.split(DOTS);
  const converted = (label: string) => !ASCII.test(label);
  // Each Unicode label converted on its own, as addressKey converts it (lowercased, UTS #46
  // mapped); an ASCII label is taken as typed. Not the domain as a whole: a term is often an
  // unfinished domain, and one ending in digits ('münchen.2026') is an IPv4 address to
  // domainToASCII, which refuses it. A label it refuses, or reads as something else (full-width
  // digits alone are an IPv4 address to it), leaves the term as typed.
  const ascii = labels.map((label) => (converted(label) ? domainToASCII(label) : label.toLowerCase()));
  if (ascii.some((a, i) => converted(labels[i]!) && !A_LABEL.test(a))) return [typed];
  const starts = at < 0 && converted(labels[0]!) ? ['%@', '%.'] : [OPEN[op]];
  const ends = op !== 'endsWith' && converted(labels[labels.length - 1]!) ? ['.%', ''] : [CLOSE[op]];
  const body = likeLiteral(term.slice(0, at + 1) + ascii.join('.'));
  return [...new Set([typed, ...starts.flatMap((s) => ends.map((e) => `${s}${body}${e}`))])];
}
