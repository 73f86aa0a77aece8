import type { Context } from 'koa';
import { badRequest, notFound } from '../core/errors.js';
import { plainIssues } from '../core/plain-issues.js';
import { isIntId } from '../core/int-id.js';
import type { ConsoleUserView } from '../core/users/user-service.js';

// What every signed-in console request carries, set by the session middleware.

export interface Flash {
  kind: 'ok' | 'error';
  text: string;
}

export interface ConsoleState {
  user: ConsoleUserView;
  teamName: string;
  csrfToken: string;
  flash?: Flash;
  /** The form of a POST, read (and CSRF-checked) before the handler runs. */
  form: URLSearchParams;
  file?: { name: string; text: string };
}

export type ConsoleContext = Context & { state: { console: ConsoleState }; params: Record<string, string> };

/** The team scope every team page passes to core: the user's team, never a domain restriction. */
export function scopeOf(ctx: ConsoleContext): { teamId: number; domainId: null } {
  return { teamId: ctx.state.console.user.teamId, domainId: null };
}

/** The send context of the console: the team, no key. */
export function sendContextOf(ctx: ConsoleContext): { teamId: number; domainId: null; apiKeyId: null } {
  return { teamId: ctx.state.console.user.teamId, domainId: null, apiKeyId: null };
}

/**
 * The integer id of the path (`:id`): digits only, 1 to MAX_INT_ID; anything else names no row,
 * so it is the console's 404 page, never a prefix read leniently ("12abc" is not 12).
 */
export function intIdOf(ctx: ConsoleContext, what: string): number {
  const text = ctx.params.id ?? '';
  const id = /^\d{1,10}$/.test(text) ? Number(text) : 0;
  if (!isIntId(id)) throw notFound(`${what} not found`);
  return id;
}

/** A text field of the form, trimmed; '' when absent. */
export function field(ctx: ConsoleContext, name: string): string {
  return (ctx.state.console.form.get(name) ?? '').trim();
}

/** A form turned into a body checked by core's own schema (the API's); 400 naming the first bad field. */
export function parseWith<T>(schema: { safeParse(v: unknown, params?: typeof plainIssues): { success: true; data: T } | { success: false; error: { issues: { path: PropertyKey[]; message: string }[] } } }, value: unknown): T {
  const r = schema.safeParse(value, plainIssues);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  throw badRequest(`${issue.path.map(String).join('.') || 'form'}: ${issue.message}`);
}
