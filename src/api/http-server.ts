import { createServer, STATUS_CODES, type Server } from 'node:http';
import { Readable, type Duplex } from 'node:stream';
import type { AddressInfo } from 'node:net';
import Koa, { type Context, type Next } from 'koa';
import Router from '@koa/router';
import { AppError } from '../core/errors.js';
import type { ApiKeyService, AuthContext } from '../core/api-keys/api-key-service.js';
import type { OperatorAuth, OperatorKeyService } from '../core/operators/operator-key-service.js';
import type { RateLimiter } from '../core/rate-limit/rate-limiter.js';
import type { BodyIntake } from '../lib/body-intake.js';
import { SpoolError, type Received } from '../lib/body-spool.js';
import type { Logger } from '../lib/logger.js';
import { toHttpError } from './http-errors.js';
import { parseParams } from './params.js';
import type { RouteDef, RouteRequest } from './route-types.js';
import { parseInput } from './validation.js';
import { nulMessage, nulPath, unpairedSurrogateMessage, unpairedSurrogatePath } from '../lib/nul-text.js';
import { JsonStream } from './json-stream.js';

export interface HttpServerDeps {
  logger: Logger;
  apiKeys: ApiKeyService;
  rateLimiter: RateLimiter;
  defaultRateLimit: number;
  bodyLimitBytes: number;
  /** http.trustProxy: believe X-Forwarded-For/-Proto/-Host (only behind a reverse proxy that sets them). */
  trustProxy?: boolean;
  /** API routes, mounted under /v1 and /api/v1 (the usesend-js SDK appends /api/v1). */
  routes: RouteDef[];
  /** The operator API, mounted under /admin/v1 (operator keys only). */
  adminRoutes?: RouteDef[];
  operatorKeys?: Pick<OperatorKeyService, 'authenticate' | 'isOperatorKey'>;
  /** Told each request's method, route template ('unmatched' when none), status and duration (metrics). */
  observeRequest?: (method: string, route: string, status: number, seconds: number) => void;
  /** Routes outside the API prefix (health, tracking, unsubscribe pages): raw Koa handlers. */
  extra?: (router: Router) => void;
  /** Path prefixes of server-rendered pages (the console) that refuse the NUL character themselves, with a page of their own instead of the API's JSON. */
  ownNulPages?: readonly string[];
  /** Turns an unexpected error into an AppError where the composition root knows better (a full disk); else returns it as is. */
  translateError?: (err: unknown) => unknown;
  /** Bounds the memory of bodies being received, parsed and handled (intakeMemoryMb), with submission's and inbound's. */
  intake: BodyIntake;
}

const API_PREFIXES = ['/v1', '/api/v1'];
export const ADMIN_PREFIX = '/admin/v1';
const SEGMENT_PREFIXES = [...API_PREFIXES, ADMIN_PREFIX].map((p) => `${p}/`);
/** Error codes of a client that closed or reset its connection: nothing to fix on our side. */
const CLIENT_GONE_CODES = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED', 'ERR_STREAM_PREMATURE_CLOSE', 'ERR_STREAM_DESTROYED']);
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']); // architecture.md, Decisions: compatibility

export function createHttpApp(deps: HttpServerDeps): Koa {
  const app = new Koa();
  // ctx.ip (the console's sign-in limit, tracking events) and ctx.protocol/host come from the
  // X-Forwarded-* headers only when configured: any client can write them. The last
  // X-Forwarded-For entry is the one the proxy in front of us added; earlier ones are the client's.
  app.proxy = deps.trustProxy ?? false;
  app.maxIpsCount = 1;
  // Koa reports connection-level failures here (a client resetting mid-body, broken chunked
  // framing: errorMiddleware has already answered or the socket is gone). With no listener Koa
  // prints each one to stderr, so any client could write to our stderr at will; they are
  // routine on a public port and go to the log at debug level instead.
  // Koa's own error event: a client that went away (debug), or a failure after the middleware
  // chain (writing a streamed body), which nobody else reports.
  app.on('error', (err: Error & { code?: string; status?: number }) => {
    if (err.code !== undefined && CLIENT_GONE_CODES.has(err.code)) deps.logger.debug({ err: err.message, code: err.code }, 'HTTP connection error');
    else if ((err.status ?? 500) >= 500) deps.logger.error({ err }, 'HTTP response failed');
    else deps.logger.debug({ err: err.message, status: err.status }, 'HTTP error');
  });
  const router = new Router();
  // Every response, errors included: a browser takes the declared type, never one it guesses from
  // bytes that may be a sender's (a received message, a sandbox capture).
  app.use((ctx, next) => {
    ctx.set('X-Content-Type-Options', 'nosniff');
    return next();
  });
  if (deps.observeRequest) {
    const observe = deps.observeRequest;
    app.use(async (ctx, next) => {
      const started = performance.now();
      try {
        await next();
      } finally {
        // The route template (bounded), never the path itself: ids would explode the label set.
        const route = (ctx as Context & { _matchedRoute?: string })._matchedRoute;
        observe(ctx.method, typeof route === 'string' ? route : 'unmatched', ctx.status, (performance.now() - started) / 1000);
      }
    });
  }

  // Dispatch goes to a router holding only the routes of the path's first segment after the
  // prefix (/v1/emails...): @koa/router tests every route's pattern in turn, and with each route
  // mounted under both prefixes that was ~3% of an API send's CPU. `router` keeps every route
  // too, for the Allow header of a 405 and for any path the index does not place.
  const segments = new Map<string, Router>();
  const segmentRouter = (template: string) => {
    const key = segmentKey(template)!;
    let r = segments.get(key);
    if (!r) segments.set(key, (r = new Router()));
    return r;
  };
  const mounts = [
    ...deps.routes.map((route) => ({ route, prefixes: API_PREFIXES })),
    ...(deps.adminRoutes ?? []).map((route) => ({ route, prefixes: [ADMIN_PREFIX] })),
  ];
  for (const { route, prefixes } of mounts) {
    checkPathParams(route);
    for (const prefix of prefixes) {
      const stack = [
        route.access === 'operator' ? authenticateOperator(deps) : authenticate(route, deps),
        parseBody(deps.bodyLimitBytes, deps.intake),
        async (ctx: Context) => {
          const params = (ctx as Context & { params: Record<string, string> }).params ?? {};
          const query = ctx.query as Record<string, string | string[] | undefined>;
          const header = (name: string) => ctx.get(name) || undefined;
          const body: unknown = ctx.state.body;
          // The declared input, parsed in path, query, header, body order (route-types.ts).
          const decl = route.request;
          const input = {
            params: parseParams(decl?.params, (name) => params[name]),
            query: parseParams(decl?.query, (name) => query[name]),
            // Each line of a header as sent: ctx.get answers '' for an absent header and an empty
            // one alike, and Node joins repeated lines with ", " (two Idempotency-Keys become one).
            headers: parseParams(decl?.headers, (name) => {
              const lines = ctx.req.headersDistinct[name.toLowerCase()];
              return lines === undefined ? undefined : lines.length === 1 ? lines[0] : lines;
            }),
            body: decl?.body && decl.bodyParsedBy !== 'service' ? parseInput(decl.body, body ?? {}) : body,
          };
          const req: RouteRequest = {
            auth: ctx.state.auth as AuthContext,
            operator: ctx.state.operator as OperatorAuth | undefined,
            input,
            params,
            query,
            body,
            rawBody: ctx.state.rawBody as Buffer | undefined,
            header,
            koa: ctx,
          };
          const result = await route.handler(req);
          if (result instanceof JsonStream) {
            ctx.status = 200;
            ctx.type = 'application/json';
            ctx.body = Readable.from(result.chunks, { objectMode: false });
            return;
          }
          if (ctx.body === undefined || ctx.body === null) {
            ctx.status = 200;
            ctx.body = result ?? {};
            if (route.contentType) ctx.type = route.contentType;
          }
        },
      ];
      router.register(prefix + route.path, [route.method], stack);
      segmentRouter(prefix + route.path).register(prefix + route.path, [route.method], stack);
    }
  }
  deps.extra?.(router);

  app.use(errorMiddleware(deps.logger, deps.translateError));
  app.use(async (ctx, next) => {
    // RFC 9112 3.2: an HTTP/1.1 request without Host is a 400. Node's own check
    // (requireHostHeader, turned off in listenHttp) answers it without a body; this one
    // carries the spec's error body.
    if (ctx.req.httpVersion === '1.1' && ctx.req.headers.host === undefined) {
      ctx.set('Connection', 'close');
      throw new AppError('BAD_REQUEST', 'an HTTP/1.1 request needs a Host header');
    }
    return next();
  });
  app.use(async (ctx, next) => {
    // A base URL configured with a trailing slash: the usesend-js SDK appends "/api/v1" to it and
    // asks for "//api/v1/...". Only leading slashes before an API prefix are folded.
    if (ctx.path.startsWith('//')) {
      const folded = ctx.path.replace(/^\/+/, '/');
      if (SEGMENT_PREFIXES.some((prefix) => folded.startsWith(prefix))) ctx.path = folded;
    }
    // No id has the NUL character: a path with one names nothing (404). In a query it is refused
    // like in a body (lib/nul-text.ts).
    const ownPage = deps.ownNulPages?.some((prefix) => ctx.path.toLowerCase() === prefix || ctx.path.toLowerCase().startsWith(`${prefix}/`));
    if (ownPage) return next();
    if (ctx.path.includes('%00')) {
      await countUnrouted(ctx, deps);
      throw new AppError('NOT_FOUND', `nothing is found at a path with the NUL character (U+0000): ${ctx.path}`);
    }
    if (ctx.querystring.toLowerCase().includes('%00')) {
      const where = nulPath(ctx.query, '');
      if (where !== undefined) {
        await countUnrouted(ctx, deps);
        throw new AppError('BAD_REQUEST', nulMessage(where));
      }
    }
    return next();
  });
  // A literal route beside a parameter route (/contacts/bulk beside /contacts/:contactId,
  // /suppressions/bulk beside /suppressions/:email): a method the literal one does not serve is
  // 405 for it (spec, Errors), not a read or an upsert of an id spelled "bulk".
  const literals = literalSegments(mounts.flatMap(({ route, prefixes }) => prefixes.map((prefix) => prefix + route.path)));
  app.use(async (ctx, next) => {
    const path = ctx.path.toLowerCase();
    if (!literals.has(path.slice(path.lastIndexOf('/') + 1))) return next();
    const match = router.match(ctx.path, ctx.method);
    const fewest = Math.min(...match.path.map((layer) => layer.paramNames.length));
    const literal = match.path.filter((layer) => layer.paramNames.length === fewest);
    if (literal.length === match.path.length || literal.some((layer) => layer.methods.includes(ctx.method))) return next();
    await countUnrouted(ctx, deps);
    ctx.set('Allow', [...new Set(literal.flatMap((layer) => layer.methods).filter((m) => m !== 'HEAD'))].join(', '));
    throw new AppError('METHOD_NOT_ALLOWED', `method ${ctx.method} is not allowed on ${ctx.path}`);
  });
  const dispatch = new Map([...segments].map(([key, r]) => [key, r.routes() as Koa.Middleware]));
  app.use((ctx, next) => {
    const key = segmentKey(ctx.path);
    const routes = key === undefined ? undefined : dispatch.get(key);
    return routes ? routes(ctx, next) : next();
  });
  app.use(router.routes());
  // Nothing matched: 405 if the path exists with other methods, else 404 (spec, Errors).
  app.use(async (ctx) => {
    await countUnrouted(ctx, deps);
    const match = router.match(ctx.path, ctx.method);
    if (match.path.length > 0 && !match.route) {
      const allowed = new Set(match.path.flatMap((layer) => layer.methods).filter((m) => m !== 'HEAD'));
      ctx.set('Allow', [...allowed].join(', '));
      throw new AppError('METHOD_NOT_ALLOWED', `method ${ctx.method} is not allowed on ${ctx.path}`);
    }
    throw new AppError('NOT_FOUND', `no route for ${ctx.method} ${ctx.path}`);
  });
  return app;
}

/**
 * A request refused before any route takes it (no such route, a wrong method, a NUL character)
 * counts against the rate limit and carries its headers too (spec, Limits: "all requests",
 * "every response") when it comes with a valid key; a bad key still gets the refusal, since the
 * request is what is wrong.
 */
async function countUnrouted(ctx: Context, deps: HttpServerDeps): Promise<void> {
  if (!API_PREFIXES.some((prefix) => ctx.path.startsWith(`${prefix}/`)) || !ctx.get('authorization')) return;
  const auth = await deps.apiKeys.authenticate(bearerToken(ctx)).catch(() => null);
  if (auth) await applyRateLimit(ctx, auth, deps);
}

/** The last segments of route templates ending in a literal where another template has a parameter ("bulk", "batch"), lowercased. */
function literalSegments(templates: string[]): Set<string> {
  const withParam = new Set(templates.filter((path) => /\/:[A-Za-z]+$/.test(path)).map((path) => path.slice(0, path.lastIndexOf('/')).toLowerCase()));
  const out = new Set<string>();
  for (const path of templates) {
    const at = path.lastIndexOf('/');
    const last = path.slice(at + 1);
    if (last !== '' && !last.startsWith(':') && withParam.has(path.slice(0, at).toLowerCase())) out.add(last.toLowerCase());
  }
  return out;
}

/** '/v1/emails' for '/v1/emails/em_1' (lowercased, as the routers match case-insensitively); undefined outside the API prefixes. */
function segmentKey(path: string): string | undefined {
  const lower = path.toLowerCase();
  for (const prefix of SEGMENT_PREFIXES) {
    if (!lower.startsWith(prefix)) continue;
    const end = lower.indexOf('/', prefix.length);
    return end === -1 ? lower : lower.slice(0, end);
  }
  return undefined;
}

/** Every `:name` in the path is declared in request.params, and nothing else is (the document lists them). */
export function checkPathParams(route: RouteDef): void {
  const inPath = [...route.path.matchAll(/:([A-Za-z]+)/g)].map((m) => m[1]).join(',');
  const declared = Object.keys(route.request?.params ?? {}).join(',');
  if (inPath !== declared) throw new Error(`${route.method} ${route.path}: path parameters [${inPath}] but request.params declares [${declared}]`);
}

function errorMiddleware(logger: Logger, translate: (err: unknown) => unknown = (err) => err) {
  return async (ctx: Context, next: Next) => {
    const started = performance.now();
    try {
      await next();
      // Serialized here rather than by Koa once every middleware has returned: a body that
      // cannot be written as JSON (longer than V8's longest string) then gets the spec's error
      // body and a log line, not Koa's bare "Internal Server Error".
      const body: unknown = ctx.body;
      if (body !== null && typeof body === 'object' && (Array.isArray(body) || Object.getPrototypeOf(body) === Object.prototype)) {
        ctx.body = JSON.stringify(body);
      }
    } catch (err) {
      const httpError = toHttpError(err instanceof AppError ? err : translate(err));
      if (httpError.status >= 500) logger.error({ err, method: ctx.method, path: ctx.path }, 'request failed');
      ctx.status = httpError.status;
      ctx.body = httpError.body;
      if (httpError.retryAfterSeconds !== undefined) ctx.set('Retry-After', String(httpError.retryAfterSeconds));
    }
    if (logger.isLevelEnabled('debug')) {
      logger.debug({ method: ctx.method, path: ctx.path, status: ctx.status, ms: Math.round(performance.now() - started) }, 'request');
    }
  };
}

function authenticate(route: RouteDef, deps: HttpServerDeps) {
  return async (ctx: Context, next: Next) => {
    if (route.access === 'public') return next();
    const token = bearerToken(ctx);
    const auth = await deps.apiKeys.authenticate(token).catch(async (err: unknown) => {
      // A valid operator key is known, only not allowed here: 403, not 401.
      if (await deps.operatorKeys?.isOperatorKey(token)) throw new AppError('FORBIDDEN', 'an operator key may call only the operator API (/admin/v1) and /metrics');
      throw err;
    });
    await applyRateLimit(ctx, auth, deps);
    if (route.access === 'full' && auth.permission !== 'FULL') {
      throw new AppError('FORBIDDEN', 'this API key has SENDING permission and may only use the email endpoints');
    }
    ctx.state.auth = auth;
    return next();
  };
}

/** Operator routes: a server-operator key; a team key is known but forbidden (403); no rate limit. */
function authenticateOperator(deps: HttpServerDeps) {
  return async (ctx: Context, next: Next) => {
    const token = bearerToken(ctx);
    if (!deps.operatorKeys) throw new AppError('NOT_FOUND', `no route for ${ctx.method} ${ctx.path}`);
    ctx.state.operator = await deps.operatorKeys.authenticate(token).catch(async (err: unknown) => {
      if (token && (await deps.apiKeys.authenticate(token).then(() => true, () => false))) {
        throw new AppError('FORBIDDEN', 'team API keys may not call the operator API: use a server-operator key (posthorn keys create --operator)');
      }
      throw err;
    });
    return next();
  };
}

/** The Bearer token; '' for an Authorization header of another form, undefined without one. */
export function bearerToken(ctx: Context): string | undefined {
  const header = ctx.get('authorization');
  if (!header) return undefined;
  return /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1] ?? '';
}

/**
 * Rate limiting runs on every authenticated request, before any work, and its headers go on
 * every authenticated response, errors included.
 */
async function applyRateLimit(ctx: Context, auth: AuthContext, deps: HttpServerDeps): Promise<void> {
  // In memory this is a value; shared by a cluster it is a query (core/rate-limit).
  const decision = await deps.rateLimiter.consume(auth.teamId, auth.teamRateLimit ?? deps.defaultRateLimit, auth.keyId);
  ctx.set('X-RateLimit-Limit', String(decision.limit));
  ctx.set('X-RateLimit-Remaining', String(decision.remaining));
  ctx.set('X-RateLimit-Reset', String(decision.resetEpochSeconds));
  if (!decision.allowed) {
    // One line per key and window, however many requests it sends past the limit.
    if (decision.firstRefusal) {
      deps.logger.info(
        { event: 'rate_limited', teamId: auth.teamId, apiKeyId: auth.keyId, limit: decision.limit, retryAfterSeconds: decision.retryAfterSeconds },
        `API key ${auth.keyId} of team ${auth.teamId} is over the rate limit of ${decision.limit} requests per second`,
      );
    }
    throw new AppError('RATE_LIMITED', `rate limit of ${decision.limit} requests per second exceeded; retry in ${decision.retryAfterSeconds} s`, decision.retryAfterSeconds);
  }
}

function parseBody(limitBytes: number, intake: BodyIntake) {
  return async (ctx: Context, next: Next) => {
    if (!BODY_METHODS.has(ctx.method)) return next();
    const length = ctx.get('content-length');
    if (!length && !ctx.get('transfer-encoding')) return next();
    // A compressed body would otherwise be read as malformed JSON (or, sent uncompressed under a
    // gzip label, accepted): say what is wrong. The body is discarded unread (as for a 413), so
    // the answer is not lost to a reset.
    const encoding = ctx.get('content-encoding').trim().toLowerCase();
    if (encoding && encoding !== 'identity') {
      ctx.req.resume();
      throw new AppError('BAD_REQUEST', `Content-Encoding ${encoding} is not supported: send the body uncompressed`);
    }
    // A declared length over the limit is refused before a byte is read.
    if (length && Number(length) > limitBytes) return tooLarge(ctx, limitBytes);
    let received: Received;
    try {
      received = await intake.receive(ctx.req, limitBytes);
    } catch (err) {
      // The disk failing is the server's storage failing (a 500, translateError), not bad input.
      if (err instanceof SpoolError) throw err;
      throw new AppError('BAD_REQUEST', `could not read the request body: ${(err as Error).message}`);
    }
    // The rest of an oversized body flows away unread (as Node does with a body nobody reads),
    // so the socket is not closed with data pending, which is a TCP reset that the client often
    // sees instead of the 413.
    if (received.oversized) return tooLarge(ctx, limitBytes);
    if (received.body.size === 0) {
      received.body.release();
      return next();
    }
    return intake.process(received.body, (raw) => parsed(ctx, raw, next));
  };
}

function tooLarge(ctx: Context, limitBytes: number): never {
  ctx.req.resume();
  throw new AppError('PAYLOAD_TOO_LARGE', `request body exceeds ${limitBytes} bytes`);
}

/** The body as JSON in ctx.state.body (and the bytes in ctx.state.rawBody), then the route. */
async function parsed(ctx: Context, raw: Buffer, next: Next): Promise<unknown> {
  const type = ctx.get('content-type');
  if (type && !/^application\/([a-z.+-]*\+)?json\b/i.test(type)) {
    throw new AppError('BAD_REQUEST', `unsupported Content-Type "${type}": send application/json`);
  }
  const text = raw.toString('utf8');
  if (nestingExceeds(text, MAX_JSON_DEPTH)) {
    throw new AppError('BAD_REQUEST', `malformed JSON body: nested more than ${MAX_JSON_DEPTH} levels deep`);
  }
  try {
    ctx.state.body = JSON.parse(text);
  } catch (err) {
    throw new AppError('BAD_REQUEST', `malformed JSON body: ${(err as Error).message}`);
  }
  // A NUL can only be in the text escaped: the walk runs only for bodies that have one.
  if (/\\u0000/i.test(text)) {
    const where = nulPath(ctx.state.body, '');
    if (where !== undefined) throw new AppError('BAD_REQUEST', nulMessage(where || 'body'));
  }
  // Likewise a surrogate: UTF-8 bytes decode to none, so only an escape (\uD800 to \uDFFF) can make one.
  if (/\\u[dD][89a-fA-F]/.test(text)) {
    const where = unpairedSurrogatePath(ctx.state.body, '');
    if (where !== undefined) throw new AppError('BAD_REQUEST', unpairedSurrogateMessage(where || 'body'));
  }
  ctx.state.rawBody = raw;
  return next();
}

/**
 * Deepest array/object nesting a request body may have. JSON.parse itself copes with any
 * depth, but everything after it recurses (JSON.stringify, the idempotency hash, zod): a body
 * of a few hundred thousand brackets, well within the size limit, overflowed the stack there
 * and answered 500. The deepest legitimate body, an editor document given as an object (64
 * node levels, two JSON levels each), stays well under this.
 */
export const MAX_JSON_DEPTH = 256;

/** Whether JSON text opens more than `max` arrays/objects at once (strings skipped); a plain scan, no recursion. */
export function nestingExceeds(text: string, max: number): boolean {
  // A text with no more than `max` brackets that open cannot nest deeper than that. Counting them
  // is a native search, where the walk below is a JavaScript loop over every character (~10 µs
  // for a 5 KB send), so most bodies skip the walk.
  if (openersAtMost(text, max)) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

function openersAtMost(text: string, max: number): boolean {
  let n = 0;
  for (const opener of ['{', '[']) {
    for (let i = text.indexOf(opener); i !== -1; i = text.indexOf(opener, i + 1)) if (++n > max) return false;
  }
  return true;
}

export interface RunningHttpServer {
  server: Server;
  port: number;
  close(): Promise<void>;
}

/**
 * A request Node's parser refuses (a malformed request line, header or chunk, headers over the
 * size limit) never reaches Koa, and Node's own answer is a bare status line. This one carries
 * the spec's error body like every other error (architecture.md, Decisions: errors), under the same care as Node's: only
 * when no response of this connection has started, then the connection is closed. Headers too
 * large keep their precise status, 431 (RFC 6585 5), with code BAD_REQUEST, as 413 does.
 */
/**
 * Marks the connections whose current read began a request. Node emits the request, then
 * refuses what follows it in the same read, within one I/O callback (not one tick: its parser
 * runs in C++, and the tick queue drains between the two); the marks are cleared once that
 * phase of the event loop is over (one setImmediate for all of them).
 */
const IN_THIS_READ = Symbol('posthorn.requestInThisRead');
type MarkedSocket = Duplex & { [IN_THIS_READ]?: boolean };
const marked: MarkedSocket[] = [];
const unmarkAll = (): void => {
  for (const socket of marked) socket[IN_THIS_READ] = false;
  marked.length = 0;
};
function markRequestRead(socket: MarkedSocket): void {
  if (socket[IN_THIS_READ]) return;
  socket[IN_THIS_READ] = true;
  if (marked.push(socket) === 1) setImmediate(unmarkAll);
}

function answerClientError(err: Error & { code?: string }, socket: Duplex): void {
  const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (err.code !== 'ECONNRESET' && socket.writable && !inFlight?.headersSent) {
    const [status, message] =
      err.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'request headers are too large']
        : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? [408, 'the request was not received in time']
          : [400, 'malformed HTTP request'];
    const body = JSON.stringify({ error: { code: 'BAD_REQUEST', message } });
    // The answer to a HEAD has no body (RFC 9110 9.3.2): a client would read one as garbage after
    // the response. The method shows when the refused bytes begin the request, as they do when
    // its head came in one read (the head limit, 16 KiB, is below a socket read's 64 KiB), unless
    // a request before it came in the same read: then the read begins with that one, and the
    // body goes out, as for any other method.
    const packet = (err as { rawPacket?: unknown }).rawPacket;
    const head = !(socket as MarkedSocket)[IN_THIS_READ] && Buffer.isBuffer(packet) && packet.subarray(0, 5).toString('latin1') === 'HEAD ';
    socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nConnection: close\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${head ? '' : body}`);
  }
  socket.destroy();
}

/** Why the HTTP API could not listen, and what to set instead (serve exits with it). */
const LISTEN_FAILURES: Record<string, string> = {
  EADDRINUSE: 'another process is listening there (another posthorn serve?): stop it, or set http.port (POSTHORN_HTTP_PORT) to a free port',
  EACCES: 'ports below 1024 need CAP_NET_BIND_SERVICE: grant it, or set http.port (POSTHORN_HTTP_PORT) to a port above 1023',
  EADDRNOTAVAIL: 'no interface of this host has that address: set http.host (POSTHORN_HTTP_HOST) to one of its addresses, or 0.0.0.0',
};

function listenError(err: NodeJS.ErrnoException, host: string, port: number): Error {
  const advice = err.code && LISTEN_FAILURES[err.code];
  if (advice) return new Error(`the HTTP API cannot listen on ${host}:${port} (${err.code}): ${advice}`, { cause: err });
  // Any other bind failure (a host name that does not resolve) still names the settings.
  if (err.syscall !== 'listen' && err.syscall !== 'bind' && err.syscall !== 'getaddrinfo') return err;
  return new Error(`the HTTP API cannot listen on ${host}:${port}: ${err.message}: check http.host and http.port (POSTHORN_HTTP_HOST, POSTHORN_HTTP_PORT)`, { cause: err });
}

export async function listenHttp(app: Koa, host: string, port: number): Promise<RunningHttpServer> {
  const handle = app.callback();
  const server = createServer({ requireHostHeader: false }, (req, res) => {
    markRequestRead(req.socket);
    return handle(req, res);
  });
  server.keepAliveTimeout = 5_000;
  server.on('clientError', answerClientError);
  // An Expect other than 100-continue (RFC 9110 10.1.1): 417, with the spec's error body
  // rather than Node's empty one.
  server.on('checkExpectation', (_req, res) => {
    const body = JSON.stringify({ error: { code: 'BAD_REQUEST', message: 'unsupported Expect header; only 100-continue is understood' } });
    res.writeHead(417, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(body), Connection: 'close' });
    res.end(body);
  });
  await new Promise<void>((resolve, reject) => {
    const failed = (err: NodeJS.ErrnoException) => reject(listenError(err, host, port));
    server.once('error', failed);
    server.listen(port, host, () => {
      server.off('error', failed);
      resolve();
    });
  });
  return {
    server,
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        // Stop accepting, let in-flight requests finish, then drop idle keep-alive sockets.
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}
