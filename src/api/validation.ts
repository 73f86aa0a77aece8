import type { z } from 'zod';
import { badRequest } from '../core/errors.js';
import { issuePath, plainIssues } from '../core/plain-issues.js';
import { typosOf } from '../lib/edit-distance.js';

/** Parses input with a zod schema; a failure is 400 naming the first bad field. */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown, where = 'body'): z.infer<S> {
  const result = schema.safeParse(input, plainIssues);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const path = issuePath(issue.path) || where;
  throw badRequest(`${path}: ${issue.message}${misspelt(issue, input)}`);
}

/**
 * A required field reported missing while its object has a name a typo away ("regoin", "too")
 * is most often that field misspelt: say so, since "region: is required" alone reads as wrong to
 * someone who sent it (unknown fields are ignored by some schemas, refused after this by others).
 */
function misspelt(issue: z.core.$ZodIssue, input: unknown): string {
  const name = issue.path.at(-1);
  if (typeof name !== 'string' || issue.message !== 'is required') return '';
  let parent: unknown = input;
  for (const key of issue.path.slice(0, -1)) parent = parent !== null && typeof parent === 'object' ? (parent as Record<PropertyKey, unknown>)[key as PropertyKey] : undefined;
  if (parent === null || typeof parent !== 'object' || Array.isArray(parent)) return '';
  const near = typosOf(name, Object.keys(parent))[0];
  return near ? ` (${JSON.stringify(near)} is not a field: did you mean ${JSON.stringify(name)}?)` : '';
}
