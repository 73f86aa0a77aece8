/*
 * Signed links must have exactly one spelling. Node's base64url decoder is lenient: it skips
 * characters outside the alphabet, accepts '=' padding, and ignores the unused low bits of the
 * last character ("QQ" and "QR" both decode to "A"). A token that decodes to the signed bytes
 * but is written differently would then verify too. These helpers accept only the encoding
 * our own encoder produces.
 */

const ALPHABET = /^[A-Za-z0-9_-]*$/;

/** The bytes of `text` if it is the canonical unpadded base64url of them, else null. */
export function decodeCanonicalBase64url(text: string): Buffer | null {
  if (!ALPHABET.test(text) || text.length % 4 === 1) return null;
  const bytes = Buffer.from(text, 'base64url');
  return bytes.toString('base64url') === text ? bytes : null;
}

/** The UTF-8 text of a canonical base64url string, null when either encoding is not canonical. */
export function decodeCanonicalBase64urlText(text: string): string | null {
  const bytes = decodeCanonicalBase64url(text);
  if (!bytes) return null;
  const decoded = bytes.toString('utf8');
  // Invalid UTF-8 decodes to U+FFFD: two different byte strings would read as one text.
  return Buffer.from(decoded, 'utf8').equals(bytes) ? decoded : null;
}
