import type { Context } from 'koa';
import type { AuthContext } from '../core/api-keys/api-key-service.js';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/**
 * Who may call a route: `public` needs no key; `sending` accepts SENDING and FULL keys (the
 * email endpoints); `full` needs a FULL key (spec, Authentication 2).
 */
export type Access = 'public' | 'sending' | 'full';

export interface RouteRequest {
  auth: AuthContext;
  params: Record<string, string>;
  query: Record<string, string | string[] | undefined>;
  body: unknown;
  rawBody: Buffer | undefined;
  header(name: string): string | undefined;
  koa: Context;
}

export interface RouteDef {
  method: HttpMethod;
  /** Path under /v1 (and /api/v1), @koa/router syntax, e.g. '/domains/:id'. */
  path: string;
  access: Access;
  summary: string;
  /** Returns the 200 response body. Throw AppError for failures. */
  handler(req: RouteRequest): Promise<unknown>;
}
