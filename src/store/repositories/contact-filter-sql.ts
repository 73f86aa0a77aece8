import { sql, type RawBuilder, type SqlBool } from 'kysely';

/*
 * Segment filters compiled to one SQL boolean expression over `contacts` (DESIGN 4, Segments).
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

const COLUMNS: Record<string, string> = {
  email: 'contacts.email',
  firstName: 'contacts.first_name',
  lastName: 'contacts.last_name',
  subscribed: 'contacts.subscribed',
  createdAt: 'contacts.created_at',
};

function column(field: string): RawBuilder<unknown> {
  const known = COLUMNS[field];
  if (known) return sql.ref(known);
  if (field.startsWith('properties.')) {
    const key = field.slice('properties.'.length);
    if (!PROPERTY_KEY_PATTERN.test(key)) throw new Error(`segment filter: invalid property key ${JSON.stringify(key)}`);
    // The quoted JSON path member makes keys such as "a-b" work; the path itself is bound.
    return sql`json_extract(${sql.ref('contacts.properties_json')}, ${`$."${key}"`})`;
  }
  throw new Error(`segment filter: unknown field ${JSON.stringify(field)}`);
}

/** LIKE pattern with the user's text taken literally (used with ESCAPE '\'). */
function likeLiteral(value: string): string {
  return value.replace(/[\\%_]/g, (c) => `\\${c}`);
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

// A stored property value that reads as a number: only digits, sign and decimal point, with
// at least one digit. Without this guard CAST('abc' AS REAL) would compare as 0.
const numericGuard = (col: RawBuilder<unknown>) => sql`(${col} not glob '*[^0-9.+-]*' and ${col} glob '*[0-9]*')`;

const COMPARATORS = { gt: '>', gte: '>=', lt: '<', lte: '<=' } as const;

function compileCondition(c: FilterCondition): RawBuilder<SqlBool> {
  const col = column(c.field);
  switch (c.op) {
    case 'eq':
      return sql<SqlBool>`${col} = ${scalar(c.field, c.value)}`;
    case 'neq':
      // "is not" is null-safe: a contact with no value does match "not equal to x".
      return sql<SqlBool>`${col} is not ${scalar(c.field, c.value)}`;
    case 'contains':
      return sql<SqlBool>`${col} like ${`%${likeLiteral(text(c.value))}%`} escape '\\'`;
    case 'startsWith':
      return sql<SqlBool>`${col} like ${`${likeLiteral(text(c.value))}%`} escape '\\'`;
    case 'endsWith':
      return sql<SqlBool>`${col} like ${`%${likeLiteral(text(c.value))}`} escape '\\'`;
    case 'exists':
      return sql<SqlBool>`(${col} is not null and ${col} != '')`;
    case 'notExists':
      return sql<SqlBool>`(${col} is null or ${col} = '')`;
    case 'in': {
      const values = c.value;
      if (!Array.isArray(values) || values.length === 0) throw new Error('segment filter: in needs a non-empty array');
      return sql<SqlBool>`${col} in (${sql.join(values.map((v) => sql`${v}`))})`;
    }
    case 'gt':
    case 'gte':
    case 'lt':
    case 'lte': {
      const operator = sql.raw(COMPARATORS[c.op]);
      const value = scalar(c.field, c.value);
      if (typeof value === 'number' && c.field.startsWith('properties.')) {
        return sql<SqlBool>`(${numericGuard(col)} and cast(${col} as real) ${operator} ${value})`;
      }
      return sql<SqlBool>`${col} ${operator} ${value}`;
    }
    default:
      throw new Error(`segment filter: unknown operator ${JSON.stringify((c as { op: unknown }).op)}`);
  }
}

/** Compiles a validated filter tree; `all` of nothing is true, `any` of nothing is false. */
export function compileContactFilter(node: FilterNode): RawBuilder<SqlBool> {
  if (!isGroup(node)) return compileCondition(node);
  if (node.conditions.length === 0) return node.match === 'all' ? sql<SqlBool>`1 = 1` : sql<SqlBool>`1 = 0`;
  const parts = node.conditions.map((child) => sql`(${compileContactFilter(child)})`);
  return sql<SqlBool>`${sql.join(parts, sql.raw(node.match === 'all' ? ' and ' : ' or '))}`;
}
