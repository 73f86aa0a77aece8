const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/**
 * Escapes text for use both as element content and inside a quoted attribute,
 * so callers never have to remember which context they are in.
 */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);
}

const NAMED: Record<string, string> = {
  amp: '&',
  lt: '<',
  gt: '>',
  quot: '"',
  apos: "'",
  nbsp: '\u00a0',
};

/**
 * Undoes the entities escapeHtml (and typical hand-written HTML) produce.
 *
 * Only used for placeholder fallbacks found inside HTML: the renderer writes
 * them escaped, so they must be decoded before being escaped again on
 * substitution, otherwise "Tom & Jerry" would arrive as "Tom &amp;amp; Jerry".
 * Other named entities are left alone on purpose (no big table, no I/O).
 */
export function decodeBasicEntities(value: string): string {
  if (!value.includes('&')) return value;
  return value.replace(/&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[a-zA-Z]{2,4});/g, (whole, body: string) => {
    if (body.startsWith('#')) {
      const code = body[1] === 'x' || body[1] === 'X' ? parseInt(body.slice(2), 16) : parseInt(body.slice(1), 10);
      // Surrogates and out-of-range code points are not characters: keep the source text.
      if (code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff) || code === 0) return whole;
      return String.fromCodePoint(code);
    }
    return NAMED[body.toLowerCase()] ?? whole;
  });
}
