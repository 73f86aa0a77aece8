import { readFileSync } from 'node:fs';
import { z } from 'zod';
import type { ParamDef } from './params.js';
import { defineRoute, type RouteDef } from './route-types.js';
import { errorSchema } from './schemas/common-schemas.js';

// The OpenAPI 3.1 document of the API, built from the route table itself: every RouteDef is
// one operation, its declared parameters and body (the ones the server parses with) are the
// request, its response schema (the handler's checked return type) is the 200 body. Nothing
// is written twice, so the document cannot drift from the code; test/proof/openapi.test.ts
// validates real responses of every route against it.

export type JsonObject = Record<string, unknown>;

/** The interface's version (spec, Versioning 1); the server's own version is x-server-version. */
export const API_VERSION = '1.0.0';

function serverVersion(): string {
  try {
    // dist/src/api/ -> the package root.
    return (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

/** Error statuses every route of a kind can answer, added here rather than declared per route. */
interface ErrorResponse {
  name: string;
  code: (typeof errorSchema.shape.error.shape.code.options)[number];
  description: string;
}
const ERROR_RESPONSES: Record<number, ErrorResponse> = {
  400: { name: 'BadRequest', code: 'BAD_REQUEST', description: 'Malformed or invalid parameters or body; the message starts with the offending field.' },
  401: { name: 'Unauthorized', code: 'UNAUTHORIZED', description: 'Missing or invalid API key.' },
  403: { name: 'Forbidden', code: 'FORBIDDEN', description: 'The key lacks the permission (a SENDING key outside the email endpoints) or access to the domain.' },
  404: { name: 'NotFound', code: 'NOT_FOUND', description: 'The resource does not exist (or is outside what the key may see).' },
  409: { name: 'Conflict', code: 'NOT_UNIQUE', description: 'Conflicts with an existing resource, or an Idempotency-Key reused with another body or still in flight.' },
  413: { name: 'PayloadTooLarge', code: 'BAD_REQUEST', description: 'The request body exceeds the configured size limit.' },
  429: { name: 'RateLimited', code: 'RATE_LIMITED', description: 'Too many requests for the team this second; retry after Retry-After seconds.' },
};

const RATE_LIMIT_HEADERS = {
  'X-RateLimit-Limit': { $ref: '#/components/headers/X-RateLimit-Limit' },
  'X-RateLimit-Remaining': { $ref: '#/components/headers/X-RateLimit-Remaining' },
  'X-RateLimit-Reset': { $ref: '#/components/headers/X-RateLimit-Reset' },
};

/** Converts zod schemas; schemas with a meta id are collected once under components.schemas. */
class SchemaSet {
  readonly schemas: Record<string, JsonObject> = {};

  toJson(schema: z.ZodType, io: 'input' | 'output'): JsonObject {
    const json = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any', cycles: 'ref' }) as JsonObject;
    delete json.$schema;
    const defs = (json.$defs ?? {}) as Record<string, JsonObject>;
    delete json.$defs;
    for (const [id, def] of Object.entries(defs)) {
      const converted = toComponentRefs(def);
      const known = this.schemas[id];
      if (known && JSON.stringify(known) !== JSON.stringify(converted)) throw new Error(`two different schemas are named ${id}`);
      this.schemas[id] = converted;
    }
    return toComponentRefs(json);
  }
}

function toComponentRefs(json: JsonObject): JsonObject {
  return JSON.parse(JSON.stringify(json).replaceAll('"#/$defs/', '"#/components/schemas/')) as JsonObject;
}

/** '/domains/:id/verify' -> '/v1/domains/{id}/verify' */
export function openApiPath(routePath: string, prefix = '/v1'): string {
  return prefix + routePath.replace(/:([A-Za-z]+)/g, '{$1}');
}

/** What differs between the team API's document and the operator API's. */
export interface DocumentKind {
  prefix: string;
  title: string;
  description: string[];
  keyDescription: string;
}

export const TEAM_API: DocumentKind = {
  prefix: '/v1',
  title: 'Posthorn API',
  description: [
    'The JSON HTTP API of a Posthorn email delivery server.',
    'Every path also answers under /api/v1 (the base the usesend-js SDK uses).',
    'Authenticate with `Authorization: Bearer <API key>`; requests are rate limited per team, and every authenticated response carries the X-RateLimit-* headers.',
    'Errors are `{"error": {"code", "message"}}`; a method a path does not have answers 405 METHOD_NOT_ALLOWED with an Allow header.',
    'Page-numbered lists take page and limit and answer `{<items>, page, limit, total, totalPage, hasMore}`.',
  ],
  keyDescription: 'An API key, e.g. ph_<id>_<secret>.',
};

export const OPERATOR_API: DocumentKind = {
  prefix: '/admin/v1',
  title: 'Posthorn operator API',
  description: [
    "The server operator's API of a Posthorn email delivery server: the delivery queue, suspensions, bulk retry and bounce, SMTP traces, teams, health and the audit log.",
    'Authenticate with `Authorization: Bearer <operator key>` (made with `posthorn keys create --operator`); team API keys are refused with 403. Not rate limited.',
    'Errors are `{"error": {"code", "message"}}`, as in the team API; lists page with limit and an opaque cursor (`nextCursor`, null on the last page).',
  ],
  keyDescription: 'A server-operator key, e.g. ph_<id>_<secret>.',
};

/** GET /contactBooks/:contactBookId/contacts -> getContactBooksByContactBookIdContacts (unique per method and path). */
export function operationId(route: RouteDef): string {
  const pascal = (s: string) => s.replace(/[^A-Za-z0-9]+(.)?/g, (_, c: string | undefined) => (c ?? '').toUpperCase()).replace(/^./, (c) => c.toUpperCase());
  const parts = route.path
    .split('/')
    .filter(Boolean)
    .map((seg) => (seg.startsWith(':') ? `By${pascal(seg.slice(1))}` : pascal(seg)));
  return route.method.toLowerCase() + parts.join('');
}

function accessNote(route: RouteDef): string {
  if (route.access === 'public') return 'No API key needed.';
  if (route.access === 'operator') return 'Needs a server-operator key.';
  if (route.access === 'sending') return 'Needs an API key with SENDING or FULL permission.';
  return 'Needs an API key with FULL permission.';
}

function parameter(set: SchemaSet, where: 'path' | 'query' | 'header', name: string, def: ParamDef): JsonObject {
  const p: JsonObject = { name, in: where, description: def.description, required: where === 'path', schema: set.toJson(def.schema, 'input') };
  if (def.repeatable) Object.assign(p, { style: 'form', explode: true });
  return p;
}

function operation(set: SchemaSet, route: RouteDef, kind: DocumentKind): JsonObject {
  const req = route.request ?? {};
  const authenticated = route.access !== 'public';
  const parameters = [
    ...Object.entries(req.params ?? {}).map(([n, d]) => parameter(set, 'path', n, d)),
    ...Object.entries(req.query ?? {}).map(([n, d]) => parameter(set, 'query', n, d)),
    ...Object.entries(req.headers ?? {}).map(([n, d]) => parameter(set, 'header', n, d)),
  ];
  const op: JsonObject = {
    operationId: operationId(route),
    summary: route.summary,
    description: accessNote(route),
    tags: [route.tag],
  };
  if (!authenticated) op.security = [];
  if (parameters.length) op.parameters = parameters;
  if (req.body) {
    op.requestBody = {
      // A route whose body may be omitted reads a missing body as {}.
      required: !req.body.safeParse({}).success,
      content: { 'application/json': { schema: set.toJson(req.body, 'input') } },
    };
  }
  const responses: JsonObject = {
    '200': {
      description: 'Success.',
      ...(authenticated && route.access !== 'operator' ? { headers: RATE_LIMIT_HEADERS } : {}),
      content: { [route.contentType ?? 'application/json']: { schema: set.toJson(route.response, 'output') } },
    },
  };
  // A health route answers its own body with 503 when degraded, not the error body.
  if (route.degraded) responses['503'] = { description: route.degraded, content: { 'application/json': { schema: set.toJson(route.response, 'output') } } };
  for (const status of errorStatuses(route)) responses[String(status)] = { $ref: `#/components/responses/${ERROR_RESPONSES[status]!.name}` };
  op.responses = responses;
  return op;
}

/** The error statuses of a route: declared ones plus those its kind always can answer. */
export function errorStatuses(route: RouteDef): number[] {
  const req = route.request ?? {};
  const statuses = new Set<number>(route.errors ?? []);
  if (req.params || req.query || req.headers || req.body) statuses.add(400);
  if (req.body) statuses.add(413);
  if (route.access !== 'public') statuses.add(401);
  if (route.access === 'sending' || route.access === 'full') statuses.add(429);
  if (route.access === 'full' || route.access === 'operator') statuses.add(403);
  return [...statuses].sort((a, b) => a - b);
}

export function buildOpenApiDocument(routes: RouteDef[], kind: DocumentKind = TEAM_API): JsonObject {
  const set = new SchemaSet();
  const paths: Record<string, Record<string, JsonObject>> = {};
  for (const route of routes) {
    const path = openApiPath(route.path, kind.prefix);
    const item = (paths[path] ??= {});
    const method = route.method.toLowerCase();
    if (item[method]) throw new Error(`${route.method} ${path} is declared twice`);
    item[method] = operation(set, route, kind);
  }
  const errorRef = set.toJson(errorSchema, 'output');
  const responses: Record<string, JsonObject> = {};
  for (const e of Object.values(ERROR_RESPONSES)) {
    responses[e.name] = {
      description: e.description,
      // The operator API is not rate limited: its answers carry no X-RateLimit-* headers.
      ...(e.name === 'Unauthorized' || kind !== TEAM_API ? {} : { headers: e.name === 'RateLimited' ? { ...RATE_LIMIT_HEADERS, 'Retry-After': { $ref: '#/components/headers/Retry-After' } } : RATE_LIMIT_HEADERS }),
      content: {
        'application/json': {
          schema: { allOf: [errorRef, { type: 'object', properties: { error: { type: 'object', properties: { code: { const: e.code } } } } }] },
        },
      },
    };
  }
  const integerHeader = (description: string) => ({ description, schema: { type: 'integer', minimum: 0 } });
  const tags = [...new Set(routes.map((r) => r.tag))].map((name) => ({ name }));
  return {
    openapi: '3.1.1',
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    info: {
      title: kind.title,
      version: API_VERSION,
      'x-server-version': serverVersion(),
      description: kind.description.join('\n\n'),
    },
    servers: [{ url: '/', description: 'This server.' }],
    security: [{ bearerAuth: [] }],
    tags,
    paths,
    components: {
      securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', description: kind.keyDescription } },
      headers: {
        'X-RateLimit-Limit': integerHeader('Requests allowed per second for the team.'),
        'X-RateLimit-Remaining': integerHeader('Requests left in the current second.'),
        'X-RateLimit-Reset': integerHeader('When the window resets, in seconds since the epoch.'),
        'Retry-After': integerHeader('Seconds to wait before retrying.'),
      },
      responses,
      schemas: Object.fromEntries(Object.entries(set.schemas).sort(([a], [b]) => a.localeCompare(b))),
    },
  };
}

const openApiDocumentSchema = z
  .looseObject({
    openapi: z.string().regex(/^3\.1\.\d+$/),
    info: z.looseObject({ title: z.string(), version: z.string() }),
    paths: z.record(z.string(), z.record(z.string(), z.unknown())),
    components: z.looseObject({}),
  })
  .meta({ description: 'An OpenAPI 3.1 document.' });

/**
 * GET /openapi.json, without a key (and so without a team to rate limit). The document is
 * static: built on the first request from the final route table, then served from memory.
 * `alsoAt` adds the same document at other paths (GET /doc: where useSend serves its own).
 */
export function openApiRoute(routes: () => RouteDef[], kind: DocumentKind = TEAM_API, alsoAt: string[] = []): RouteDef[] {
  let cached: JsonObject | undefined;
  const summary = kind === TEAM_API ? 'This OpenAPI 3.1 document of the whole API' : 'This OpenAPI 3.1 document of the whole operator API';
  return ['/openapi.json', ...alsoAt].map((path, i) =>
    defineRoute({
      method: 'GET',
      path,
      access: 'public',
      tag: 'Meta',
      summary: i === 0 ? `${summary}.` : `${summary}, also at the path useSend serves it.`,
      response: openApiDocumentSchema,
      handler: async () => (cached ??= buildOpenApiDocument(routes(), kind)) as z.input<typeof openApiDocumentSchema>,
    }),
  );
}
