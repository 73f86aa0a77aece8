import { sql, type Expression, type ExpressionBuilder, type RawBuilder, type SqlBool } from 'kysely';
import type { Database } from '../tables/database.js';
import { likeIgnoringCase } from '../unicode-lower.js';
import { addressLikePatterns, likeLiteral, type AddressMatchOp } from './address-like-patterns.js';

/*
 * Segment filters compiled to one SQL boolean expression over `contacts` (docs/architecture.md,
 * "Segments"). Groups are built with Kysely's expression builder (eb.and / eb.or put every group
 * of two or more in parentheses) and the whole filter is wrapped once more, so no OR inside a
 * filter can ever reach past it and weaken the scope it is ANDed with. The few conditions that
 * need raw SQL (LIKE ... ESCAPE, GLOB) are parenthesised where they are written.
 *
 * The caller (core/segments) validates and normalises a filter before it gets here; this file
 * still refuses anything unexpected, because it is the last line before SQL. Every user value
 * is a bound parameter; property keys are checked against a strict pattern and travel as a
 * bound JSON path too, so no user string is ever spliced into the statement text.
 */

export const FILTER_OPS = ['eq', 'neq', 'contains', 'startsWith', 'endsWith', 'exists', 'notExists', 'in', 'gt', 'gte', 'lt', 'lte'] as const;
export type FilterOp = (typeof FILTER_OPS)[number];

/** Property keys usable in `properties.<key>`; the same pattern contact properties are held to. */
export const PROPERTY_KEY_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

export type FilterValue = string | number | boolean | string[];

export interface FilterCondition {
  /** email | firstName | lastName | subscribed | createdAt | properties.<key> */
  field: string;
  op: FilterOp;
  /** Absent for exists / notExists. Numbers only for gt/gte/lt/lte on properties (numeric compare). */
  value?: FilterValue;
}

export interface FilterGroup {
  match: 'all' | 'any';
  conditions: FilterNode[];
}

export type FilterNode = FilterCondition | FilterGroup;

export function isGroup(node: FilterNode): node is FilterGroup {
  return (node as FilterGroup).conditions !== undefined;
}

type ContactsEb = ExpressionBuilder<Database, 'contacts'>;
type Operand = Expression<unknown>;

/** The engine the expression is for: SQLite (json_extract, GLOB) or PostgreSQL (jsonb, regex). */
type Dialect = 'sqlite' | 'postgres';

const COLUMNS = {
  email: 'contacts.email',
  firstName: 'contacts.first_name',
  lastName: 'contacts.last_name',
  subscribed: 'contacts.subscribed',
  createdAt: 'contacts.created_at',
} as const;

/** A property key, checked against the pattern before it goes anywhere near SQL (bound even then). */
function propertyKey(field: string): string | null {
  if (!field.startsWith('properties.')) return null;
  const key = field.slice('properties.'.length);
  if (!PROPERTY_KEY_PATTERN.test(key)) throw new Error(`segment filter: invalid property key ${JSON.stringify(key)}`);
  return key;
}

function column(eb: ContactsEb, field: string, dialect: Dialect): Operand {
  if (Object.hasOwn(COLUMNS, field)) return eb.ref(COLUMNS[field as keyof typeof COLUMNS]);
  const key = propertyKey(field);
  if (key !== null) {
    // PostgreSQL: the value as text (null for a missing key or a JSON null), a JSON boolean as 1
    // or 0: what json_extract gives on SQLite, which text ops and numeric compares then read.
    if (dialect === 'postgres') {
      return sql`(case (contact_properties.p -> ${key}) when 'true'::jsonb then '1' when 'false'::jsonb then '0' else contact_properties.p ->> ${key} end)`;
    }
    // The quoted JSON path member makes keys such as "a-b" work; the path itself is bound.
    return eb.fn('json_extract', [eb.ref('contacts.properties_json'), eb.val(`$."${key}"`)]);
  }
  throw new Error(`segment filter: unknown field ${JSON.stringify(field)}`);
}

/**
 * PostgreSQL: a property compared as JSON, so a string matches only a string and a number only a
 * number, as json_extract's typed values compare on SQLite.
 */
function pgJsonEquals(field: string, value: string | number): RawBuilder<SqlBool> {
  const key = propertyKey(field)!;
  const json = typeof value === 'number' ? sql`to_jsonb(${value}::numeric)` : sql`to_jsonb(${value}::text)`;
  return sql<SqlBool>`((contact_properties.p -> ${key}) = ${json})`;
}

/**
 * PostgreSQL: a property equal to any of `values` (strings, as the validator keeps them) in one
 * read of the property per contact. Spelled as an OR of pgJsonEquals, each value parsed the
 * contact's JSON again: a filter's ten thousand `in` values made ten thousand parses per
 * contact, minutes for a book of a few thousand. A JSON string only, as json_extract's text is
 * on SQLite (a JSON number 5 is not "5"); compared bytewise, as `=` on text is.
 */
function pgJsonIn(field: string, values: readonly (string | number)[]): Expression<SqlBool> {
  const key = propertyKey(field)!;
  const texts = values.filter((v): v is string => typeof v === 'string');
  const others = values.filter((v): v is number => typeof v === 'number').map((v) => pgJsonEquals(field, v));
  const anyText = sql<SqlBool>`(jsonb_typeof(contact_properties.p -> ${key}) = 'string' and (contact_properties.p ->> ${key}) collate "C" = any(${texts}::text[]))`;
  return others.length === 0 ? anyText : sql<SqlBool>`(${sql.join([anyText, ...others], sql` or `)})`;
}

function scalar(field: string, value: FilterValue | undefined): string | number {
  if (field === 'subscribed') {
    if (typeof value !== 'boolean') throw new Error('segment filter: subscribed needs a boolean');
    return value ? 1 : 0;
  }
  if (typeof value === 'string' || typeof value === 'number') return value;
  throw new Error(`segment filter: ${field} needs a string or number value`);
}

function text(value: FilterValue | undefined): string {
  if (typeof value !== 'string') throw new Error('segment filter: expected a string value');
  return value;
}

/**
 * contains/startsWith/endsWith ignore case in every alphabet, alike on both engines (unicode-lower.ts;
 * lowering leaves `%`, `_` and the backslash as they are, so the escapes hold).
 */
const like = (col: Operand, pattern: string, dialect: Dialect) => likeIgnoringCase(dialect, col, pattern);

const TEXT_PATTERN = { contains: (v: string) => `%${v}%`, startsWith: (v: string) => `${v}%`, endsWith: (v: string) => `%${v}` } as const;

/**
 * A text op's match. On email, an internationalised domain typed in Unicode also matches its
 * stored A-labels (address-like-patterns.ts): any of a few patterns, one for an ASCII term.
 */
function textMatch(eb: ContactsEb, col: Operand, field: string, op: AddressMatchOp, value: string, dialect: Dialect): Expression<SqlBool> {
  const patterns = field === 'email' ? addressLikePatterns(op, value) : [TEXT_PATTERN[op](likeLiteral(value))];
  return patterns.length === 1 ? like(col, patterns[0]!, dialect) : eb.or(patterns.map((p) => like(col, p, dialect)));
}

// A stored property value that reads as a number: only digits, sign and decimal point, with
// at least one digit. Without this guard CAST('abc' AS REAL) would compare as 0.
const numericGuard = (col: Operand) => sql<SqlBool>`(${col} not glob '*[^0-9.+-]*' and ${col} glob '*[0-9]*')`;

/**
 * PostgreSQL: the property read as a number the way SQLite does it (the same guard, then the
 * longest numeric prefix, as CAST(text AS REAL)); null when the guard fails, so a cast never
 * sees text it would refuse.
 */
const pgNumber = (col: Operand) =>
  sql`(case when ${col} ~ '^[0-9.+-]*$' and ${col} ~ '[0-9]' then coalesce(${pgDouble(sql`substring(${col} from '^[+-]?(?:[0-9]+[.]?[0-9]*|[.][0-9]+)')`)}, 0) end)`;

/**
 * A decimal numeral as a double, as SQLite reads it: beyond the largest double it is infinity,
 * nearer zero than the smallest it is zero. PostgreSQL's float8 refuses both ("out of range"),
 * which made a segment over a property of 400 digits a 500. A numeral of at most 308
 * characters is within range whatever it says, so only a longer one takes the exact numeric
 * detour (a value holds at most 2000 characters, well inside numeric's range).
 */
const pgDouble = (numeral: RawBuilder<unknown>) =>
  sql`(case when length(${numeral}) <= 308 then (${numeral})::float8 else (select case when v > 1.7976931348623158e308 then 'Infinity'::float8 when v < -1.7976931348623158e308 then '-Infinity'::float8 when abs(v) < 2.4703282292062328e-324 then 0 else v::float8 end from (select (${numeral})::numeric as v) as n) end)`;

const COMPARATORS = { gt: '>', gte: '>=', lt: '<', lte: '<=' } as const;
type Comparator = (typeof COMPARATORS)[keyof typeof COMPARATORS];

/**
 * PostgreSQL: a property ordered against a string as json_extract's typed value is on SQLite. A
 * JSON string compares by bytes (collate "C": code point order in UTF-8, SQLite's BINARY), not
 * under the database's default collation, which `->>` text would take; a JSON number or boolean
 * (SQLite: a number) sorts before any text, so gt/gte never and lt/lte always hold; a JSON null
 * or a missing key never matches.
 */
function pgTextOrder(field: string, operator: Comparator, value: string): RawBuilder<SqlBool> {
  const key = propertyKey(field)!;
  const numberOrBoolean = operator === '<' || operator === '<=' ? sql`true` : sql`false`;
  return sql<SqlBool>`(case jsonb_typeof(contact_properties.p -> ${key}) when 'number' then ${numberOrBoolean} when 'boolean' then ${numberOrBoolean} else (contact_properties.p ->> ${key}) collate "C" ${sql.raw(operator)} ${value} end)`;
}

function condition(eb: ContactsEb, c: FilterCondition, dialect: Dialect): Expression<SqlBool> {
  const col = column(eb, c.field, dialect);
  const pgProperty = dialect === 'postgres' && c.field.startsWith('properties.');
  switch (c.op) {
    case 'eq':
      if (pgProperty) return pgJsonEquals(c.field, scalar(c.field, c.value));
      return eb(col, '=', scalar(c.field, c.value));
    case 'neq':
      // A contact with no value does match "not equal to x".
      if (pgProperty) return eb.or([eb(col, 'is', null), eb.not(pgJsonEquals(c.field, scalar(c.field, c.value)))]);
      return eb.or([eb(col, 'is', null), eb(col, '!=', scalar(c.field, c.value))]);
    case 'contains':
    case 'startsWith':
    case 'endsWith':
      return textMatch(eb, col, c.field, c.op, text(c.value), dialect);
    case 'exists':
      return eb.and([eb(col, 'is not', null), eb(col, '!=', '')]);
    case 'notExists':
      return eb.or([eb(col, 'is', null), eb(col, '=', '')]);
    case 'in': {
      const values = c.value;
      if (!Array.isArray(values) || values.length === 0) throw new Error('segment filter: in needs a non-empty array');
      if (pgProperty) return pgJsonIn(c.field, values);
      return eb(col, 'in', values);
    }
    case 'gt':
    case 'gte':
    case 'lt':
    case 'lte': {
      const operator = COMPARATORS[c.op];
      // A numeral past a double's range, which older servers stored as JSON's null (now a 400):
      // nothing to compare with, so the condition matches nobody rather than failing every read.
      if (c.value === null && c.field.startsWith('properties.')) return sql<SqlBool>`1 = 0`;
      const value = scalar(c.field, c.value);
      if (typeof value === 'number' && c.field.startsWith('properties.')) {
        if (dialect === 'postgres') return eb(pgNumber(col), operator, value);
        return eb.and([numericGuard(col), eb(eb.cast(col, 'real'), operator, value)]);
      }
      if (pgProperty) return pgTextOrder(c.field, operator, value as string);
      return eb(col, operator, value);
    }
    default:
      throw new Error(`segment filter: unknown operator ${JSON.stringify((c as { op: unknown }).op)}`);
  }
}

function node(eb: ContactsEb, n: FilterNode, dialect: Dialect): Expression<SqlBool> {
  if (!isGroup(n)) return condition(eb, n, dialect);
  // eb.and([]) is 1 = 1 and eb.or([]) is 1 = 0: `all` of nothing is true, `any` of nothing false.
  const parts = n.conditions.map((child) => node(eb, child, dialect));
  return n.match === 'all' ? eb.and(parts) : eb.or(parts);
}

/**
 * A validated filter tree as one parenthesised boolean expression over `contacts`. Use it
 * only through `contactsInBook` (contacts-scope.ts), which ANDs it with the team and book.
 */
export function contactFilterExpression(eb: ContactsEb, filter: FilterNode, dialect: Dialect = 'sqlite'): Expression<SqlBool> {
  const expression = eb.parens(node(eb, filter, dialect));
  if (dialect !== 'postgres' || !readsProperties(filter)) return expression;
  // PostgreSQL: the contact's properties (a text column) parsed as JSON once per row, not once per
  // condition: a filter of 100 conditions over 100 properties of 2,000 characters parsed 20 MB
  // per contact, minutes for a book of a few hundred. OFFSET 0 keeps the planner from folding
  // the subquery away (it would put the cast back into every reference). The filter stays in
  // the WHERE clause, so `selectAll()` is still `contacts.*` and counts are unchanged.
  return sql<SqlBool>`exists (select 1 from (select contacts.properties_json::jsonb as p offset 0) as contact_properties where ${expression})`;
}

function readsProperties(n: FilterNode): boolean {
  return isGroup(n) ? n.conditions.some(readsProperties) : n.field.startsWith('properties.');
}
