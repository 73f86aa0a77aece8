import { randomBytes } from 'node:crypto';
import type { Context } from 'koa';
import type Router from '@koa/router';
import { csrfTokenMatches } from '../../core/users/session-service.js';
import type { PageDeps } from '../console-deps.js';
import { clearCookie, readCookie, setCookie } from '../console-http.js';
import { isSecure, redirectWithFlash, safeNext, takeFlash } from '../console-responses.js';
import { html, type HtmlValue } from '../html.js';
import { renderBarePage } from '../layout.js';

// Signing in and out (docs/console.md, Users and sessions).

export const SESSION_COOKIE = 'posthorn_session';
/** Before there is a session, the sign-in form is protected by a token in its own cookie (login CSRF). */
const LOGIN_COOKIE = 'posthorn_login';

export function loginPages(r: Router, d: PageDeps): void {
  const secure = isSecure(d.publicUrl);

  function form(ctx: Context, o: { email?: string; next?: string; message?: HtmlValue; status?: number; tone?: 'error' | 'ok' }): void {
    let token = readCookie(ctx, LOGIN_COOKIE);
    if (!token || !/^[A-Za-z0-9_-]{32}$/.test(token)) {
      token = randomBytes(24).toString('base64url');
      setCookie(ctx, LOGIN_COOKIE, token, { secure, sameSite: 'Strict', maxAgeSeconds: 3600 });
    }
    const message = o.message ? html`<div class="flash flash-${o.tone ?? 'error'}" role="${o.tone === 'ok' ? 'status' : 'alert'}">${o.message}</div>` : '';
    renderBarePage(
      ctx,
      d.assets,
      'Sign in to Posthorn',
      html`${message}<form method="post" action="/console/login" class="stack login">
<input type="hidden" name="_csrf" value="${token}"><input type="hidden" name="next" value="${o.next ?? ''}">
<div class="field"><label for="email">Email</label><input id="email" name="email" type="email" autocomplete="username" required value="${o.email ?? ''}"${o.email ? '' : html` autofocus`}></div>
<div class="field"><label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required${o.email ? html` autofocus` : ''}></div>
<button type="submit" class="btn primary">Sign in</button></form>
<p class="hint">No account yet? An operator creates one with <code>posthorn users create</code>.</p>`,
      o.status ?? 200,
    );
    ctx.set('Cache-Control', 'no-store');
  }

  r.get('/login', async (ctx) => {
    // Koa reads a repeated parameter as an array: the first one counts, as f.get does for the form.
    const asked = ctx.query.next;
    const first = Array.isArray(asked) ? asked[0] : asked;
    if (await d.sessions.resolve(readCookie(ctx, SESSION_COOKIE))) return ctx.redirect(safeNext(first));
    const flash = takeFlash(ctx, secure);
    const next = safeNext(first);
    form(ctx, { next: next === first ? next : undefined, message: flash?.text, tone: flash?.kind });
  });

  r.post('/login', async (ctx) => {
    const f = ctx.state.loginForm as URLSearchParams;
    const email = (f.get('email') ?? '').trim();
    const password = f.get('password') ?? '';
    const next = f.get('next') ?? undefined;
    if (!csrfTokenMatches(readCookie(ctx, LOGIN_COOKIE) ?? '', f.get('_csrf') ?? undefined)) {
      return form(ctx, { email, next, status: 403, message: 'The sign-in form had expired. Please sign in again.' });
    }
    if (!email || !password) return form(ctx, { email, next, status: 400, message: 'Enter your email and your password.' });
    const decision = await d.loginThrottle.begin(email, ctx.ip);
    if (!decision.allowed) {
      const minutes = Math.ceil(decision.retryAfterSeconds / 60);
      ctx.set('Retry-After', String(decision.retryAfterSeconds));
      const who = decision.reason === 'account' ? 'for this account' : 'from your network address';
      return form(ctx, {
        email,
        next,
        status: 429,
        message: `Too many failed sign-in attempts ${who}. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}, or ask an operator to reset your password (posthorn users reset-password).`,
      });
    }
    const user = await d.users.verifyCredentials(email, password);
    // A wrong password leaves the attempt counted as a failure.
    if (!user) return form(ctx, { email, next, status: 401, message: 'That email and password do not match an account.' });
    await decision.attempt.succeeded();
    // A session this browser still had (a tab left signed in, maybe as someone else) ends
    // here, on the server too: only the new one lives on in the cookie.
    await d.sessions.destroy(readCookie(ctx, SESSION_COOKIE));
    const session = await d.sessions.create(user.id);
    setCookie(ctx, SESSION_COOKIE, session.token, { secure, sameSite: 'Lax', maxAgeSeconds: d.sessions.policy.absoluteMs / 1000 });
    clearCookie(ctx, LOGIN_COOKIE, { secure, sameSite: 'Strict' });
    ctx.status = 303;
    ctx.redirect(safeNext(next));
  });

  r.post('/logout', async (ctx) => {
    await d.sessions.destroy(readCookie(ctx, SESSION_COOKIE));
    clearCookie(ctx, SESSION_COOKIE, { secure, sameSite: 'Lax' });
    redirectWithFlash(ctx, secure, '/console/login', { kind: 'ok', text: 'You are signed out.' });
  });
}
