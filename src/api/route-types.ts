import type { Context } from 'koa';
import type { z } from 'zod';
import type { AuthContext } from '../core/api-keys/api-key-service.js';
import type { OperatorAuth } from '../core/operators/operator-key-service.js';
import type { ParamDef, ParamValues } from './params.js';
import type { JsonStream } from './json-stream.js';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/**
 * Who may call a route: `public` needs no key; `sending` accepts SENDING and FULL keys (the
 * email endpoints); `full` needs a FULL key (spec, Authentication 2); `operator` needs a
 * server-operator key (the operator API under /admin/v1, where team keys get 403).
 */
export type Access = 'public' | 'sending' | 'full' | 'operator';

/**
 * Error statuses a route may answer beyond the ones every route of its kind can: 400 (any
 * declared input), 401 and 429 (every authenticated route), 403 (FULL-key routes) and 413
 * (routes with a body) are added by the OpenAPI document itself.
 */
export type ErrorStatus = 400 | 403 | 404 | 409;

export type ParamDefs = Record<string, ParamDef>;

/** What a route reads, declared once: the server parses with it, the OpenAPI document shows it. */
export interface RouteInputDefs<P extends ParamDefs = ParamDefs, Q extends ParamDefs = ParamDefs, H extends ParamDefs = ParamDefs, B extends z.ZodType = z.ZodType> {
  /** Path parameters; the names must be the path's `:name` segments. */
  params?: P;
  query?: Q;
  /** Request headers read by the handler (e.g. Idempotency-Key), by header name. */
  headers?: H;
  /** The JSON body, parsed with this schema before the handler runs (400 naming the field on failure). */
  body?: B;
  /**
   * 'service': the body is documented with `body` but handed over unparsed, because the service
   * validates it row by row with the same item schema (bulk contact import reports bad rows).
   */
  bodyParsedBy?: 'service';
}

export interface RouteInput<P extends ParamDefs = ParamDefs, Q extends ParamDefs = ParamDefs, H extends ParamDefs = ParamDefs, B = unknown> {
  params: ParamValues<P>;
  query: ParamValues<Q>;
  headers: ParamValues<H>;
  body: B;
}

export interface RouteRequest<I extends RouteInput = RouteInput> {
  /** The team key's context (team routes; unset on operator and public routes). */
  auth: AuthContext;
  /** The operator key (operator routes only). */
  operator: OperatorAuth | undefined;
  /** The declared parameters and body, parsed and validated. */
  input: I;
  /** Raw path parameters, query and body as received (prefer `input`). */
  params: Record<string, string>;
  query: Record<string, string | string[] | undefined>;
  body: unknown;
  rawBody: Buffer | undefined;
  header(name: string): string | undefined;
  koa: Context;
}

type BodyOf<B> = B extends z.ZodType ? z.output<B> : unknown;

export interface RouteDef<P extends ParamDefs = ParamDefs, Q extends ParamDefs = ParamDefs, H extends ParamDefs = ParamDefs, B extends z.ZodType = z.ZodType, R extends z.ZodType = z.ZodType> {
  method: HttpMethod;
  /** Path under /v1 (and /api/v1), or under /admin/v1 for operator routes; @koa/router syntax, e.g. '/domains/:id'. */
  path: string;
  access: Access;
  summary: string;
  /** The OpenAPI tag (the feature), e.g. 'Domains'. */
  tag: string;
  request?: RouteInputDefs<P, Q, H, B>;
  /** The 200 body (the OpenAPI response schema; the handler's return type is checked against it). */
  response: R;
  /** Content type of the 200 body when it is not JSON (the handler then returns a Buffer or string). */
  contentType?: string;
  /** Error statuses beyond the automatic ones (see ErrorStatus). */
  errors?: ErrorStatus[];
  /** A health route's 503: the 200 body, with `status: degraded`; this says when (the OpenAPI description). */
  degraded?: string;
  /** Returns the 200 response body (or a JsonStream of it). Throw AppError for failures. */
  handler(req: RouteRequest<RouteInput<P, Q, H, BodyOf<B>>>): Promise<z.input<R> | JsonStream>;
}

/**
 * Declares a route; infers the parsed input types from `request` and checks the handler's
 * result against `response` at compile time.
 */
export function defineRoute<
  const P extends ParamDefs = Record<never, ParamDef>,
  const Q extends ParamDefs = Record<never, ParamDef>,
  const H extends ParamDefs = Record<never, ParamDef>,
  B extends z.ZodType = z.ZodType,
  R extends z.ZodType = z.ZodType,
>(def: RouteDef<P, Q, H, B, R>): RouteDef {
  return def as unknown as RouteDef;
}
