import type { Context, Next } from 'koa';
import Router from '@koa/router';
import { AppError, HTTP_STATUS, type ErrorCode } from '../core/errors.js';
import { csrfTokenMatches } from '../core/users/session-service.js';
import { loadConsoleAssets, type ConsoleAssets } from './console-assets.js';
import type { ConsoleDeps, PageDeps } from './console-deps.js';
import type { ConsoleContext } from './console-context.js';
import { FORM_LIMIT_BYTES, readCookie, readForm, refuseNul } from './console-http.js';
import { backTo, isSecure, redirectWithFlash, takeFlash } from './console-responses.js';
import { html } from './html.js';
import { renderBarePage, renderPage } from './layout.js';
import { setPageHeaders } from './security-headers.js';
import { isLoginPath, isOperatorPath, PageRefusal, requireOperator } from './operator-access.js';
import { loginPages, SESSION_COOKIE } from './pages/login-pages.js';
import { faviconRoute, rootPage } from './pages/root-page.js';
import { overviewPage } from './pages/overview-page.js';
import { emailsPages } from './pages/emails-pages.js';
import { domainsPages } from './pages/domains-pages.js';
import { apiKeysPages } from './pages/api-keys-pages.js';
import { contactsPages } from './pages/contacts-pages.js';
import { contactImportPages, CSV_IMPORT_BODY_LIMIT, CSV_IMPORT_ROUTE } from './pages/contact-import-pages.js';
import { segmentsPages } from './pages/segments-pages.js';
import { templatesPages } from './pages/templates-pages.js';
import { campaignsPages } from './pages/campaigns-pages.js';
import { suppressionsPages } from './pages/suppressions-pages.js';
import { webhooksPages } from './pages/webhooks-pages.js';
import { receivedPages } from './pages/received-pages.js';
import { accountPage } from './pages/account-page.js';
import { operatorTeamsPage } from './pages/operator-teams-page.js';
import { operatorQueuePage } from './pages/operator-queue-page.js';

// The web console (docs/console.md): server-rendered pages under /console, served by the same
// Koa app as the API, calling the same core services. This file is its front door: security
// headers, static files, sessions, CSRF, error pages, and the page modules.

type Middleware = (ctx: Context, next: Next) => Promise<unknown>;

function compose(stack: Middleware[]): Middleware {
  return (ctx, next) => {
    const dispatch = (i: number): Promise<unknown> => (i === stack.length ? next() : Promise.resolve(stack[i]!(ctx, () => dispatch(i + 1))));
    return dispatch(0);
  };
}

const TITLES: Record<number, string> = { 400: 'Not possible', 401: 'Sign in first', 403: 'Not allowed', 404: 'Not found', 405: 'Not possible', 409: 'Already exists', 413: 'Too large', 422: 'Too slow', 429: 'Too many requests', 500: 'Something went wrong' };

const isUnsafe = (ctx: Context) => ctx.method !== 'GET' && ctx.method !== 'HEAD';
const wantsJson = (ctx: Context) => ctx.path.endsWith('.json') || /application\/json/.test(ctx.get('accept'));

/**
 * Registers every console page on `r` (paths relative to /console). Its own function so that a
 * test can list the console's routes from the router itself (test/proof/fuzz-console).
 */
export function consolePages(r: Router, d: PageDeps): void {
  loginPages(r, d);
  overviewPage(r, d);
  emailsPages(r, d);
  domainsPages(r, d);
  apiKeysPages(r, d);
  contactsPages(r, d);
  contactImportPages(r, d);
  segmentsPages(r, d);
  templatesPages(r, d);
  campaignsPages(r, d);
  suppressionsPages(r, d);
  webhooksPages(r, d);
  receivedPages(r, d);
  accountPage(r, d);
  operatorTeamsPage(r, d);
  operatorQueuePage(r, d);
}

export function mountConsole(router: Router, deps: ConsoleDeps): void {
  const assets = loadConsoleAssets();
  const secure = isSecure(deps.publicUrl);
  const publicOrigin = new URL(deps.publicUrl).origin;
  const d: PageDeps = { ...deps, assets };

  /** A change must come from a page of this site: Origin (or Sec-Fetch-Site) says where a browser's request comes from. */
  function sameOrigin(ctx: Context): boolean {
    const origin = ctx.get('origin');
    if (origin) return origin === `${ctx.protocol}://${ctx.host}` || origin === publicOrigin;
    const site = ctx.get('sec-fetch-site');
    if (site) return site === 'same-origin' || site === 'none';
    return true; // not a browser (curl): the CSRF token below must still match
  }

  async function errors(ctx: Context, next: Next): Promise<void> {
    try {
      await next();
    } catch (err) {
      const known = err instanceof AppError;
      if (!known) deps.logger.error({ err, method: ctx.method, path: ctx.path }, 'console request failed');
      const code: ErrorCode = known ? err.code : 'INTERNAL_SERVER_ERROR';
      const message = known ? err.message : 'The server could not complete this request. The error is in the server log.';
      const status = HTTP_STATUS[code];
      setPageHeaders(ctx);
      if (known && err.retryAfterSeconds !== undefined) ctx.set('Retry-After', String(err.retryAfterSeconds));
      if (wantsJson(ctx)) {
        ctx.status = status;
        ctx.body = { error: { code: code === 'QUERY_TOO_SLOW' ? 'BAD_REQUEST' : code, message } };
        return;
      }
      const c = ctx as ConsoleContext;
      if (code === 'UNAUTHORIZED') {
        redirectWithFlash(ctx, secure, '/console/login', { kind: 'error', text: message });
        return;
      }
      // A refused form goes back where it came from, saying why.
      if (known && isUnsafe(ctx) && c.state.console && status < 500 && status !== 401 && !(err instanceof PageRefusal)) {
        redirectWithFlash(ctx, secure, backTo(ctx, '/console'), { kind: 'error', text: message });
        return;
      }
      const body = html`<p class="lead">${message}</p><p><a href="/console">Back to the console</a></p>`;
      if (c.state.console) renderPage(c, assets, { title: TITLES[status] ?? 'Error', nav: '', body, status });
      else renderBarePage(ctx, assets, TITLES[status] ?? 'Error', body, status);
    }
  }

  async function headers(ctx: Context, next: Next): Promise<void> {
    await next();
    // Pages that set their own policy (the sandboxed email frames) keep it.
    if (!ctx.response.get('Content-Security-Policy')) setPageHeaders(ctx);
  }

  function staticFiles(a: ConsoleAssets) {
    const byPath = new Map(Object.values(a).map((x) => [x.path, x]));
    return async (ctx: Context, next: Next) => {
      if (!ctx.path.startsWith('/console/assets/')) return next();
      const asset = byPath.get(ctx.path);
      if (!asset || isUnsafe(ctx)) throw new AppError('NOT_FOUND', 'no such file');
      ctx.set('Cache-Control', 'public, max-age=31536000, immutable');
      ctx.type = asset.type;
      ctx.body = asset.body;
    };
  }

  async function guard(ctx: Context, next: Next): Promise<unknown> {
    const unsafe = isUnsafe(ctx);
    if (unsafe && !sameOrigin(ctx)) throw new AppError('FORBIDDEN', 'This request came from another site and was refused. Use the console itself to make changes.');
    try {
      refuseNul(ctx);
    } catch (err) {
      if (unsafe) ctx.req.resume();
      throw err;
    }
    // Every path the router takes for the sign-in page: its handlers read the form from here.
    if (isLoginPath(ctx.path)) {
      const login = unsafe ? await readForm(ctx) : { fields: new URLSearchParams() };
      refuseNul(ctx, login);
      ctx.state.loginForm = login.fields;
      return next();
    }
    const session = await deps.sessions.resolve(readCookie(ctx, SESSION_COOKIE));
    if (!session) {
      if (!unsafe && !wantsJson(ctx)) {
        ctx.status = 303;
        return ctx.redirect(`/console/login?next=${encodeURIComponent(ctx.originalUrl)}`);
      }
      ctx.req.resume();
      throw new AppError('UNAUTHORIZED', 'Your session has ended. Sign in again.');
    }
    // Signed in, and the request is one the router gives to the CSV upload (method and route
    // as it matches them): only then a form as large as a CSV file. The CSRF token travels in
    // that form, so it can only be checked once the form is read.
    const limit = isCsvImport(ctx) ? CSV_IMPORT_BODY_LIMIT : FORM_LIMIT_BYTES;
    const form = unsafe ? await readForm(ctx, limit) : { fields: new URLSearchParams() };
    if (unsafe && !csrfTokenMatches(session.csrfToken, form.fields.get('_csrf') ?? (ctx.get('x-csrf-token') || undefined))) {
      throw new AppError('FORBIDDEN', 'This form is out of date or did not come from the console (its CSRF token does not match). Reload the page and try again.');
    }
    refuseNul(ctx, form);
    const team = await deps.services.teams.get(session.user.teamId);
    (ctx as ConsoleContext).state.console = {
      user: session.user,
      teamName: team?.name ?? `Team ${session.user.teamId}`,
      csrfToken: session.csrfToken,
      flash: unsafe ? undefined : takeFlash(ctx, secure),
      form: form.fields,
      file: form.file,
    };
    if (isOperatorPath(ctx.path)) requireOperator(ctx as ConsoleContext);
    return next();
  }

  const inner = new Router({ prefix: '/console' });
  consolePages(inner, d);
  const importRoute = `/console${CSV_IMPORT_ROUTE}`;
  const isCsvImport = (ctx: Context) => inner.match(ctx.path, ctx.method).pathAndMethod.some((layer) => layer.path === importRoute);

  async function notFound(): Promise<void> {
    throw new AppError('NOT_FOUND', 'There is no console page at this address.');
  }

  const chain = compose([headers, errors, staticFiles(assets), guard, inner.routes() as unknown as Middleware, notFound]);
  router.all(['/console', '/console/{*rest}'], (ctx, next) => chain(ctx, next) as Promise<void>);
  rootPage(router, assets);
  faviconRoute(router, assets);
}
