/*
 * Text no store keeps alike.
 *
 * The NUL character (U+0000). RFC 5322 forbids it in a message, no id has it, and PostgreSQL
 * cannot store it in a text column, so text that holds it is refused where a client can be
 * told (the API, submission) and cleaned where nobody can (mail received from other servers),
 * the same on every store.
 *
 * An unpaired surrogate (U+D800 to U+DFFF alone): JSON can write one ("\ud800"), but it is no
 * character, and no UTF-8 holds it. A text column gets U+FFFD in its place, while JSON text
 * keeps the escape, which PostgreSQL's jsonb refuses: one contact property with it made every
 * property filter of its book fail there. The API refuses it (RFC 7493, I-JSON, 2.1); mail
 * from other servers gets U+FFFD in its place, as for NUL.
 */

/** Where a value holds a string `bad` finds (or a plain object key), as a field path ('' for the value itself), or undefined. */
function pathOf(value: unknown, path: string, bad: (s: string) => boolean): string | undefined {
  if (typeof value === 'string') return bad(value) ? path : undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = pathOf(value[i], `${path}[${i}]`, bad); // a list place in brackets, as every field path the API names
      if (found !== undefined) return found;
    }
    return undefined;
  }
  if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      const where = path ? `${path}.${k}` : k;
      if (bad(k)) return where;
      const found = pathOf(v, where, bad);
      if (found !== undefined) return found;
    }
  }
  return undefined;
}

/** Where a value holds the NUL character, as a field path ('' for the value itself), or undefined. */
export function nulPath(value: unknown, path: string): string | undefined {
  return pathOf(value, path, (s) => s.includes('\u0000'));
}

/** Any surrogate: a cheap scan before the exact one, which looks around each. */
const ANY_SURROGATE = /[\uD800-\uDFFF]/;
const UNPAIRED_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Where a value holds an unpaired surrogate, as a field path ('' for the value itself), or undefined. */
export function unpairedSurrogatePath(value: unknown, path: string): string | undefined {
  return pathOf(value, path, (s) => ANY_SURROGATE.test(s) && UNPAIRED_SURROGATE.test(s));
}

/** The 400 message for a value with an unpaired surrogate at `where`. */
export function unpairedSurrogateMessage(where: string): string {
  return `${where}: must be Unicode text: an unpaired surrogate (\\uD800 to \\uDFFF not in a pair) is no character`;
}

/** The 400 / 550 message for a value with NUL at `where`. */
export function nulMessage(where: string): string {
  return `${where}: must not contain the NUL character (U+0000)`;
}

const UNPAIRED_SURROGATES = new RegExp(UNPAIRED_SURROGATE.source, 'g');

/** A string with each NUL and each unpaired surrogate replaced by U+FFFD. */
function cleanString(s: string): string {
  const noNul = s.includes('\u0000') ? s.replaceAll('\u0000', '\uFFFD') : s;
  return ANY_SURROGATE.test(noNul) ? noNul.replace(UNPAIRED_SURROGATES, '\uFFFD') : noNul;
}

/**
 * `value` with every NUL and unpaired surrogate in its strings (and plain objects' keys)
 * replaced by U+FFFD, the character a reader shows for what could not be read: other servers'
 * text, which nobody can be asked to correct (a UTF-16 encoded word decodes to a lone
 * surrogate). Buffers and other non-plain objects are kept as they are: bytes are not text.
 */
export function replaceUnstorable<T>(value: T): T {
  if (typeof value === 'string') return cleanString(value) as T;
  if (Array.isArray(value)) return value.map((v: unknown) => replaceUnstorable(v)) as T;
  if (value && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[replaceUnstorable(k)] = replaceUnstorable(v);
    return out as T;
  }
  return value;
}

/** The first `max` UTF-16 units of `text`, one fewer where the cut would leave half a surrogate pair. */
export function sliceWhole(text: string, max: number): string {
  if (text.length <= max) return text;
  const last = text.charCodeAt(max - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max);
}
