import type Router from '@koa/router';
import { AppError, badRequest } from '../../core/errors.js';
import { checkPassword } from '../../core/users/user-service.js';
import { route, type PageDeps } from '../console-deps.js';
import { setCookie } from '../console-http.js';
import { isSecure, redirectWithFlash } from '../console-responses.js';
import { html } from '../html.js';
import { csrfField, definitionList, input, renderPage, section, time } from '../layout.js';
import { SESSION_COOKIE } from './login-pages.js';

// The signed-in user's own account: who it is, and a new password.

export function accountPage(r: Router, d: PageDeps): void {
  const secure = isSecure(d.publicUrl);

  route(r, 'get', '/account', async (ctx) => {
    const u = ctx.state.console.user;
    renderPage(ctx, d.assets, {
      title: 'Your account',
      nav: '',
      body: html`${section('Account', definitionList([
        ['Email', u.email],
        ['Team', ctx.state.console.teamName],
        ['Role', u.operator ? 'operator (also manages teams and the queue)' : 'team member'],
        ['Last sign-in', time(u.lastLoginAt)],
      ]))}
${section('Change your password', html`<form method="post" action="/console/account/password" class="stack">${csrfField(ctx)}
<input type="text" name="username" autocomplete="username" value="${u.email}" hidden>
${input({ name: 'currentPassword', label: 'Current password', type: 'password', required: true, autocomplete: 'current-password' })}
${input({ name: 'newPassword', label: 'New password', type: 'password', required: true, autocomplete: 'new-password', hint: 'At least 10 characters. Your other sessions are signed out.' })}
${input({ name: 'confirmPassword', label: 'New password again', type: 'password', required: true, autocomplete: 'new-password' })}
<button type="submit" class="btn primary">Change password</button></form>`)}`,
    });
  });

  route(r, 'post', '/account/password', async (ctx) => {
    const next = ctx.state.console.form.get('newPassword') ?? '';
    if (next !== (ctx.state.console.form.get('confirmPassword') ?? '')) throw badRequest('newPassword: the two new passwords differ');
    checkPassword(next);
    const user = ctx.state.console.user;
    // Proving the current password is a sign-in: it counts against the same limits, so a
    // session (a stolen cookie) is no way to guess the password without them.
    const decision = await d.loginThrottle.begin(user.email, ctx.ip);
    if (!decision.allowed) {
      const minutes = Math.ceil(decision.retryAfterSeconds / 60);
      throw new AppError('RATE_LIMITED', `Too many failed sign-in attempts ${decision.reason === 'account' ? 'for this account' : 'from your network address'}. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}.`, decision.retryAfterSeconds);
    }
    // A wrong current password throws and leaves the attempt counted as a failure.
    await d.users.changePassword(user.id, ctx.state.console.form.get('currentPassword') ?? '', next);
    await decision.attempt.succeeded();
    // Every session ended with the old password; this one carries on with a fresh session.
    const session = await d.sessions.create(user.id);
    setCookie(ctx, SESSION_COOKIE, session.token, { secure, sameSite: 'Lax', maxAgeSeconds: d.sessions.policy.absoluteMs / 1000 });
    redirectWithFlash(ctx, secure, '/console/account', { kind: 'ok', text: 'Your password was changed; other sessions were signed out.' });
  });
}
