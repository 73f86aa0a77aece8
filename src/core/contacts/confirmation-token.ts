import { createHmac, timingSafeEqual } from 'node:crypto';
import { decodeCanonicalBase64url, decodeCanonicalBase64urlText } from '../../lib/base64url.js';

/*
 * Double opt-in confirmation links: `<publicUrl>/confirm/<token>`, where the token is
 * base64url("<contactId>:<expiry, epoch ms in base 36>") + "." + base64url(HMAC-SHA256).
 * The HMAC key is the app secret and the signed string carries a purpose label, so a
 * signature made for another kind of link (unsubscribe, tracking) never verifies here.
 * Nothing is stored: the link is valid exactly while the signature matches and the
 * expiry has not passed.
 */

/** How long a confirmation link works (useSend uses the same 7 days). */
export const CONFIRMATION_TTL_MS = 7 * 24 * 60 * 60 * 1000;
const PURPOSE = 'posthorn:contact-confirm:v1:';
/** Far longer than any token we issue; refuses to hash megabytes sent by a scanner. */
const MAX_TOKEN_LENGTH = 256;
const PAYLOAD = /^(ct_[A-Za-z0-9]{1,64}):([0-9a-z]{1,12})$/;

export type TokenCheck =
  | { ok: true; contactId: string; expiresAtMs: number }
  | { ok: false; reason: 'invalid' | 'expired'; contactId?: string };

function mac(secret: string, payload: string): Buffer {
  return createHmac('sha256', secret).update(PURPOSE + payload).digest();
}

export function signConfirmationToken(secret: string, contactId: string, expiresAtMs: number): string {
  const payload = `${contactId}:${expiresAtMs.toString(36)}`;
  return `${Buffer.from(payload, 'utf8').toString('base64url')}.${mac(secret, payload).toString('base64url')}`;
}

export function verifyConfirmationToken(secret: string, token: string, nowMs: number): TokenCheck {
  if (token.length > MAX_TOKEN_LENGTH) return { ok: false, reason: 'invalid' };
  const parts = token.split('.');
  if (parts.length !== 2) return { ok: false, reason: 'invalid' };
  const payload = decodeCanonicalBase64urlText(parts[0]!);
  const given = decodeCanonicalBase64url(parts[1]!);
  if (payload === null || !given) return { ok: false, reason: 'invalid' };
  const expected = mac(secret, payload);
  // Constant-time comparison; the length check first is required by timingSafeEqual and
  // leaks nothing (every valid signature has the same length).
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { ok: false, reason: 'invalid' };
  const m = PAYLOAD.exec(payload);
  if (!m) return { ok: false, reason: 'invalid' };
  const expiresAtMs = parseInt(m[2]!, 36);
  if (!Number.isSafeInteger(expiresAtMs)) return { ok: false, reason: 'invalid' };
  if (nowMs > expiresAtMs) return { ok: false, reason: 'expired', contactId: m[1]! };
  return { ok: true, contactId: m[1]!, expiresAtMs };
}
