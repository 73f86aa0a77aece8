import type Router from '@koa/router';
import type { ConsoleAssets } from '../console-assets.js';
import { html } from '../html.js';
import { renderBarePage } from '../layout.js';
import { setPageHeaders } from '../security-headers.js';

/** GET /: what this server is and where to go (the console, health, the API description). */
export function rootPage(router: Router, assets: ConsoleAssets): void {
  router.get('/', async (ctx) => {
    renderBarePage(
      ctx,
      assets,
      'Posthorn',
      html`<p class="lead">This server sends and receives email for its users' domains.</p>
<ul class="links"><li><a href="/console">Web console</a>: sign in to manage domains, emails, contacts and campaigns</li>
<li><a href="/v1/openapi.json">API description</a> (OpenAPI 3.1; the API lives under <code>/v1</code>)</li>
<li><a href="/health">Health</a></li></ul>`,
    );
    setPageHeaders(ctx);
    ctx.set('Cache-Control', 'no-cache');
  });
}

/**
 * A day: /favicon.ico has no hash in its name (browsers ask for it by that name), so unlike the
 * hashed assets it cannot be immutable; a new icon reaches them within a day.
 */
const FAVICON_MAX_AGE_SECONDS = 86_400;

/**
 * GET /favicon.ico: browsers ask for it on every site whatever the page links (the API's JSON,
 * /health). The console's icon is SVG only, so that is the answer, with its type.
 */
export function faviconRoute(router: Router, assets: ConsoleAssets): void {
  router.get('/favicon.ico', async (ctx) => {
    setPageHeaders(ctx);
    ctx.set('Cache-Control', `public, max-age=${FAVICON_MAX_AGE_SECONDS}`);
    ctx.type = assets.icon.type;
    ctx.body = assets.icon.body;
  });
}
