import { createHmac, timingSafeEqual } from 'node:crypto';
import { decodeCanonicalBase64url, decodeCanonicalBase64urlText } from '../../lib/base64url.js';

// Per-contact unsubscribe links: the token names the campaign and the contact and carries an
// HMAC, so nobody can unsubscribe someone else by editing the link. Unsubscribe links must keep
// working for as long as the mail sits in an inbox, so they do not expire.
const MAC_BYTES = 16;

function mac(secret: string, payload: string): Buffer {
  return createHmac('sha256', secret).update(`unsubscribe:${payload}`).digest().subarray(0, MAC_BYTES);
}

export function signUnsubscribeToken(secret: string, campaignId: string, contactId: string): string {
  const payload = `${campaignId}.${contactId}`;
  return `${Buffer.from(payload).toString('base64url')}.${mac(secret, payload).toString('base64url')}`;
}

export function verifyUnsubscribeToken(secret: string, token: string): { campaignId: string; contactId: string } | null {
  const [payloadPart, macPart, extra] = token.split('.');
  if (!payloadPart || !macPart || extra !== undefined || token.length > 400) return null;
  const payload = decodeCanonicalBase64urlText(payloadPart);
  const given = decodeCanonicalBase64url(macPart);
  if (payload === null || !given) return null;
  const expected = mac(secret, payload);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
  const [campaignId, contactId] = payload.split('.');
  return campaignId && contactId ? { campaignId, contactId } : null;
}
