import type Router from '@koa/router';
import type { Context } from 'koa';
import { AppError } from '../core/errors.js';
import type { TrackingHit, TrackingService } from '../core/tracking/tracking-service.js';
import { MAX_TRACKING_TOKEN_CHARS } from '../core/tracking/tracking-tokens.js';
import type { Logger } from '../lib/logger.js';

// Open pixel and click redirect, outside /v1 (no API key: the signed token is the credential).
// Served on the shared host and on every domain's tracking host (a CNAME to this server);
// the service refuses a token presented on another domain's tracking host.

/** A transparent 1x1 GIF (43 bytes). */
const PIXEL = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');
const NO_STORE = 'no-store, no-cache, must-revalidate, private';

function hit(ctx: Context, token: string): TrackingHit {
  return {
    token,
    userAgent: ctx.get('user-agent') || null,
    // The connection's address, or X-Forwarded-For's client when http.trustProxy is on.
    ip: ctx.ip || null,
    host: ctx.hostname.toLowerCase(),
  };
}

export function trackingRoutes(tracking: TrackingService, logger: Logger) {
  return (router: Router): void => {
    router.get('/t/o/:file', async (ctx) => {
      const file = String((ctx as Context & { params: Record<string, string> }).params.file ?? '');
      // Always the image, whatever the token: a mail client shows a broken image for an
      // error, and a prober learns nothing from the answer.
      if (ctx.method === 'GET' && file.endsWith('.gif') && file.length <= MAX_TRACKING_TOKEN_CHARS) {
        try {
          await tracking.recordOpen(hit(ctx, file.slice(0, -'.gif'.length)));
        } catch (err) {
          logger.error({ err }, 'recording an open failed');
        }
      }
      ctx.status = 200;
      ctx.type = 'image/gif';
      ctx.set('Cache-Control', NO_STORE);
      ctx.body = PIXEL;
    });

    router.get('/t/c/:token', async (ctx) => {
      const token = String((ctx as Context & { params: Record<string, string> }).params.token ?? '');
      const url = token.length <= MAX_TRACKING_TOKEN_CHARS ? await tracking.click(hit(ctx, token), ctx.method === 'GET') : null;
      // A bad signature is a 404, never a redirect: nobody can use this host as an open redirect.
      if (!url) throw new AppError('NOT_FOUND', 'unknown tracking link');
      ctx.status = 302;
      ctx.set('Location', url);
      ctx.set('Cache-Control', NO_STORE);
      ctx.set('Referrer-Policy', 'no-referrer');
      ctx.body = '';
    });
  };
}
