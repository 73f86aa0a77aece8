import { createHmac, randomBytes } from 'node:crypto';

// Spec, Events > Delivery 2-3: X-Service-Timestamp is milliseconds since the epoch and
// X-Service-Signature is "v1=" + hex HMAC-SHA256 over "<timestamp>.<raw body>", keyed with
// the endpoint secret. Binding the timestamp into the MAC lets receivers reject replays.

export const SIGNATURE_VERSION = 'v1';
export const TIMESTAMP_HEADER = 'X-Service-Timestamp';
export const SIGNATURE_HEADER = 'X-Service-Signature';
/** useSend's names for the same values, so the usesend-js `webhooks().constructEvent` verifies our calls. */
export const USESEND_TIMESTAMP_HEADER = 'X-UseSend-Timestamp';
export const USESEND_SIGNATURE_HEADER = 'X-UseSend-Signature';

/** `whsec_` + 32 random bytes in hex (the same shape useSend uses). */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('hex')}`;
}

export function signWebhookBody(secret: string, timestampMs: number, body: string | Buffer): string {
  const mac = createHmac('sha256', secret);
  mac.update(`${timestampMs}.`);
  mac.update(body);
  return `${SIGNATURE_VERSION}=${mac.digest('hex')}`;
}
