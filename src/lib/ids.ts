import { randomBytes } from 'node:crypto';

// Public ids carry a type prefix and 120 random bits (base62), so they are never
// reused and cannot be guessed in sequence (architecture.md, Decisions: identifiers).
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const ID_RANDOM_CHARS = 21; // 62^21 > 2^125

// Random bytes are drawn from the CSPRNG 4 KiB at a time: a randomBytes() call per id was
// ~2% of an API send's CPU (two ids per send), most of it the call, not the randomness.
const POOL_BYTES = 4096;
let pool = Buffer.alloc(0);
let poolOffset = 0;

function nextRandomByte(): number {
  if (poolOffset >= pool.length) {
    pool = randomBytes(POOL_BYTES);
    poolOffset = 0;
  }
  return pool[poolOffset++]!;
}

export function randomString(length: number, alphabet = ALPHABET): string {
  // Rejection sampling keeps every character uniformly likely.
  const limit = 256 - (256 % alphabet.length);
  let out = '';
  while (out.length < length) {
    const b = nextRandomByte();
    if (b < limit) out += alphabet[b % alphabet.length];
  }
  return out;
}

export type IdPrefix = 'em' | 'cb' | 'ct' | 'cp' | 'tp' | 'tv' | 'sg' | 'wh' | 'ev' | 'wa' | 'dl' | 're' | 'sp' | 'sm' | 'su' | 'sh' | 'tlsr' | 'ci';

export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomString(ID_RANDOM_CHARS)}`;
}
