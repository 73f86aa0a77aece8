import { z } from 'zod';
import { badRequest } from '../core/errors.js';
import { plainIssues } from '../core/plain-issues.js';
import { hasFourDigitYear, parseIsoDateTime } from '../lib/iso-date-time.js';
import { MAX_INT_ID } from '../core/int-id.js';

// Path, query and header parameters, declared once per route (route-types.ts `request`):
// the server parses each with `parse`, and the OpenAPI document shows `schema`. The value
// schema is the check itself (parse decodes the text, then validates with it), so the
// document cannot claim a bound the server does not enforce. Every failure is a 400 whose
// message starts with the parameter name.

export type RawValue = string | string[] | undefined;

export interface ParamDef<T = unknown> {
  /** The decoded value's schema: validates it, and is the parameter's schema in the document. */
  schema: z.ZodType;
  description: string;
  /** Query only: the parameter may be repeated (?tag=a&tag=b) and parses to an array. */
  repeatable?: boolean;
  /** Text -> value, or a 400 naming `name`. */
  parse(raw: RawValue, name: string): T;
}

export type ParamValues<P extends Record<string, ParamDef>> = { [K in keyof P]: P[K] extends ParamDef<infer T> ? T : never };

/** Parses every declared parameter from `source` (path params, query, or headers by name). */
export function parseParams<P extends Record<string, ParamDef>>(defs: P | undefined, get: (name: string) => RawValue): ParamValues<P> {
  const out: Record<string, unknown> = {};
  if (defs) for (const [name, def] of Object.entries(defs)) out[name] = def.parse(get(name), name);
  return out as ParamValues<P>;
}

type Decode = (text: string, name: string) => unknown;

function check(schema: z.ZodType, value: unknown, name: string): unknown {
  const result = schema.safeParse(value, plainIssues);
  if (result.success) return result.data;
  throw badRequest(`${name}: ${result.error.issues[0]!.message}`);
}

/**
 * What a parameter given empty (`?name=`) is: absent (page, limit, search, cursor), a value
 * checked like any other (headers), or refused (filters: docs/api.md, Lists that select rows).
 */
type Empty = 'absent' | 'value' | 'refused';

/** A single-valued parameter: given at most once; an empty value is as `empty` says. */
function single<S extends z.ZodType>(schema: S, description: string, decode?: Decode, empty: Empty = 'absent'): ParamDef<z.output<S>> {
  return {
    schema,
    description,
    parse(raw, name) {
      if (Array.isArray(raw)) throw badRequest(`${name}: must be given once`);
      if (raw === '' && empty === 'refused') emptyFilter(name);
      const text = raw === '' && empty === 'absent' ? undefined : raw;
      return check(schema, text === undefined || !decode ? text : decode(text, name), name) as z.output<S>;
    },
  };
}

/** At most this many values of a repeated query parameter (Node reads the first 1000 pairs of a query string only). */
export const MAX_REPEATED_VALUES = 100;

/**
 * A filter given but naming nothing (`?domainId=`, `?emails=,,`, `?status=`) is refused: read as
 * "no filter" it would select every row, the opposite of what was asked (docs/api.md, Lists that
 * select rows).
 */
function emptyFilter(name: string): never {
  throw badRequest(`${name}: is empty; leave the parameter out not to filter by it`);
}

/**
 * A repeatable query parameter: undefined when absent; every value is decoded and checked, and
 * a value given empty is a 400, never "no filter".
 */
function repeatable<S extends z.ZodType>(item: S, description: string, decode?: Decode): ParamDef<z.output<S>[] | undefined> {
  const schema = z.array(item).optional();
  return {
    schema,
    description,
    repeatable: true,
    parse(raw, name) {
      if (raw === undefined) return undefined;
      const texts = Array.isArray(raw) ? raw : [raw];
      if (texts.some((v) => v === '')) emptyFilter(name);
      if (texts.length > MAX_REPEATED_VALUES) throw badRequest(`${name}: at most ${MAX_REPEATED_VALUES} values`);
      return check(schema, decode ? texts.map((t) => decode(t, name)) : texts, name) as z.output<S>[] | undefined;
    },
  };
}

/** Decimal digits only (no sign, exponent or spaces); anything else is `message`. */
const integer =
  (message: string): Decode =>
  (text, name) => {
    if (!/^\d{1,10}$/.test(text)) throw badRequest(`${name}: ${message}`);
    return Number(text);
  };

const INT_ID_MESSAGE = `must be an integer between 1 and ${MAX_INT_ID}`;
const intIdSchema = z.int().min(1, { error: INT_ID_MESSAGE }).max(MAX_INT_ID, { error: INT_ID_MESSAGE });

// --- Path parameters -------------------------------------------------------------------

/** Integer ids (domains, API keys): 1..2147483647 (spec, Limits). */
export function intIdPath(description: string): ParamDef<number> {
  return single(intIdSchema, description, integer(INT_ID_MESSAGE));
}

/** String ids (em_, cb_, ct_, cp_, tp_, sg_, wh_, re_): bounded so a huge path never reaches the store. */
export function stringPath(description: string, opts: { min?: number; max?: number } = {}): ParamDef<string> {
  const min = opts.min ?? 1;
  const max = opts.max ?? 100;
  const error = `must be ${min} to ${max} characters`;
  return single(z.string().min(min, { error }).max(max, { error }), description);
}

// --- Query parameters ------------------------------------------------------------------

/** page: 1-based, default 1 (spec, Pagination). */
export function pageQuery(): ParamDef<number> {
  const error = 'must be a positive integer';
  return single(z.int().min(1, { error }).max(1_000_000_000, { error: 'too large' }).default(1), 'Page number, 1-based.', integer(error));
}

/** limit: page size (spec: default 25, at most 100; the email list defaults to 50). */
export function limitQuery(defaultLimit = 25, maxLimit = 100): ParamDef<number> {
  const error = 'must be a positive integer';
  return single(z.int().min(1, { error }).max(maxLimit, { error: `must be at most ${maxLimit}` }).default(defaultLimit), `Page size, 1 to ${maxLimit}.`, integer(error));
}

/** limit with no default, for a list that chooses its own when it is left out (the caller says how). */
export function optionalLimitQuery(description: string, maxLimit = 100): ParamDef<number | undefined> {
  const error = 'must be a positive integer';
  return single(z.int().min(1, { error }).max(maxLimit, { error: `must be at most ${maxLimit}` }).optional(), description, integer(error));
}

/** The page-numbered list parameters (spread into `query`). */
export function pageQueries(defaultLimit = 25, maxLimit = 100) {
  return { page: pageQuery(), limit: limitQuery(defaultLimit, maxLimit) };
}

/** An optional value from a closed set. */
export function enumQuery<const T extends readonly [string, ...string[]]>(values: T, description: string): ParamDef<T[number] | undefined> {
  return single(z.enum(values, { error: `must be one of ${values.join(', ')}` }).optional(), description, undefined, 'refused');
}

/** The free-text `search` parameter, trimmed; blank is absent. */
export function searchQuery(description: string, maxLength = 320): ParamDef<string | undefined> {
  return single(z.string().max(maxLength, { error: `at most ${maxLength} characters` }).optional(), description, (text) => text.trim() || undefined);
}

/** An optional free-text value: a cursor (empty: the first page), or with `filter` an id to filter by (empty: 400). */
export function textQuery(description: string, maxLength = 1000, opts: { filter?: boolean } = {}): ParamDef<string | undefined> {
  return single(z.string().max(maxLength, { error: `at most ${maxLength} characters` }).optional(), description, undefined, opts.filter ? 'refused' : 'absent');
}

/** An optional integer id (e.g. ?domainId=3). */
export function intIdQuery(description: string): ParamDef<number | undefined> {
  return single(intIdSchema.optional(), description, integer(INT_ID_MESSAGE), 'refused');
}

/** Repeatable integer ids (?domainId=1&domainId=2). */
export function intIdListQuery(description: string): ParamDef<number[] | undefined> {
  return repeatable(intIdSchema, description, integer(INT_ID_MESSAGE));
}

/** Repeatable strings, optionally with bounded length (?tag=a&tag=b). */
export function stringListQuery(description: string, bounds?: { min: number; max: number; error: string }): ParamDef<string[] | undefined> {
  return repeatable(bounds ? z.string().min(bounds.min, { error: bounds.error }).max(bounds.max, { error: bounds.error }) : z.string(), description);
}

/**
 * A comma-separated list, or the parameter repeated (?emails=a,b&emails=c): items trimmed,
 * blanks between commas and duplicates dropped; undefined when absent. Given but naming nothing
 * (`emails=`, `emails=,,`) is a 400, as is more than `max` items.
 */
export function commaListQuery(description: string, max: number, noun: string): ParamDef<string[] | undefined> {
  const schema = z.array(z.string()).min(1).max(max).optional();
  return {
    schema,
    description,
    repeatable: true,
    parse(raw, name) {
      if (raw === undefined) return undefined;
      const items = (Array.isArray(raw) ? raw : [raw]).flatMap((v) => v.split(',')).map((v) => v.trim()).filter(Boolean);
      if (!items.length) emptyFilter(name);
      const unique = [...new Set(items)];
      if (unique.length > max) throw badRequest(`${name}: at most ${max} ${noun}`);
      return unique;
    },
  };
}

/** An optional instant: an ISO 8601 date-time (or date) that exists, normalised to ISO 8601 UTC. */
export function dateTimeQuery(description: string): ParamDef<string | undefined> {
  const error = 'must be an ISO 8601 date-time such as 2026-01-31T09:00:00Z';
  const parse = (text: string, name: string) => {
    const at = parseIsoDateTime(text);
    if (!at) throw badRequest(`${name}: ${error}`);
    // Compared as text with stored timestamps: "+010000-..." would sort before every date.
    if (!hasFourDigitYear(at)) throw badRequest(`${name}: must be in the years 0000 to 9999 (UTC)`);
    return at.toISOString();
  };
  return single(z.string().meta({ format: 'date-time' }).optional(), description, parse, 'refused');
}

/** An optional integer from a closed set, with a default (e.g. days=7|30). */
export function intChoiceQuery<const T extends readonly [number, ...number[]]>(values: T, defaultValue: T[number], description: string): ParamDef<T[number]> {
  const error = `must be ${values.slice(0, -1).join(', ')} or ${values[values.length - 1]}`;
  return single(z.literal(values, { error }).default(defaultValue as never), description, integer(error)) as ParamDef<T[number]>;
}

// --- Headers ---------------------------------------------------------------------------

/**
 * An optional header value with bounded length. A header sent empty is a value (checked
 * against the bounds), not an absent header: `Idempotency-Key:` with nothing after it is a
 * client bug that would otherwise silently send without idempotency.
 */
export function textHeader(description: string, opts: { min: number; max: number }): ParamDef<string | undefined> {
  const error = `must be ${opts.min} to ${opts.max} characters`;
  return single(z.string().min(opts.min, { error }).max(opts.max, { error }).optional(), description, undefined, 'value');
}
