import {
  FILTER_OPS,
  PROPERTY_KEY_PATTERN,
  type FilterCondition,
  type FilterGroup,
  type FilterNode,
  type FilterOp,
} from '../../store/repositories/contact-filter-sql.js';
import { lowerAddressTerm, mailboxKey } from '../emails/addresses.js';
import { badRequest } from '../errors.js';

// The filter vocabulary is defined next to the SQL it compiles to; the API reads it from here.
export { FILTER_OPS, type FilterCondition, type FilterGroup, type FilterNode, type FilterOp };
import { hasFourDigitYear, parseIsoDateTime } from '../../lib/iso-date-time.js';

/*
 * Segment filters (architecture.md, Decisions: segments): {match: "all"|"any", conditions: [{field, op, value} | group]}.
 * Validated and normalised on write, so what is stored always compiles; every refusal is a 400
 * naming the condition by its path, e.g. "filters.conditions[1].conditions[0].op: ...".
 *
 * Field        ops                                         value
 * email        text ops                                    string (compared lowercased)
 * firstName    text ops                                    string
 * lastName     text ops                                    string
 * subscribed   eq, neq                                     boolean
 * createdAt    eq, neq, gt, gte, lt, lte                   ISO 8601 date or date-time
 * properties.k text ops                                    string or number; gt/gte/lt/lte with a
 *                                                          number compare numerically
 * text ops = eq, neq, contains, startsWith, endsWith, exists, notExists, in, gt, gte, lt, lte.
 * gt/gte/lt/lte with text order by code point (UTF-8 bytes) on both stores, whatever the
 * database's collation; a property holding a JSON number or boolean sorts before any text.
 * contains/startsWith/endsWith ignore case, in every alphabet (store/unicode-lower.ts), and on
 * email a domain typed in Unicode also matches its stored A-labels, as whole labels, when the
 * filter runs (store/repositories/address-like-patterns.ts); eq/in are exact; neq also matches a
 * missing value.
 */

export const MAX_FILTER_DEPTH = 5;
export const MAX_FILTER_CONDITIONS = 100;
/**
 * Groups and `in` values are bounded for the whole filter too, so that whatever is accepted
 * compiles to a statement the store can run: SQLite refuses more than 32766 bound values and
 * an expression nested past 1000 levels (which a long chain of groups, even empty ones, reaches),
 * and PostgreSQL more than 65535 parameters (a property's `in` binds two per value).
 */
export const MAX_FILTER_GROUPS = 100;
export const MAX_IN_VALUES = 1000;
export const MAX_FILTER_IN_VALUES = 10_000;
const MAX_TEXT_VALUE = 1000;

const TEXT_FIELDS = new Set(['email', 'firstName', 'lastName']);
const DATE_OPS = new Set<FilterOp>(['eq', 'neq', 'gt', 'gte', 'lt', 'lte']);
const ORDER_OPS = new Set<FilterOp>(['gt', 'gte', 'lt', 'lte']);
const PLAIN_NUMBER = /^[+-]?(?:\d+\.?\d*|\.\d+)$/;

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

class FilterValidator {
  private count = 0;
  private groups = 0;
  private inValues = 0;

  group(raw: unknown, path: string, depth: number): FilterGroup {
    if (!isObject(raw)) throw badRequest(`${path}: must be an object {match, conditions}`);
    if (depth > MAX_FILTER_DEPTH) throw badRequest(`${path}: groups nest at most ${MAX_FILTER_DEPTH} levels deep`);
    if (++this.groups > MAX_FILTER_GROUPS) throw badRequest(`${path}: a filter holds at most ${MAX_FILTER_GROUPS} groups`);
    for (const key of Object.keys(raw)) {
      if (key !== 'match' && key !== 'conditions') throw badRequest(`${path}: unknown key "${key}" (a group has match and conditions)`);
    }
    const match = raw.match ?? 'all';
    if (match !== 'all' && match !== 'any') throw badRequest(`${path}.match: must be "all" or "any"`);
    if (!Array.isArray(raw.conditions)) throw badRequest(`${path}.conditions: must be an array`);
    const conditions = raw.conditions.map((c, i) => this.node(c, `${path}.conditions[${i}]`, depth));
    return { match, conditions };
  }

  private node(raw: unknown, path: string, depth: number): FilterNode {
    if (isObject(raw) && 'conditions' in raw) return this.group(raw, path, depth + 1);
    if (++this.count > MAX_FILTER_CONDITIONS) throw badRequest(`${path}: a filter holds at most ${MAX_FILTER_CONDITIONS} conditions`);
    return this.condition(raw, path);
  }

  private condition(raw: unknown, path: string): FilterCondition {
    if (!isObject(raw)) throw badRequest(`${path}: must be a condition {field, op, value} or a group {match, conditions}`);
    for (const key of Object.keys(raw)) {
      if (key !== 'field' && key !== 'op' && key !== 'value') throw badRequest(`${path}: unknown key "${key}" (a condition has field, op and value)`);
    }
    const { field, op } = raw;
    if (typeof field !== 'string') throw badRequest(`${path}.field: must be a string`);
    if (typeof op !== 'string' || !(FILTER_OPS as readonly string[]).includes(op)) {
      throw badRequest(`${path}.op: must be one of ${FILTER_OPS.join(', ')}`);
    }
    const o = op as FilterOp;
    const value = raw.value;

    if (field === 'subscribed') {
      if (o !== 'eq' && o !== 'neq') throw badRequest(`${path}.op: subscribed supports eq and neq`);
      if (typeof value !== 'boolean') throw badRequest(`${path}.value: subscribed is compared with true or false`);
      return { field, op: o, value };
    }
    if (field === 'createdAt') {
      if (!DATE_OPS.has(o)) throw badRequest(`${path}.op: createdAt supports ${[...DATE_OPS].join(', ')}`);
      const at = typeof value === 'string' ? parseIsoDateTime(value) : null;
      if (!at) throw badRequest(`${path}.value: createdAt is compared with an ISO 8601 date such as 2026-01-31 or 2026-01-31T09:00:00Z`);
      if (!hasFourDigitYear(at)) throw badRequest(`${path}.value: createdAt is compared with an instant in the years 0000 to 9999 (UTC)`);
      // Stored timestamps are toISOString() output, so the normalised value compares as text.
      return { field, op: o, value: at.toISOString() };
    }
    let isProperty = false;
    if (field.startsWith('properties.')) {
      const key = field.slice('properties.'.length);
      if (!PROPERTY_KEY_PATTERN.test(key)) throw badRequest(`${path}.field: property names are 1-64 characters of A-Z, a-z, 0-9, _ and -`);
      isProperty = true;
    } else if (!TEXT_FIELDS.has(field)) {
      throw badRequest(`${path}.field: must be email, firstName, lastName, subscribed, createdAt or properties.<name>`);
    }
    const lower = (s: string) => (field === 'email' ? lowerAddressTerm(s) : s);
    // A whole address is keyed as contacts store it (the domain in A-labels, needless quotes
    // dropped), so eq, neq and in match the address a contact was added with, however written.
    const whole = (s: string) => (field === 'email' ? mailboxKey(s) : s);

    if (o === 'exists' || o === 'notExists') {
      if (value !== undefined && value !== null && value !== '') throw badRequest(`${path}.value: ${o} takes no value`);
      return { field, op: o };
    }
    if (o === 'in') {
      if (!Array.isArray(value) || value.length === 0) throw badRequest(`${path}.value: in needs a non-empty array`);
      if (value.length > MAX_IN_VALUES) throw badRequest(`${path}.value: in takes at most ${MAX_IN_VALUES} values`);
      this.inValues += value.length;
      if (this.inValues > MAX_FILTER_IN_VALUES) throw badRequest(`${path}.value: a filter holds at most ${MAX_FILTER_IN_VALUES} values in its in lists`);
      const items = value.map((v, i) => whole(this.text(v, `${path}.value[${i}]`, isProperty)));
      return { field, op: o, value: [...new Set(items)] };
    }
    if (ORDER_OPS.has(o) && isProperty) {
      // Property values are text; a number (or a string that is one) compares numerically.
      if (typeof value === 'number' && Number.isFinite(value)) return { field, op: o, value };
      const s = this.text(value, `${path}.value`, true);
      if (!PLAIN_NUMBER.test(s.trim())) return { field, op: o, value: s };
      // Stored as JSON, where a number past a double's range would become null.
      const n = Number(s.trim());
      if (!Number.isFinite(n)) throw badRequest(`${path}.value: a number compared with must be within ±1.7976931348623157e308`);
      return { field, op: o, value: n };
    }
    const s = this.text(value, `${path}.value`, isProperty);
    if ((o === 'contains' || o === 'startsWith' || o === 'endsWith') && s === '') throw badRequest(`${path}.value: must not be empty`);
    // Every contact has an address, so email neq a blank one (keyed: trimmed) holds the whole book.
    if (o === 'neq' && field === 'email' && whole(s) === '') throw badRequest(`${path}.value: must not be empty`);
    return { field, op: o, value: o === 'eq' || o === 'neq' ? whole(s) : lower(s) };
  }

  private text(v: unknown, path: string, allowNumber: boolean): string {
    if (typeof v === 'number' && allowNumber && Number.isFinite(v)) return String(v);
    if (typeof v !== 'string') throw badRequest(`${path}: must be a string${allowNumber ? ' or a number' : ''}`);
    if (v.length > MAX_TEXT_VALUE) throw badRequest(`${path}: at most ${MAX_TEXT_VALUE} characters`);
    return v;
  }
}

/** Validates and normalises a filter; throws 400 naming the offending condition. */
export function parseSegmentFilters(raw: unknown, path = 'filters'): FilterGroup {
  return new FilterValidator().group(raw, path, 1);
}
