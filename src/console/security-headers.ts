import type { Context } from 'koa';

// Every console response carries these (docs/console.md, Security). The page policy allows
// only the console's own files: no inline script, no inline style (attributes included), no
// other origin; frames only from the console itself (the sandboxed email previews), and no
// one may frame the console (clickjacking).
export const PAGE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');

/**
 * Email HTML is hostile input. It is only ever shown in an <iframe sandbox> (no scripts, no
 * same-origin, no forms, no top navigation) and served with this policy on top: a sandbox of
 * its own, no script, no request anywhere except inline styles and data: images (remote
 * images only when the viewer asks, and then only https). Framed by the console only.
 */
export function emailFrameCsp(remoteImages: boolean): string {
  return [
    "default-src 'none'",
    "style-src 'unsafe-inline'",
    `img-src data: cid:${remoteImages ? ' https:' : ''}`,
    'font-src data:',
    "form-action 'none'",
    "base-uri 'none'",
    "frame-ancestors 'self'",
    'sandbox',
  ].join('; ');
}

export function setPageHeaders(ctx: Context, csp = PAGE_CSP): void {
  ctx.set('Content-Security-Policy', csp);
  // For browsers that predate frame-ancestors.
  ctx.set('X-Frame-Options', csp === PAGE_CSP ? 'DENY' : 'SAMEORIGIN');
  ctx.set('X-Content-Type-Options', 'nosniff');
  ctx.set('Referrer-Policy', 'same-origin');
  ctx.set('Cross-Origin-Opener-Policy', 'same-origin');
  ctx.set('Cross-Origin-Resource-Policy', 'same-origin');
  ctx.set('Permissions-Policy', 'camera=(), microphone=(), geolocation=(), payment=(), usb=()');
  if (!ctx.response.get('Cache-Control')) ctx.set('Cache-Control', 'no-store');
}
