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
