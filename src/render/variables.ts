import { decodeBasicEntities, escapeHtml } from './html-escape.js';

/**
 * Placeholders are written `{{name}}`, `{{ name }}` or `{{name,fallback=some text}}`.
 * They are the only substitution syntax in Posthorn: the editor renderers emit
 * them, API callers may type them in raw html/text/subject, and they are
 * replaced once, at send time, by substituteVariables.
 */

export const VARIABLE_NAME_PATTERN = /^[A-Za-z0-9_.]+$/;

export interface Placeholder {
  name: string;
  /** Undefined when the placeholder has no `,fallback=` part. */
  fallback: string | undefined;
  /** Index of the opening `{{`. */
  start: number;
  /** Index just past the closing `}}`. */
  end: number;
}

export interface SubstituteOptions {
  /** True for HTML bodies (values are escaped), false for subjects and text bodies. */
  escapeHtml: boolean;
}

/** Formats a placeholder the way the renderers emit it (and useSend stores it). */
export function formatPlaceholder(name: string, fallback?: string | null): string {
  return fallback ? `{{${name},fallback=${fallback}}}` : `{{${name}}}`;
}

function isNameChar(code: number): boolean {
  return (
    (code >= 48 && code <= 57) || // 0-9
    (code >= 65 && code <= 90) || // A-Z
    (code >= 97 && code <= 122) || // a-z
    code === 95 || // _
    code === 46 // .
  );
}

function isSpace(code: number): boolean {
  return code === 32 || code === 9 || code === 10 || code === 13;
}

const FALLBACK_KEYWORD = 'fallback';

/**
 * Parses the inside of `{{ ... }}` between `from` and `close` (the index of
 * the closing `}}`). Returns undefined when it is not a placeholder.
 *
 * Every loop stops at the first character that cannot continue the grammar,
 * and a name run cannot contain `{`, so the regions examined for successive
 * `{{` never overlap: the caller's scan stays linear in the input length.
 */
function parseInner(input: string, from: number, close: number): { name: string; fallback: string | undefined } | undefined {
  let i = from;
  while (i < close && isSpace(input.charCodeAt(i))) i++;
  const nameStart = i;
  while (i < close && isNameChar(input.charCodeAt(i))) i++;
  if (i === nameStart) return undefined;
  const name = input.slice(nameStart, i);
  while (i < close && isSpace(input.charCodeAt(i))) i++;
  if (i === close) return { name, fallback: undefined };
  if (input.charCodeAt(i) !== 44 /* , */) return undefined;
  i++;
  while (i < close && isSpace(input.charCodeAt(i))) i++;
  if (!input.startsWith(FALLBACK_KEYWORD, i) || i + FALLBACK_KEYWORD.length > close) return undefined;
  i += FALLBACK_KEYWORD.length;
  while (i < close && isSpace(input.charCodeAt(i))) i++;
  if (i >= close || input.charCodeAt(i) !== 61 /* = */) return undefined;
  i++;
  return { name, fallback: input.slice(i, close).trim() };
}

/**
 * Calls `onPlaceholder` for every well-formed placeholder, in order.
 * Malformed `{{...}}` sequences are skipped (they stay literal text).
 */
function scanPlaceholders(input: string, onPlaceholder: (p: Placeholder) => void): void {
  let searchFrom = 0;
  // Index of the first `}}` at or after the current candidate's body. Cached
  // so runs of `{{` without a matching `}}` do not rescan the rest of the input.
  let close = -1;
  for (;;) {
    const open = input.indexOf('{{', searchFrom);
    if (open === -1) return;
    const bodyStart = open + 2;
    if (close < bodyStart) {
      close = input.indexOf('}}', bodyStart);
      if (close === -1) return;
    }
    const inner = parseInner(input, bodyStart, close);
    if (inner) {
      onPlaceholder({ name: inner.name, fallback: inner.fallback, start: open, end: close + 2 });
      searchFrom = close + 2;
    } else {
      searchFrom = open + 1;
    }
  }
}

/**
 * Parses a placeholder that starts exactly at `start` (used to vet
 * `{{verifyUrl}}`-style link targets). Returns undefined otherwise.
 */
export function readPlaceholderAt(input: string, start: number): Placeholder | undefined {
  if (!input.startsWith('{{', start)) return undefined;
  const close = input.indexOf('}}', start + 2);
  if (close === -1) return undefined;
  const inner = parseInner(input, start + 2, close);
  return inner ? { name: inner.name, fallback: inner.fallback, start, end: close + 2 } : undefined;
}

/**
 * The values' keys by lower case, the first in key order for each (as a search of the keys would
 * find it): built once per text, at its first placeholder that names no key exactly. Searching
 * every key at each such placeholder was their product, and one request carries both: 100 000
 * `{{X}}` in a template's html and 50 000 variables were minutes of the only thread.
 */
function foldedKeys(values: Record<string, string | undefined>): Map<string, string> {
  const folded = new Map<string, string>();
  for (const k of Object.keys(values)) {
    const lower = k.toLowerCase();
    if (!folded.has(lower)) folded.set(lower, k);
  }
  return folded;
}

function lookup(values: Record<string, string | undefined>, name: string, folded: () => Map<string, string>): string | undefined {
  const dot = name.lastIndexOf('.');
  // `{{contact.firstName}}` also finds a flat `firstName`, so templates
  // written against useSend's contact.* names keep working.
  const short = dot !== -1 && dot < name.length - 1 ? name.slice(dot + 1) : undefined;
  // Own properties only: a template must not be able to read "constructor" or "__proto__".
  if (Object.hasOwn(values, name)) return values[name];
  if (short !== undefined && Object.hasOwn(values, short)) return values[short];
  // Then with case ignored, as useSend reads `{{FIRSTNAME}}`; an exact name wins over this.
  for (const wanted of short === undefined ? [name] : [name, short]) {
    const key = folded().get(wanted.toLowerCase());
    if (key !== undefined) return values[key];
  }
  return undefined;
}

/**
 * Replaces every placeholder with its value, or its fallback when the value is
 * missing or empty, or "" when there is neither.
 *
 * With `escapeHtml`, values are escaped; fallbacks sit inside HTML already (the
 * renderer escapes them when it writes the placeholder), so they are decoded
 * first and re-escaped: the result is correct whether the fallback was written
 * escaped (rendered editor output) or raw (hand-written API html), and markup
 * in a fallback can never reach the output.
 */
export function substituteVariables(
  input: string,
  values: Record<string, string | undefined>,
  opts: SubstituteOptions,
): string {
  const parts: string[] = [];
  let copied = 0;
  let folded: Map<string, string> | undefined;
  const foldedOnce = () => (folded ??= foldedKeys(values));
  scanPlaceholders(input, (p) => {
    parts.push(input.slice(copied, p.start));
    const value = lookup(values, p.name, foldedOnce);
    if (value !== undefined && value !== '') {
      parts.push(opts.escapeHtml ? escapeHtml(value) : value);
    } else if (p.fallback) {
      parts.push(opts.escapeHtml ? escapeHtml(decodeBasicEntities(p.fallback)) : p.fallback);
    }
    copied = p.end;
  });
  if (copied === 0) return input;
  parts.push(input.slice(copied));
  return parts.join('');
}

/** Distinct placeholder names in order of first appearance. */
export function listVariables(input: string): string[] {
  const seen = new Set<string>();
  scanPlaceholders(input, (p) => {
    seen.add(p.name);
  });
  return [...seen];
}
