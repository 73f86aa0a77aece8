import type { z } from 'zod';
import { badRequest } from '../core/errors.js';
import { plainIssues } from '../core/plain-issues.js';

/** Parses input with a zod schema; a failure is 400 naming the first bad field. */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown, where = 'body'): z.infer<S> {
  const result = schema.safeParse(input, plainIssues);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const path = issue.path.length ? issue.path.join('.') : where;
  throw badRequest(`${path}: ${issue.message}`);
}

/**
 * Where a value holds the NUL character (U+0000), as a field path, or undefined. No field
 * means anything with it (RFC 5322 forbids it in a message; ids never have it) and PostgreSQL
 * cannot store it in text, so it is refused at the door on every store alike.
 */
export function nulPath(value: unknown, path: string): string | undefined {
  if (typeof value === 'string') return value.includes('\u0000') ? path : undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = nulPath(value[i], path ? `${path}.${i}` : String(i));
      if (found !== undefined) return found;
    }
    return undefined;
  }
  if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      const where = path ? `${path}.${k}` : k;
      if (k.includes('\u0000')) return where;
      const found = nulPath(v, where);
      if (found !== undefined) return found;
    }
  }
  return undefined;
}
