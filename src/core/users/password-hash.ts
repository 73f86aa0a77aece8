import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

// Console passwords are chosen by people, so unlike API keys (architecture.md, Decisions: API
// keys) they get a slow, memory-hard hash: scrypt (RFC 7914) from node:crypto. N = 2^15,
// r = 8 costs 32 MiB and tens of milliseconds per guess, which is what OWASP recommends for
// scrypt. The parameters travel with the hash, so they can be raised later without
// invalidating stored passwords.

/** log2 of scrypt's N for new hashes. Only the tests' in-process apps ask for less (AppOptions). */
export const PASSWORD_HASH_COST = 15;
/** The costs a stored hash may name; verifyPassword refuses others. */
const MIN_PASSWORD_HASH_COST = 10;
const MAX_PASSWORD_HASH_COST = 20;
const BLOCK_SIZE = 8;
const PARALLEL = 1;
const KEY_BYTES = 32;
const SALT_BYTES = 16;
/** scrypt needs 128 * r * N bytes; Node refuses more than 32 MiB unless told, so twice that is allowed. */
const maxMem = (log2N: number, r: number) => 2 * 128 * r * 2 ** log2N;

function derive(password: string, salt: Buffer, opts: ScryptOptions, length: number): Promise<Buffer> {
  return new Promise((resolve, reject) => scrypt(password.normalize('NFC'), salt, length, opts, (err, key) => (err ? reject(err) : resolve(key))));
}

export async function hashPassword(password: string, log2N = PASSWORD_HASH_COST): Promise<string> {
  if (!Number.isInteger(log2N) || log2N < MIN_PASSWORD_HASH_COST || log2N > MAX_PASSWORD_HASH_COST) throw new RangeError(`password hash cost ${log2N} is out of range`);
  const salt = randomBytes(SALT_BYTES);
  const key = await derive(password, salt, { N: 2 ** log2N, r: BLOCK_SIZE, p: PARALLEL, maxmem: maxMem(log2N, BLOCK_SIZE) }, KEY_BYTES);
  return `scrypt$${log2N}$${BLOCK_SIZE}$${PARALLEL}$${salt.toString('base64')}$${key.toString('base64')}`;
}

/** Whether the password matches; false for a malformed stored hash. Compares in constant time. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const m = /^scrypt\$(\d{1,2})\$(\d{1,2})\$(\d{1,2})\$([A-Za-z0-9+/=]+)\$([A-Za-z0-9+/=]+)$/.exec(stored);
  if (!m) return false;
  const [logN, r, p] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (logN < MIN_PASSWORD_HASH_COST || logN > MAX_PASSWORD_HASH_COST || r < 1 || r > 32 || p < 1 || p > 4) return false;
  const expected = Buffer.from(m[5]!, 'base64');
  // A shortened key would verify against a prefix of the derived one.
  if (expected.length < KEY_BYTES) return false;
  const key = await derive(password, Buffer.from(m[4]!, 'base64'), { N: 2 ** logN, r, p, maxmem: maxMem(logN, r) }, expected.length);
  return key.length === expected.length && timingSafeEqual(key, expected);
}

/** A hash of a random password at the cost new hashes get: verified against when the user does not exist, so timing does not tell. */
export const dummyHash = (log2N = PASSWORD_HASH_COST): Promise<string> => hashPassword(randomBytes(16).toString('hex'), log2N);
