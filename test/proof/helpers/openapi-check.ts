import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { openApiPath } from '../../../src/api/openapi-document.js';
import type { TestResponse } from '../../helpers/test-app.js';

// Validates real responses against the served OpenAPI document with ajv (JSON Schema 2020-12,
// strict, formats on). Component schemas are loaded once under their own $id and every
// `#/components/schemas/X` reference is pointed there, so each operation schema compiles as a
// standalone JSON Schema.

// ajv-formats is CommonJS with a default export.
type AddFormats = (typeof addFormatsModule)['default'];
const addFormats = ((addFormatsModule as unknown as { default?: AddFormats }).default ?? addFormatsModule) as unknown as AddFormats;

const COMPONENTS_ID = 'https://posthorn.test/openapi/components.json';
type Json = any;

function pointAtComponents(schema: Json): Json {
  return JSON.parse(JSON.stringify(schema).replaceAll('"#/components/schemas/', `"${COMPONENTS_ID}#/$defs/`));
}

/** Resolves a local JSON pointer ('#/components/...') in the document. */
export function resolvePointer(doc: Json, ref: string): Json {
  if (!ref.startsWith('#/')) throw new Error(`not a local reference: ${ref}`);
  let node = doc;
  for (const raw of ref.slice(2).split('/')) {
    const key = raw.replaceAll('~1', '/').replaceAll('~0', '~');
    if (node === null || typeof node !== 'object' || !(key in node)) throw new Error(`unresolved reference ${ref}`);
    node = node[key];
  }
  return node;
}

function deref(doc: Json, node: Json): Json {
  return node && typeof node === 'object' && typeof node.$ref === 'string' && node.$ref.startsWith('#/components/') && !node.$ref.startsWith('#/components/schemas/')
    ? deref(doc, resolvePointer(doc, node.$ref))
    : node;
}

export class OpenApiCheck {
  readonly ajv: Ajv2020;
  private readonly compiled = new Map<string, ValidateFunction>();
  /** Responses validated so far (bodies, media types and headers). */
  validated = 0;
  /** Per operation ('GET /domains/:id'), the body paths seen with a non-null value in a 200. */
  readonly seen = new Map<string, Set<string>>();

  /** prefix: where the document's routes are mounted (/v1 for the team API, /admin/v1 for the operator API). */
  constructor(
    readonly doc: Json,
    readonly prefix = '/v1',
  ) {
    // Strict, except that type arrays ("type": ["string", "null"]) are plain 2020-12 and allowed.
    this.ajv = new Ajv2020({ strict: true, allowUnionTypes: true, allErrors: true });
    addFormats(this.ajv);
    this.ajv.addSchema({ $id: COMPONENTS_ID, $defs: pointAtComponents(doc.components?.schemas ?? {}) });
  }

  compile(schema: Json): ValidateFunction {
    const key = JSON.stringify(schema);
    const known = this.compiled.get(key);
    if (known) return known;
    const fn = this.ajv.compile(pointAtComponents(schema));
    this.compiled.set(key, fn);
    return fn;
  }

  /** The operation of a route, by its method and @koa/router path ('/domains/:id'). */
  operation(method: string, routePath: string): Json {
    return this.doc.paths?.[openApiPath(routePath, this.prefix)]?.[method.toLowerCase()];
  }

  statuses(method: string, routePath: string): number[] {
    return Object.keys(this.operation(method, routePath)?.responses ?? {}).map(Number);
  }

  /** Every schema the document holds (parameters, bodies, responses, components), compiled; returns how many. */
  compileAll(): number {
    let n = 0;
    for (const id of Object.keys(this.doc.components?.schemas ?? {})) {
      this.ajv.getSchema(`${COMPONENTS_ID}#/$defs/${id}`) ?? (() => { throw new Error(`component ${id} does not compile`); })();
      n++;
    }
    for (const item of Object.values<Json>(this.doc.paths)) {
      for (const op of Object.values<Json>(item)) {
        for (const p of op.parameters ?? []) (this.compile(deref(this.doc, p).schema), n++);
        for (const media of Object.values<Json>(op.requestBody?.content ?? {})) (this.compile(media.schema), n++);
        for (const r of Object.values<Json>(op.responses)) {
          for (const media of Object.values<Json>(deref(this.doc, r).content ?? {})) (this.compile(media.schema), n++);
        }
      }
    }
    return n;
  }

  /**
   * Problems of a real response against the document: its status must be documented, its
   * media type one the document names, its body valid against that schema, and every header
   * the document promises present. An empty list means it conforms.
   */
  check(method: string, routePath: string, res: TestResponse): string[] {
    const where = `${method} ${routePath} -> ${res.status}`;
    const op = this.operation(method, routePath);
    if (!op) return [`${method} ${openApiPath(routePath, this.prefix)} is not in the document`];
    const documented = op.responses[String(res.status)];
    if (!documented) return [`${where}: status not documented (documented: ${Object.keys(op.responses).join(', ')}); body ${JSON.stringify(res.body).slice(0, 300)}`];
    this.validated++;
    const response = deref(this.doc, documented);
    const problems: string[] = [];
    const type = (res.headers.get('content-type') ?? '').split(';')[0]!.trim();
    const media = response.content?.[type];
    if (!media) return [`${where}: content-type "${type}" not documented (documented: ${Object.keys(response.content ?? {}).join(', ')})`];
    const validate = this.compile(media.schema);
    if (res.status === 200) {
      const key = `${method} ${routePath}`;
      const seen = this.seen.get(key) ?? new Set<string>();
      this.seen.set(key, seen);
      collectPaths(res.body, '$', seen);
    }
    if (!validate(res.body)) problems.push(`${where}: body does not match the schema: ${this.ajv.errorsText(validate.errors, { separator: '; ' })}; body ${JSON.stringify(res.body).slice(0, 400)}`);
    for (const name of Object.keys(response.headers ?? {})) {
      const value = res.headers.get(name);
      if (value === null) problems.push(`${where}: header ${name} is documented but missing`);
      else if (!/^\d+$/.test(value)) problems.push(`${where}: header ${name} is "${value}", not an integer`);
    }
    return problems;
  }
}

function collectPaths(v: Json, path: string, out: Set<string>): void {
  if (v === null || v === undefined) return;
  out.add(path);
  if (Array.isArray(v)) v.forEach((x) => collectPaths(x, `${path}[]`, out));
  else if (typeof v === 'object' && !Buffer.isBuffer(v)) for (const [k, x] of Object.entries(v)) collectPaths(x, `${path}.${k}`, out);
}

/**
 * The property paths a schema declares ('$.dnsRecords[].priority'), following $ref, unions and
 * arrays; maps (additionalProperties) and recursion beyond `depth` references are not expanded.
 */
export function schemaPaths(doc: Json, schema: Json, path = '$', depth = 0, out = new Set<string>()): Set<string> {
  if (!schema || typeof schema !== 'object') return out;
  if (schema.$ref) return depth > 3 ? out : schemaPaths(doc, resolvePointer(doc, schema.$ref), path, depth + 1, out);
  out.add(path);
  for (const alt of [...(schema.anyOf ?? []), ...(schema.oneOf ?? []), ...(schema.allOf ?? [])]) schemaPaths(doc, alt, path, depth, out);
  if (schema.items) schemaPaths(doc, schema.items, `${path}[]`, depth, out);
  for (const [k, v] of Object.entries<Json>(schema.properties ?? {})) schemaPaths(doc, v, `${path}.${k}`, depth, out);
  return out;
}

/** Every local $ref in the document, with whether it resolves. */
export function unresolvedRefs(doc: Json): string[] {
  const bad: string[] = [];
  const walk = (node: Json): void => {
    if (Array.isArray(node)) return node.forEach(walk);
    if (!node || typeof node !== 'object') return;
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string') {
        try {
          resolvePointer(doc, v);
        } catch {
          bad.push(v);
        }
      } else walk(v);
    }
  };
  walk(doc);
  return bad;
}
