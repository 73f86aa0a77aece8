import type { Context } from 'koa';
import { clearCookie, readCookie, setCookie } from './console-http.js';
import type { Flash } from './console-context.js';

// Post/redirect/get with a one-time message carried in a short-lived cookie. Secrets (a new
// API key, a webhook's signing secret) are never put there: those pages answer the POST
// directly, once, with Cache-Control: no-store.

export const FLASH_COOKIE = 'posthorn_flash';

export function isSecure(publicUrl: string): boolean {
  return publicUrl.startsWith('https:');
}

/**
 * Browsers drop a cookie over 4096 bytes (name, value and attributes together), and the message
 * with it: a refusal quoting a long value would go back with no reason at all. The value is
 * kept to 3000 characters and the text to the 2000 that takeFlash reads, cut with an ellipsis.
 */
const FLASH_VALUE_MAX = 3000;
const FLASH_TEXT_MAX = 2000;

function encodeFlash(flash: Flash): string {
  const encode = (text: string) => Buffer.from(JSON.stringify({ kind: flash.kind, text })).toString('base64url');
  const chars = [...flash.text];
  if (chars.length <= FLASH_TEXT_MAX) {
    const whole = encode(flash.text);
    if (whole.length <= FLASH_VALUE_MAX) return whole;
  }
  // the longest prefix (in code points) that fits; JSON escapes and UTF-8 make bytes per character vary
  let lo = 0;
  let hi = Math.min(chars.length, FLASH_TEXT_MAX) - 1;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (encode(`${chars.slice(0, mid).join('')}…`).length <= FLASH_VALUE_MAX) lo = mid;
    else hi = mid - 1;
  }
  return encode(`${chars.slice(0, lo).join('')}…`);
}

export function redirectWithFlash(ctx: Context, secure: boolean, location: string, flash?: Flash): void {
  if (flash) setCookie(ctx, FLASH_COOKIE, encodeFlash(flash), { secure, sameSite: 'Lax', maxAgeSeconds: 60 });
  ctx.status = 303;
  ctx.redirect(location);
}

export function takeFlash(ctx: Context, secure: boolean): Flash | undefined {
  const raw = readCookie(ctx, FLASH_COOKIE);
  if (raw === undefined) return undefined;
  clearCookie(ctx, FLASH_COOKIE, { secure, sameSite: 'Lax' });
  try {
    const v = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as Flash;
    if ((v.kind === 'ok' || v.kind === 'error') && typeof v.text === 'string') return { kind: v.kind, text: v.text.slice(0, FLASH_TEXT_MAX) };
  } catch {
    // a cookie we did not write: ignore it
  }
  return undefined;
}

/** A console path from a same-origin Referer (where a failed form goes back to), else the fallback. */
export function backTo(ctx: Context, fallback: string): string {
  const ref = ctx.get('referer');
  if (!ref) return fallback;
  try {
    const u = new URL(ref);
    if (u.host !== ctx.host || !u.pathname.startsWith('/console')) return fallback;
    return u.pathname + u.search;
  } catch {
    return fallback;
  }
}

/** Where to go after signing in: only a console path of this site, else the overview. */
export function safeNext(next: unknown): string {
  if (typeof next !== 'string' || !/^\/console(\/|\?|$)/.test(next) || /[\\\r\n]/.test(next)) return '/console';
  return next;
}
