import { randomBytes } from 'node:crypto';

// Public ids carry a type prefix and 120 random bits (base62), so they are never
// reused and cannot be guessed in sequence (DESIGN 4, Identifiers).
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const ID_RANDOM_CHARS = 21; // 62^21 > 2^125

export function randomString(length: number, alphabet = ALPHABET): string {
  // Rejection sampling keeps every character uniformly likely.
  const limit = 256 - (256 % alphabet.length);
  let out = '';
  while (out.length < length) {
    const bytes = randomBytes(length * 2);
    for (const b of bytes) {
      if (b >= limit) continue;
      out += alphabet[b % alphabet.length];
      if (out.length === length) break;
    }
  }
  return out;
}

export type IdPrefix = 'em' | 'cb' | 'ct' | 'cp' | 'tp' | 'tv' | 'sg' | 'wh' | 'ev' | 'wa' | 'dl' | 're' | 'sp';

export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomString(ID_RANDOM_CHARS)}`;
}
