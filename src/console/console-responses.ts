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

export function redirectWithFlash(ctx: Context, secure: boolean, location: string, flash?: Flash): void {
  if (flash) setCookie(ctx, FLASH_COOKIE, Buffer.from(JSON.stringify(flash)).toString('base64url'), { secure, sameSite: 'Lax', maxAgeSeconds: 60 });
  ctx.status = 303;
  ctx.redirect(location);
}

export function takeFlash(ctx: Context, secure: boolean): Flash | undefined {
  const raw = readCookie(ctx, FLASH_COOKIE);
  if (raw === undefined) return undefined;
  clearCookie(ctx, FLASH_COOKIE, { secure, sameSite: 'Lax' });
  try {
    const v = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as Flash;
    if ((v.kind === 'ok' || v.kind === 'error') && typeof v.text === 'string') return { kind: v.kind, text: v.text.slice(0, 2000) };
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

/** Where to go after signing in: only a console path of this site. */
export function safeNext(next: string | null | undefined): string {
  if (!next || !/^\/console(\/|\?|$)/.test(next) || /[\\\r\n]/.test(next)) return '/console';
  return next;
}
