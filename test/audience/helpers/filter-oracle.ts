import fc from 'fast-check';

/*
 * An in-memory reading of segment filters, written from the filter table in
 * core/segments/segment-filters.ts and SQLite's rules (NULL compares false, text compares by code
 * point, CAST(text AS REAL) reads the longest numeric prefix; a property is json_extract's typed
 * value: a JSON number stays a number, a boolean reads as 1 or 0, and a number sorts before any
 * text and never equals one) and ours (contains, startsWith and endsWith compare text lowered as
 * JavaScript lowers it, store/unicode-lower.ts), and fast-check arbitraries for filter trees and
 * contacts. The property tests compare what the store selects with what this oracle selects.
 *
 * Email addresses are stored with an internationalised domain in A-labels. The oracle knows the
 * A-label of every label a generated domain holds from its own table (IDN_LABELS), not from the
 * code that converts them, and reads email searches by docs/api.md, "Searching addresses"
 * (emailSearch below).
 */

export interface OracleContact {
  id: string;
  email: string;
  firstName: string | null;
  lastName: string | null;
  subscribed: boolean;
  createdAt: string;
  /** Strings through the API; a number, boolean or null only written into the store directly. */
  properties: Record<string, PropertyValue>;
}

export type PropertyValue = string | number | boolean | null;

export interface Cond {
  field: string;
  op: string;
  value?: unknown;
}
export interface Group {
  match: 'all' | 'any';
  conditions: (Cond | Group)[];
}

const isGroup = (n: Cond | Group): n is Group => (n as Group).conditions !== undefined;
/** As store/unicode-lower.ts lowers: JavaScript's lowercase, the final sigma folded to sigma. */
const lower = (s: string) => s.toLowerCase().replaceAll('ς', 'σ');

function valueOf(c: OracleContact, field: string): string | number | null {
  switch (field) {
    case 'email':
      return c.email;
    case 'firstName':
      return c.firstName;
    case 'lastName':
      return c.lastName;
    case 'subscribed':
      return c.subscribed ? 1 : 0;
    case 'createdAt':
      return c.createdAt;
  }
  const key = field.slice('properties.'.length);
  const v = Object.hasOwn(c.properties, key) ? c.properties[key]! : null;
  return typeof v === 'boolean' ? (v ? 1 : 0) : v;
}

/** SQLite's CAST(text AS REAL): the longest prefix that reads as a number, else 0. */
function castReal(s: string): number {
  const m = /^[+-]?(?:\d+\.?\d*|\.\d+)/.exec(s);
  return m ? Number(m[0]) : 0;
}

/** SQLite's order: numbers by value, a number before any text, text by code point (UTF-8 bytes). */
function order(a: string | number, b: string | number): number {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'number') return -1;
  if (typeof b === 'number') return 1;
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

function compare(a: string | number, op: string, b: string | number): boolean {
  const o = order(a, b);
  switch (op) {
    case 'gt':
      return o > 0;
    case 'gte':
      return o >= 0;
    case 'lt':
      return o < 0;
    default:
      return o <= 0;
  }
}

function condition(c: OracleContact, n: Cond): boolean {
  const v = valueOf(c, n.field);
  const want = n.field === 'subscribed' ? (n.value ? 1 : 0) : (n.value as string | number | string[] | undefined);
  switch (n.op) {
    case 'eq':
      return v !== null && v === want;
    case 'neq':
      return v === null || v !== want;
    case 'contains':
    case 'startsWith':
    case 'endsWith':
      if (v === null) return false;
      if (n.field === 'email') return emailSearch(n.op, String(v), String(want));
      return textSearch(n.op, lower(String(v)), lower(String(want)));
    case 'exists':
      return v !== null && v !== '';
    case 'notExists':
      return v === null || v === '';
    case 'in':
      return typeof v === 'string' && (want as string[]).includes(v);
    default: {
      if (v === null) return false;
      if (typeof want === 'number' && n.field.startsWith('properties.')) {
        const s = String(v);
        if (!/^[0-9.+-]*$/.test(s) || !/[0-9]/.test(s)) return false;
        return compare(castReal(s), n.op, want);
      }
      return compare(v, n.op, want as string);
    }
  }
}

function textSearch(op: 'contains' | 'startsWith' | 'endsWith', v: string, term: string): boolean {
  return op === 'contains' ? v.includes(term) : op === 'startsWith' ? v.startsWith(term) : v.endsWith(term);
}

// ---- internationalised domains ------------------------------------------------------------

/** Every non-ASCII label a generated domain holds, lowercased, with its A-label (RFC 3492, written out by hand). */
export const IDN_LABELS: Readonly<Record<string, string>> = {
  bücher: 'xn--bcher-kva',
  büchershop: 'xn--bchershop-q9a',
  mybücher: 'xn--mybcher-p2a',
  büücher: 'xn--bcher-kvaa',
  münchen: 'xn--mnchen-3ya',
  例え: 'xn--r8jz45g',
  テスト: 'xn--zckzah',
  // Devanagari: vowel signs and the virama are combining marks (\p{M}).
  उदाहरण: 'xn--p1b6ci4b4b3a',
  परीक्षा: 'xn--11b5bs3a9aj6g',
};
const UNICODE_OF: Record<string, string> = Object.fromEntries(Object.entries(IDN_LABELS).map(([u, a]) => [a, u]));
const isAscii = (s: string) => /^[\x00-\x7f]*$/.test(s);
/** What a domain can be written with: letters, marks, digits, hyphens and dots (no '%', '_' or space). */
const DOMAIN_TEXT = /^[\p{L}\p{M}\p{N}.\u3002\uff0e\uff61-]+$/u;

/**
 * A label's A-label: itself when ASCII, from the table when known, else null. An unknown label's
 * A-label is no label of any generated domain (the conversion is one to one), so null stands
 * for "matches no stored label".
 */
const aLabel = (label: string): string | null => {
  if (isAscii(label)) return label;
  // Read as IDNA maps a label (UTS #46): width and composition do not count, nor case.
  const mapped = label.normalize('NFKC').toLowerCase();
  return isAscii(mapped) ? mapped : (IDN_LABELS[mapped] ?? null);
};
/** The label separators a search term may use (UTS #46): the full stop, and the ideographic and full-width ones. */
const DOTS = /[.\u3002\uff0e\uff61]/;

/** The address as the store keys it: lowercased, the domain in A-labels; null when no generated address can have that key. */
export function storedAddress(address: string): string | null {
  // A capital Σ in the domain is σ (IDNA maps it so; toLowerCase would make a final one ς).
  const trimmed = address.trim();
  const key = `${trimmed.slice(0, trimmed.lastIndexOf('@') + 1)}${trimmed.slice(trimmed.lastIndexOf('@') + 1).replaceAll('Σ', 'σ')}`.toLowerCase();
  const at = key.lastIndexOf('@');
  if (at < 0 || isAscii(key.slice(at + 1))) return key;
  // A non-ASCII domain holding what no domain can, or ending in a label of digits, is no contact's.
  if (!DOMAIN_TEXT.test(key.slice(at + 1)) || /(?:^|[.\u3002\uff0e\uff61])[0-9]+[.\u3002\uff0e\uff61]?$/.test(key.slice(at + 1))) return null;
  const labels = key.slice(at + 1).split(DOTS).map(aLabel);
  return labels.includes(null) ? null : `${key.slice(0, at + 1)}${labels.join('.')}`;
}

/** The same address with each A-label of its domain written in Unicode (the local part as given). */
export function unicodeAddress(address: string): string {
  const at = address.lastIndexOf('@');
  return `${address.slice(0, at + 1)}${address.slice(at + 1).split('.').map((l) => UNICODE_OF[l.toLowerCase()] ?? l).join('.')}`;
}

/**
 * docs/api.md, "Searching addresses", read on its own words: the term always matches as typed
 * (case ignored). When it holds a domain (after its last '@'; without an '@', a term with a dot,
 * except for startsWith) that has a non-ASCII label and only what a domain can hold, the term with
 * that domain in A-labels matches too, each Unicode label as a whole label: bounded by the '@' or
 * dots the term has, and where the term stops, the stored label must stop too (an '@' or dot
 * before the first, a dot or the address's end after the last).
 */
function emailSearch(op: 'contains' | 'startsWith' | 'endsWith', stored: string, rawTerm: string): boolean {
  const v = lower(stored);
  const term = lower(rawTerm);
  if (textSearch(op, v, term)) return true;
  if (isAscii(term)) return false;
  const at = term.lastIndexOf('@');
  if (at < 0 && (op === 'startsWith' || !DOTS.test(term))) return false;
  const prefix = term.slice(0, at + 1);
  // The domain as IDNA sees it: lowercased, a typed final sigma kept (it is another label than
  // σ's), a capital Σ mapped to σ wherever it stands.
  const domain = rawTerm.replaceAll('Σ', 'σ').toLowerCase().slice(at + 1);
  if (isAscii(domain) || !DOMAIN_TEXT.test(domain)) return false;
  const labels = domain.split(DOTS);
  const converted = labels.map(aLabel);
  if (converted.includes(null)) return false;
  const body = prefix + converted.join('.');
  const firstWhole = at < 0 && !isAscii(labels[0]!);
  const lastWhole = !isAscii(labels[labels.length - 1]!);
  const fits = (i: number) => {
    if (i < 0 || v.slice(i, i + body.length) !== body) return false;
    if (firstWhole && !(i > 0 && (v[i - 1] === '@' || v[i - 1] === '.'))) return false;
    const end = i + body.length;
    return !lastWhole || end === v.length || v[end] === '.';
  };
  let found = false;
  if (op === 'startsWith') found = fits(0);
  else if (op === 'endsWith') found = fits(v.length - body.length);
  else for (let i = v.indexOf(body); i >= 0 && !found; i = v.indexOf(body, i + 1)) found = fits(i);
  if (found) idnStats.foundByALabels++;
  else if (v.includes(body)) idnStats.refusedAsPartial++;
  return found;
}

/** How often a contact was found only by a term's A-label form, and how often one held that form but not as whole labels: the property tests check the generator reaches both. */
export const idnStats = { foundByALabels: 0, refusedAsPartial: 0 };

/**
 * A filter as the API keeps it (docs/api.md, Segments): an email eq, neq or in value keyed as
 * addresses are (storedAddress; one no generated address can have is marked UNKNOWN_KEY), other
 * email text lowercased, an in list without repeats, a property's gt/gte/lt/lte value that is a plain number read as one.
 */
export function normalised(n: Group): Group;
export function normalised(n: Cond | Group): Cond | Group;
export function normalised(n: Cond | Group): Cond | Group {
  if (isGroup(n)) return { match: n.match, conditions: n.conditions.map((c) => normalised(c)) };
  if (n.field === 'email' && typeof n.value === 'string') return { ...n, value: n.op === 'eq' || n.op === 'neq' ? keyed(n.value) : n.value.toLowerCase() };
  if (Array.isArray(n.value)) return { ...n, value: [...new Set((n.value as string[]).map((v) => (n.field === 'email' ? keyed(v) : v)))] };
  if (n.field.startsWith('properties.') && ['gt', 'gte', 'lt', 'lte'].includes(n.op) && typeof n.value === 'string' && /^[+-]?(?:\d+\.?\d*|\.\d+)$/.test(n.value.trim())) return { ...n, value: Number(n.value.trim()) };
  return n;
}
/** An address no generated one can be keyed to carries a NUL first: the oracle equals it to no contact, and does not guess the store's spelling of it. */
export const UNKNOWN_KEY = '\u0000';
const keyed = (v: string) => storedAddress(v) ?? `${UNKNOWN_KEY}${v}`;

export function matches(c: OracleContact, n: Cond | Group): boolean {
  if (!isGroup(n)) return condition(c, n);
  return n.match === 'all' ? n.conditions.every((x) => matches(c, x)) : n.conditions.some((x) => matches(c, x));
}

// ---- data -------------------------------------------------------------------------------

export const LOCALS = ['bee', 'bob', 'ann', 'a_b', 'a%b', 'zed', 'Mixed', 'x1', '10', '9'];
/** Domains as contacts are added with them: ASCII, Unicode in any case, already in A-labels, a name under an IDN label. */
export const RECIPIENT_DOMAINS = [
  'example.net',
  'example.org',
  'example.net',
  'example.org',
  'bücher.example',
  'BÜCHER.Example',
  'xn--bcher-kva.example',
  'büchershop.example',
  'mybücher.example',
  // Labels whose ASCII holds an A-label's text, not at a label's edge: found only by that text typed.
  'büücher.example',
  'mail-xn--bcher-kva.example',
  'mail.bücher.example',
  'münchen.example',
  'shop.MÜNCHEN.example',
  // A label of digits after an IDN label: 'münchen.2026' reads as a domain's start, not an IPv4 address.
  'münchen.2026.example',
  '例え.テスト',
  'उदाहरण.परीक्षा',
  'bu\u0308cher.example',
];
/** The stored domains: each generated domain keyed by the oracle's own table. */
export const STORED_DOMAINS = [...new Set(RECIPIENT_DOMAINS.map((d) => storedAddress(`@${d}`)!.slice(1)))];
/** Searches on email beside the pool's words: Unicode and A-label spellings, partial labels, terms across the '@', LIKE wildcards beside an IDN. */
const EMAIL_TERMS = [
  'bücher.example',
  'BÜCHER.EXAMPLE',
  'xn--bcher-kva.example',
  '@bücher',
  '@Bücher.example',
  '@büch',
  'büch',
  'bücher',
  'bücher.',
  '.bücher.example',
  'mail.bücher',
  'ücher.example',
  'büchershop',
  '@büchershop.example',
  'mybücher.example',
  'xn--bch',
  'kva.example',
  'münchen',
  '@münchen.example',
  'münchen.example',
  '.münchen.example',
  'shop.münchen',
  'münchen.2026',
  '@münchen.20',
  'münchen.2026.',
  '.münchen.2026.example',
  'ünchen.example',
  '例え.テスト',
  '@例え',
  '例え.',
  '.テスト',
  'テスト',
  '.xn--zckzah',
  'उदाहरण.परीक्षा',
  '@उदाहरण',
  'परीक्षा',
  '.परीक्षा',
  'bu\u0308cher.example',
  // Other spellings IDNA reads as the same labels: the ideographic and full-width stops, full-width letters.
  '例え。テスト',
  '@例え。テスト',
  '例え。',
  'bücher．example',
  'ＢÜＣＨＥＲ.example',
  '@ｍüｎｃｈｅｎ',
  'ｅｘａｍｐｌｅ.net',
  '%bücher.example',
  'bü_her.example',
  '@bücher.%',
  'ü.example',
];
export const NAMES = ['Bee', 'bee', 'BEE', 'Bob', 'Ánn', 'ánn', 'ÁNN', 'x%y', 'x_y', '10', '9', 'abc', 'Zed', ' '];
export const PROPERTY_KEYS = ['plan', 'age', 'a-b'];
export const PROPERTY_VALUES = ['pro', 'Pro', 'free', '10', '9', '100', '-5', '1.5', '.5', '5.', '1-2', '+', '1.2.3', 'abc', '', 'x%y'];
/** Values the API never stores (it keeps every property as text), written into the store directly. */
export const TYPED_PROPERTY_VALUES: PropertyValue[] = [42, -5, 10, 1.5, 0.5, true, false, null];
/**
 * Text that properties are ordered against (gt/gte/lt/lte): case and accents order differently by
 * code point ("B" < "Pro" < "a" < "é") than under a language's collation ("a" < "B" < "é" < "Pro"),
 * and punctuation and digits sort before letters but after nothing typed.
 */
const ORDER_TEXT = ['b', 'B', 'pro', 'Pro', 'free', 'Free', 'Z', 'z', 'é', 'É', 'true', 'false', '-', '', 'abc', 'ABC', '1-2', '_'];

/** A deterministic contact list: every field drawn from the small pools, so filters match often. */
export function contactSet(seed: number, count: number): { email: string; firstName?: string; lastName?: string; subscribed: boolean; properties: Record<string, string> }[] {
  let s = seed >>> 0;
  const next = (n: number) => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s % n;
  };
  const pick = <T>(xs: readonly T[]) => xs[next(xs.length)]!;
  const out = [];
  const seen = new Set<string>();
  while (out.length < count) {
    const email = `${pick(LOCALS)}${next(50)}@${pick(RECIPIENT_DOMAINS)}`;
    if (seen.has(storedAddress(email)!)) continue;
    seen.add(storedAddress(email)!);
    const properties: Record<string, string> = {};
    for (const k of PROPERTY_KEYS) if (next(3) > 0) properties[k] = pick(PROPERTY_VALUES);
    const c: { email: string; firstName?: string; lastName?: string; subscribed: boolean; properties: Record<string, string> } = { email, subscribed: next(5) > 0, properties };
    if (next(4) > 0) c.firstName = pick(NAMES);
    if (next(3) > 0) c.lastName = pick(NAMES);
    out.push(c);
  }
  return out;
}

// ---- filter trees -----------------------------------------------------------------------

const TEXT_OPS = ['eq', 'neq', 'contains', 'startsWith', 'endsWith', 'exists', 'notExists', 'in', 'gt', 'gte', 'lt', 'lte'] as const;
const DATE_OPS = ['eq', 'neq', 'gt', 'gte', 'lt', 'lte'] as const;
const EMAIL_OPS = ['contains', 'contains', 'startsWith', 'startsWith', 'endsWith', 'endsWith', 'eq', 'neq', 'in'] as const;

/**
 * Every spelling of the given (stored) addresses: as stored, with the domain in Unicode, and
 * each of those in upper case; whole ones are eq/neq/in values, and any part of one (across the
 * '@', part of a label) a contains/startsWith/endsWith term.
 */
export function addressSpellings(stored: string[]): string[] {
  return [...new Set(stored.flatMap((a) => [a, unicodeAddress(a)]).flatMap((a) => [a, a.toUpperCase()]))];
}

function textValueArb(addresses: string[]) {
  // Any part, or one cut where a label or the local part starts or ends (with its '@' or dot, or without).
  const anyPart = (a: string) => fc.tuple(fc.nat(a.length - 1), fc.nat(a.length - 1)).map(([i, j]) => a.slice(Math.min(i, j), Math.max(i, j) + 1));
  const edges = (a: string) => [...new Set([0, a.length, ...[...a].flatMap((c, i) => (c === '@' || c === '.' ? [i, i + 1] : []))])];
  const cutPart = (a: string) => fc.tuple(fc.constantFrom(...edges(a)), fc.constantFrom(...edges(a))).map(([i, j]) => a.slice(Math.min(i, j), Math.max(i, j)) || a);
  const partOf = (a: string) => fc.oneof(anyPart(a), { weight: 2, arbitrary: cutPart(a) });
  return (field: string, whole: boolean) => {
    const pool = field === 'email' ? [...LOCALS, ...RECIPIENT_DOMAINS, ...EMAIL_TERMS, '@', '.net', 'b'] : field.startsWith('properties.') ? PROPERTY_VALUES : NAMES;
    const random = fc.string({ minLength: 1, maxLength: 3, unit: fc.constantFrom('a', 'B', '1', '%', '_', '.', '-', 'é', 'Á') });
    if (field !== 'email' || !addresses.length) return fc.oneof(fc.constantFrom(...pool), random);
    const address = fc.constantFrom(...addresses);
    if (whole) return fc.oneof(fc.constantFrom(...pool), random, { weight: 2, arbitrary: address });
    const unicode = addresses.filter((a) => !/^[\x00-\x7f]*$/.test(a));
    const parts = [{ weight: 2, arbitrary: address.chain(partOf) }, ...(unicode.length ? [{ weight: 4, arbitrary: fc.constantFrom(...unicode).chain(partOf) }] : [])];
    return fc.oneof(fc.constantFrom(...pool), random, { weight: 2, arbitrary: fc.constantFrom(...EMAIL_TERMS) }, ...parts);
  };
}

function conditionArb(createdAts: string[], addresses: string[]): fc.Arbitrary<Cond> {
  const textValue = textValueArb(addresses);
  // Email also draws its searches, eq and in again: they are where a domain's two spellings meet.
  const textField = (field: string) =>
    fc.constantFrom(...TEXT_OPS, ...(field === 'email' ? EMAIL_OPS : [])).chain((op): fc.Arbitrary<Cond> => {
      if (op === 'exists' || op === 'notExists') return fc.constant({ field, op });
      if (op === 'in') return fc.array(textValue(field, true), { minLength: 1, maxLength: 4 }).map((value) => ({ field, op, value }));
      const num = field.startsWith('properties.') && (op === 'gt' || op === 'gte' || op === 'lt' || op === 'lte');
      // contains/startsWith/endsWith refuse an empty value (400).
      const search = op === 'contains' || op === 'startsWith' || op === 'endsWith';
      const text = search ? textValue(field, false).filter((v) => v !== '') : textValue(field, true);
      const value = num ? fc.oneof(text, fc.constantFrom(...ORDER_TEXT), fc.constantFrom(0, 5, 9, 10, 50, -5, 1.5, 0.5)) : text;
      return fc.record({ field: fc.constant(field), op: fc.constant(op), value }) as fc.Arbitrary<Cond>;
    });
  return fc.oneof(
    { weight: 3, arbitrary: textField('email') },
    ...['firstName', 'lastName', ...PROPERTY_KEYS.map((k) => `properties.${k}`), 'properties.missing'].map(textField),
    fc.record({ field: fc.constant('subscribed'), op: fc.constantFrom('eq', 'neq'), value: fc.boolean() }),
    fc.record({ field: fc.constant('createdAt'), op: fc.constantFrom(...DATE_OPS), value: fc.constantFrom(...createdAts) }),
  );
}

/**
 * Random filter trees: any/all groups nested up to `maxDepth` levels (the API's limit is 5);
 * `addresses` (addressSpellings) give email values that name or cut the contacts' addresses.
 */
export function filterTreeArb(createdAts: string[], maxDepth = 5, addresses: string[] = []): fc.Arbitrary<Group> {
  const cond = conditionArb(createdAts, addresses);
  const group = (depth: number): fc.Arbitrary<Group> =>
    fc.record({
      match: fc.constantFrom('all' as const, 'any' as const),
      conditions: fc.array(depth >= maxDepth ? cond : fc.oneof({ weight: 3, arbitrary: cond }, { weight: 1, arbitrary: group(depth + 1) }), { minLength: 0, maxLength: 4 }),
    });
  return group(1);
}

/** Settings for every property test: a fixed seed in `npm test`, a larger run with POSTHORN_FC_SEED / POSTHORN_FC_RUNS. */
export function propertyParams(defaultRuns: number): { seed: number; numRuns: number } {
  const seed = process.env.POSTHORN_FC_SEED ? Number(process.env.POSTHORN_FC_SEED) : 20261125;
  const runs = process.env.POSTHORN_FC_RUNS ? Number(process.env.POSTHORN_FC_RUNS) : defaultRuns;
  return { seed, numRuns: runs };
}
