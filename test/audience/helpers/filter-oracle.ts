import fc from 'fast-check';

/*
 * An in-memory reading of segment filters, written from the filter table in
 * core/segments/segment-filters.ts and SQLite's rules (NULL compares false, text compares by code
 * point, CAST(text AS REAL) reads the longest numeric prefix; a property is json_extract's typed
 * value: a JSON number stays a number, a boolean reads as 1 or 0, and a number sorts before any
 * text and never equals one) and ours (contains, startsWith and endsWith compare text lowered as
 * JavaScript lowers it, store/unicode-lower.ts), and fast-check arbitraries for filter trees and
 * contacts. The property tests compare what the store selects with what this oracle selects.
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
      return v !== null && lower(String(v)).includes(lower(String(want)));
    case 'startsWith':
      return v !== null && lower(String(v)).startsWith(lower(String(want)));
    case 'endsWith':
      return v !== null && lower(String(v)).endsWith(lower(String(want)));
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

export function matches(c: OracleContact, n: Cond | Group): boolean {
  if (!isGroup(n)) return condition(c, n);
  return n.match === 'all' ? n.conditions.every((x) => matches(c, x)) : n.conditions.some((x) => matches(c, x));
}

// ---- data -------------------------------------------------------------------------------

export const LOCALS = ['bee', 'bob', 'ann', 'a_b', 'a%b', 'zed', 'Mixed', 'x1', '10', '9'];
export const RECIPIENT_DOMAINS = ['example.net', 'example.org'];
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
    if (seen.has(email.toLowerCase())) continue;
    seen.add(email.toLowerCase());
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

const textValue = (field: string) => {
  const pool = field === 'email' ? [...LOCALS, ...RECIPIENT_DOMAINS, '@', '.net', 'b'] : field.startsWith('properties.') ? PROPERTY_VALUES : NAMES;
  return fc.oneof(fc.constantFrom(...pool), fc.string({ minLength: 1, maxLength: 3, unit: fc.constantFrom('a', 'B', '1', '%', '_', '.', '-', 'é', 'Á') }));
};

function conditionArb(createdAts: string[]): fc.Arbitrary<Cond> {
  const textField = (field: string) =>
    fc.constantFrom(...TEXT_OPS).chain((op): fc.Arbitrary<Cond> => {
      if (op === 'exists' || op === 'notExists') return fc.constant({ field, op });
      if (op === 'in') return fc.array(textValue(field), { minLength: 1, maxLength: 4 }).map((value) => ({ field, op, value }));
      const num = field.startsWith('properties.') && (op === 'gt' || op === 'gte' || op === 'lt' || op === 'lte');
      // contains/startsWith/endsWith refuse an empty value (400).
      const text = op === 'contains' || op === 'startsWith' || op === 'endsWith' ? textValue(field).filter((v) => v !== '') : textValue(field);
      const value = num ? fc.oneof(text, fc.constantFrom(...ORDER_TEXT), fc.constantFrom(0, 5, 9, 10, 50, -5, 1.5, 0.5)) : text;
      return fc.record({ field: fc.constant(field), op: fc.constant(op), value }) as fc.Arbitrary<Cond>;
    });
  return fc.oneof(
    ...['email', 'firstName', 'lastName', ...PROPERTY_KEYS.map((k) => `properties.${k}`), 'properties.missing'].map(textField),
    fc.record({ field: fc.constant('subscribed'), op: fc.constantFrom('eq', 'neq'), value: fc.boolean() }),
    fc.record({ field: fc.constant('createdAt'), op: fc.constantFrom(...DATE_OPS), value: fc.constantFrom(...createdAts) }),
  );
}

/** Random filter trees: any/all groups nested up to `maxDepth` levels (the API's limit is 5). */
export function filterTreeArb(createdAts: string[], maxDepth = 5): fc.Arbitrary<Group> {
  const cond = conditionArb(createdAts);
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
