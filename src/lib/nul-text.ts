/*
 * The NUL character (U+0000) in text. RFC 5322 forbids it in a message, no id has it, and
 * PostgreSQL cannot store it in a text column, so text that holds it is refused where a
 * client can be told (the API, submission) and cleaned where nobody can (mail received from
 * other servers), the same on every store.
 */

/** Where a value holds the NUL character, as a field path ('' for the value itself), or undefined. */
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

/** The 400 / 550 message for a value with NUL at `where`. */
export function nulMessage(where: string): string {
  return `${where}: must not contain the NUL character (U+0000)`;
}

/**
 * `value` with every NUL in its strings (and plain objects' keys) replaced by U+FFFD, the
 * character a reader shows for what could not be read. Buffers and other non-plain objects
 * are kept as they are: bytes are not text.
 */
export function replaceNul<T>(value: T): T {
  if (typeof value === 'string') return (value.includes('\u0000') ? value.replaceAll('\u0000', '\uFFFD') : value) as T;
  if (Array.isArray(value)) return value.map((v: unknown) => replaceNul(v)) as T;
  if (value && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[replaceNul(k)] = replaceNul(v);
    return out as T;
  }
  return value;
}
