import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { randomString } from '../../lib/ids.js';

/*
 * The shape every Posthorn key has, team and operator keys alike: `ph_<public id>_<secret>`.
 * The public id finds the row; only a SHA-256 of the secret is stored (the secret has 192
 * random bits, so a slow hash buys nothing and costs every request: architecture.md,
 * Decisions: API keys), compared in constant time.
 */

const KEY_PREFIX = 'ph';
const PUBLIC_ID_CHARS = 12;
const SECRET_BYTES = 24;
const KEY_PATTERN = /^ph_([0-9a-z]{12})_([A-Za-z0-9_-]{20,})$/;

export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

export interface NewKeyToken {
  publicId: string;
  token: string;
  secretHash: string;
  /** First and last characters of the full key, so people can tell keys apart. */
  partialKey: string;
}

export function newKeyToken(): NewKeyToken {
  const publicId = randomString(PUBLIC_ID_CHARS, '0123456789abcdefghijklmnopqrstuvwxyz');
  const secret = randomBytes(SECRET_BYTES).toString('base64url');
  const token = `${KEY_PREFIX}_${publicId}_${secret}`;
  return { publicId, token, secretHash: hashSecret(secret), partialKey: `${token.slice(0, 9)}...${token.slice(-3)}` };
}

/** The public id and secret of a well-formed key, or null. */
export function parseKeyToken(token: string): { publicId: string; secret: string } | null {
  const m = KEY_PATTERN.exec(token);
  return m ? { publicId: m[1]!, secret: m[2]! } : null;
}

/** Whether `secret` hashes to `storedHash`; hashes even without a row, so timing does not reveal which public ids exist. */
export function secretMatches(secret: string, storedHash: string | undefined): boolean {
  const presented = Buffer.from(hashSecret(secret), 'hex');
  const stored = Buffer.from(storedHash ?? '0'.repeat(64), 'hex');
  return timingSafeEqual(presented, stored) && storedHash !== undefined;
}
