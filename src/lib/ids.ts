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

/** Wide enough for any millisecond time until the year 5188 in base 36. */
const TIME_PREFIX_CHARS = 9;

/**
 * The time as 9 base-36 digits in lower case: strings in creation order, and lower() keeps that
 * order. A key that begins with it lands next to the keys written just before it.
 */
export function timePrefix(nowMs: number): string {
  return Math.max(0, Math.floor(nowMs)).toString(36).padStart(TIME_PREFIX_CHARS, '0');
}

/**
 * An id that begins with its creation time, then the same random characters as newId (so it is
 * as unguessable). For the rows inserted on every send: random keys made each new email dirty
 * a page of every index on them (its id, lower(id), its deliveries and events by email id), one
 * WAL page each per group commit; time-ordered keys share the rightmost pages instead.
 */
export function newTimeOrderedId(prefix: IdPrefix, nowMs: number): string {
  return `${prefix}_${timePrefix(nowMs)}${randomString(ID_RANDOM_CHARS)}`;
}

/** How long newTimeOrderedId's ids are: older stores also hold ids of newId's shape. */
export function timeOrderedIdLength(prefix: IdPrefix): number {
  return prefix.length + 1 + TIME_PREFIX_CHARS + ID_RANDOM_CHARS;
}
