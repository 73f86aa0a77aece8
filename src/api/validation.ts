import type { z } from 'zod';
import { badRequest } from '../core/errors.js';

/** Parses input with a zod schema; a failure is 400 naming the first bad field. */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown, where = 'body'): z.infer<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const path = issue.path.length ? issue.path.join('.') : where;
  throw badRequest(`${path}: ${issue.message}`);
}

/** Path ids of integer resources (domains, API keys): 1..2147483647 (spec, Limits). */
export function parseIntId(raw: string | undefined, name = 'id'): number {
  if (raw === undefined || !/^\d{1,10}$/.test(raw)) throw badRequest(`${name}: must be an integer between 1 and 2147483647`);
  const n = Number(raw);
  if (n < 1 || n > 2147483647) throw badRequest(`${name}: must be an integer between 1 and 2147483647`);
  return n;
}

export type Query = Record<string, string | string[] | undefined>;

/** A query parameter that may appear at most once; empty counts as absent. */
export function singleQuery(query: Query, name: string): string | undefined {
  const v = query[name];
  if (Array.isArray(v)) throw badRequest(`${name}: must be given once`);
  return v === '' ? undefined : v;
}

/** An optional query parameter restricted to a closed set of values. */
export function enumQuery<T extends string>(query: Query, name: string, values: readonly T[]): T | undefined {
  const v = singleQuery(query, name);
  if (v !== undefined && !(values as readonly string[]).includes(v)) throw badRequest(`${name}: must be one of ${values.join(', ')}`);
  return v as T | undefined;
}

/** The optional free-text `search` parameter, trimmed. */
export function searchQuery(query: Query, maxLength = 320): string | undefined {
  const v = singleQuery(query, 'search')?.trim();
  if (v && v.length > maxLength) throw badRequest(`search: at most ${maxLength} characters`);
  return v || undefined;
}
