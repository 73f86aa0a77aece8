import { AppError } from '../core/errors.js';
import type { OperatorActor } from '../core/operators/audit-service.js';
import type { ConsoleContext } from './console-context.js';
import type { Handler } from './console-deps.js';

// Who may use the operator pages, and how their changes are named in the audit log.

/**
 * A refusal answered with its own error page and status, never by going back to the form
 * with a message (as a refused form is): a team member has no operator form to go back to.
 */
export class PageRefusal extends AppError {}

const notAnOperator = () => new PageRefusal('FORBIDDEN', 'This page is for operators of this server.');

/**
 * Whether a request path is under /console/operator, as the router would match it: the router
 * ignores case, and a client may percent-encode letters or double a slash.
 */
export function isOperatorPath(path: string): boolean {
  return /^\/console\/+operator(\/|$)/i.test(decodedPath(path));
}

/** Whether a request path is the sign-in page, as the router matches it (any case, escaping or trailing slash). */
export function isLoginPath(path: string): boolean {
  return /^\/console\/+login\/?$/i.test(decodedPath(path));
}

function decodedPath(path: string): string {
  try {
    return decodeURIComponent(path);
  } catch {
    return path; // not decodable: the router cannot match it to a page either
  }
}

/** The wall: every request under /console/operator from a team member is refused (console-module's guard). */
export function requireOperator(ctx: ConsoleContext): void {
  if (!ctx.state.console.user.operator) throw notAnOperator();
}

/** The door: each operator handler checks again, so a page mounted elsewhere stays closed too. */
export function operatorOnly(handler: Handler): Handler {
  return async (ctx: ConsoleContext) => {
    requireOperator(ctx);
    return handler(ctx);
  };
}

/** The signed-in operator, as the audit log records them: "console user 3 (ops@example.com)". */
export function operatorActor(ctx: ConsoleContext): OperatorActor {
  const { user } = ctx.state.console;
  return { consoleUserId: user.id, email: user.email };
}
