import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

// Console passwords are chosen by people, so unlike API keys (architecture.md, Decisions: API
// keys) they get a slow, memory-hard hash: scrypt (RFC 7914) from node:crypto. N = 2^15,
// r = 8 costs 32 MiB and tens of milliseconds per guess, which is what OWASP recommends for
// scrypt. The parameters travel with the hash, so they can be raised later without
// invalidating stored passwords.

const LOG2_N = 15;
const BLOCK_SIZE = 8;
const PARALLEL = 1;
const KEY_BYTES = 32;
const SALT_BYTES = 16;
/** Node refuses more than 32 MiB by default; the cost above needs exactly that, plus slack. */
const MAX_MEM = 64 * 1024 * 1024;

function derive(password: string, salt: Buffer, opts: ScryptOptions, length: number): Promise<Buffer> {
  return new Promise((resolve, reject) => scrypt(password.normalize('NFC'), salt, length, opts, (err, key) => (err ? reject(err) : resolve(key))));
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const key = await derive(password, salt, { N: 2 ** LOG2_N, r: BLOCK_SIZE, p: PARALLEL, maxmem: MAX_MEM }, KEY_BYTES);
  return `scrypt$${LOG2_N}$${BLOCK_SIZE}$${PARALLEL}$${salt.toString('base64')}$${key.toString('base64')}`;
}

/** Whether the password matches; false for a malformed stored hash. Compares in constant time. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const m = /^scrypt\$(\d{1,2})\$(\d{1,2})\$(\d{1,2})\$([A-Za-z0-9+/=]+)\$([A-Za-z0-9+/=]+)$/.exec(stored);
  if (!m) return false;
  const [logN, r, p] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (logN < 10 || logN > 20 || r < 1 || r > 32 || p < 1 || p > 4) return false;
  const expected = Buffer.from(m[5]!, 'base64');
  const key = await derive(password, Buffer.from(m[4]!, 'base64'), { N: 2 ** logN, r, p, maxmem: 4 * 128 * r * 2 ** logN }, expected.length);
  return key.length === expected.length && timingSafeEqual(key, expected);
}

/** A hash of a random password: verified against when the user does not exist, so timing does not tell. */
export const DUMMY_HASH_PROMISE = (): Promise<string> => hashPassword(randomBytes(16).toString('hex'));
