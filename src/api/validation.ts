import type { z } from 'zod';
import { badRequest } from '../core/errors.js';
import { issuePath, plainIssues } from '../core/plain-issues.js';

/** Parses input with a zod schema; a failure is 400 naming the first bad field. */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown, where = 'body'): z.infer<S> {
  const result = schema.safeParse(input, plainIssues);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const path = issuePath(issue.path) || where;
  throw badRequest(`${path}: ${issue.message}`);
}
