import { createHmac, timingSafeEqual } from 'node:crypto';
import { decodeCanonicalBase64urlText } from '../../lib/base64url.js';

// Tracking tokens are stateless and HMAC-signed with the app secret: the open pixel names the
// email, the click link names the email and the destination URL. Without the secret no one
// can mint a link that redirects elsewhere (no open redirect) or records events for an email
// they were not sent. 128-bit tags: forgery stays out of reach and links stay short.

const TAG_BYTES = 16;

/**
 * The longest token the tracking routes accept (a bound on what they verify). A link whose
 * destination would make a longer one is left as written: a tracked link that 404s is worse
 * than an untracked one.
 */
export const MAX_TRACKING_TOKEN_CHARS = 8192;
const EMAIL_ID = /^[A-Za-z0-9_]{1,64}$/;

/** A key used only for tracking, so a tag can never be replayed as another feature's signature. */
function trackingKey(secret: string): Buffer {
  return createHmac('sha256', secret).update('posthorn tracking links v1').digest();
}

function tag(key: Buffer, ...parts: string[]): string {
  return createHmac('sha256', key).update(parts.join('\u0000')).digest().subarray(0, TAG_BYTES).toString('base64url');
}

function sameTag(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export interface TrackingTokens {
  open(emailId: string): string;
  click(emailId: string, url: string): string;
  verifyOpen(token: string): { emailId: string } | null;
  verifyClick(token: string): { emailId: string; url: string } | null;
}

export function createTrackingTokens(secret: string): TrackingTokens {
  const key = trackingKey(secret);
  return {
    open: (emailId) => `${emailId}.${tag(key, 'open', emailId)}`,
    click: (emailId, url) => `${emailId}.${Buffer.from(url, 'utf8').toString('base64url')}.${tag(key, 'click', emailId, url)}`,
    verifyOpen(token) {
      const [emailId, sig, ...rest] = token.split('.');
      if (rest.length || !emailId || !sig || !EMAIL_ID.test(emailId)) return null;
      return sameTag(sig, tag(key, 'open', emailId)) ? { emailId } : null;
    },
    verifyClick(token) {
      const [emailId, encoded, sig, ...rest] = token.split('.');
      if (rest.length || !emailId || !encoded || !sig || !EMAIL_ID.test(emailId)) return null;
      const url = decodeCanonicalBase64urlText(encoded);
      if (url === null) return null;
      return sameTag(sig, tag(key, 'click', emailId, url)) ? { emailId, url } : null;
    },
  };
}
