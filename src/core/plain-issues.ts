import type { z } from 'zod';

/*
 * What is wrong with a field, in the plain words of the API's other messages ("is required",
 * "must be a string", "must be at most 64 characters"), for the schema checks of every edge:
 * the validator's own wording ("Invalid input: expected string, received undefined") is not
 * what a user should read. Passed to safeParse, so a message a schema words itself still wins.
 */

type Issue = z.core.$ZodRawIssue;

const NOUNS: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  int: 'an integer',
  bigint: 'an integer',
  boolean: 'true or false',
  array: 'a list',
  object: 'a JSON object',
  record: 'a JSON object',
  date: 'a date',
  null: 'null',
};
const noun = (expected: string) => NOUNS[expected] ?? `a ${expected}`;
const quote = (v: unknown) => (typeof v === 'string' ? JSON.stringify(v) : String(v));
const plural = (n: number | bigint, one: string, many: string) => `${n} ${Number(n) === 1 ? one : many}`;

function sized(origin: string, n: number | bigint): string {
  if (origin === 'string') return plural(n, 'character', 'characters');
  if (origin === 'array' || origin === 'set') return plural(n, 'item', 'items');
  return String(n);
}

/** The message of one issue, or undefined to keep the validator's. */
export function plainIssueMessage(issue: Issue): string | undefined {
  switch (issue.code) {
    case 'invalid_type':
      if (issue.input === undefined) return 'is required';
      return `must be ${noun(issue.expected)}${issue.input === null ? ', not null' : ''}`;
    case 'too_small': {
      const { origin, minimum } = issue;
      if (origin === 'string' || origin === 'array' || origin === 'set') {
        if (Number(minimum) === 1 && issue.inclusive !== false) return 'must not be empty';
        return `must ${origin === 'string' ? 'be' : 'have'} at least ${sized(origin, minimum)}`;
      }
      return issue.inclusive === false ? `must be greater than ${minimum}` : `must be at least ${minimum}`;
    }
    case 'too_big': {
      const { origin, maximum } = issue;
      if (origin === 'string') return `must be at most ${sized(origin, maximum)}`;
      if (origin === 'array' || origin === 'set') return `must have at most ${sized(origin, maximum)}`;
      return issue.inclusive === false ? `must be less than ${maximum}` : `must be at most ${maximum}`;
    }
    case 'invalid_value':
      return issue.values.length === 1 ? `must be ${quote(issue.values[0])}` : `must be one of ${issue.values.map(quote).join(', ')}`;
    case 'unrecognized_keys':
      return `unknown field${issue.keys.length === 1 ? '' : 's'} ${issue.keys.map(quote).join(', ')}`;
    case 'invalid_format':
      if (issue.format === 'email') return 'must be a valid email address';
      if (issue.format === 'url') return 'must be a URL';
      if (issue.format === 'datetime') return 'must be an ISO 8601 date and time';
      return issue.format === 'regex' ? 'is not in the expected format' : `must be a valid ${issue.format}`;
    case 'not_multiple_of':
      return `must be a multiple of ${issue.divisor}`;
    case 'invalid_union': {
      // Every accepted form refused the value's type: name the forms ("a string or a list").
      const forms = issue.errors.map((e) => (e.length === 1 && e[0]!.code === 'invalid_type' && e[0]!.path.length === 0 ? e[0]!.expected : undefined));
      if (issue.input !== undefined && forms.length && forms.every((f) => f !== undefined)) return `must be ${[...new Set(forms)].map((f) => noun(f!)).join(' or ')}`;
      if (issue.input === undefined) return 'is required';
      return 'is not valid';
    }
    case 'invalid_key': {
      // A record's key (a property or header name): the path ends with it, so say it is the name
      // that is wrong, with the key schema's own words (already worded by this map or the schema).
      const inner = issue.issues[0]?.message;
      if (!inner) return 'the name is not valid';
      return /^(must|is) /.test(inner) ? `the name ${inner}` : `the name is not valid: ${inner}`;
    }
    default:
      return issue.input === undefined ? 'is required' : 'is not valid';
  }
}

/** The safeParse options that word every issue plainly. */
export const plainIssues = { error: plainIssueMessage } as const;

/**
 * Where a schema issue is, written as the API's own checks write it: `to`, `attachments[0].filename`,
 * `[2].cc` for a batch item (a list place in brackets, a key after a dot); '' at the top.
 */
export function issuePath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const key of path) out += typeof key === 'number' ? `[${key}]` : `${out === '' ? '' : '.'}${String(key)}`;
  return out;
}
