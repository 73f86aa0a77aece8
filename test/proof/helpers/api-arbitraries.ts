// fast-check arbitraries for HTTP requests to one API route: its valid example, mutated in
// path ids, query, body, body framing and headers.
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import type { RouteDef } from '../../../src/api/route-types.js';
import type { QueryValue, RouteExample } from './api-examples.js';
import { hostileString, mutatedBody, percentEncode, POISON_KEYS, serializeBody } from './hostile.js';
import type { ProbeRequest } from './http-probe.js';

/** Path ids that are not ids: numbers in disguise, dot segments, broken escapes, unicode, long. */
export const weirdPathId: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    '0',
    '-1',
    '1.5',
    '1e3',
    '0x1A',
    '+1',
    '%201',
    '%D9%A3', // ARABIC-INDIC DIGIT THREE
    '%EF%BC%91', // FULLWIDTH DIGIT ONE
    '2147483648',
    '99999999999999999999999',
    '.',
    '..',
    '%2e%2e',
    '...',
    '%2F',
    '..%2F..%2Fetc%2Fpasswd',
    '%00',
    '%',
    '%ZZ',
    '%E2%82',
    '%C0%80',
    '%ED%A0%80',
    '%FF%FE',
    'null',
    'undefined',
    '__proto__',
    'constructor',
    'hasOwnProperty',
    'a'.repeat(101),
    'em_' + 'x'.repeat(5000),
    '%F0%9F%92%A9',
    '%E2%80%AE',
    '%E2%80%A8',
    'bulk',
    'raw',
  ),
  hostileString.filter((s) => s.length < 3000).map((s) => percentEncode(s)),
  // '%' kept raw: broken or double escapes reach the router as they are
  hostileString.filter((s) => s.length < 3000).map((s) => percentEncode(s, /[A-Za-z0-9\-_.~%!$&'()*+,;=:@]/)),
);

const encodeQueryPart = (s: string) => percentEncode(s, /[A-Za-z0-9\-_.~]/);

type Pair = [string, string];

function pairsOf(query: Record<string, QueryValue>): Pair[] {
  return Object.entries(query).flatMap(([k, v]) => (Array.isArray(v) ? v.map((x): Pair => [k, x]) : [[k, v] as Pair]));
}

/** Query-string edits: a value replaced, a key repeated, dropped, poisoned, or raw %-garbage. */
export function mutatedQuery(example: Record<string, QueryValue>): fc.Arbitrary<string> {
  const base = pairsOf(example);
  const keys = [...new Set([...base.map(([k]) => k), 'page', 'limit'])];
  const anyKey = fc.oneof(fc.constantFrom(...keys), fc.constantFrom(...POISON_KEYS, 'page[]', 'limit[0]', 'a[b]', 'a.b'), hostileString);
  const edit = fc.oneof(
    fc.tuple(fc.constant('set' as const), fc.constantFrom(...keys), hostileString),
    fc.tuple(fc.constant('dup' as const), fc.constantFrom(...keys), fc.oneof(hostileString, fc.constantFrom('1', '2', ''))),
    fc.tuple(fc.constant('drop' as const), fc.constantFrom(...keys), fc.constant('')),
    fc.tuple(fc.constant('add' as const), anyKey, hostileString),
    fc.tuple(fc.constant('raw' as const), fc.constantFrom(...keys), fc.constantFrom('%', '%ZZ', '%E2%82', '%C0%80', '%FF', '%00', '%2', 'a%', '%%', '%u0041', '+', '%2B', '&&&', '==', '=')),
  );
  return fc.array(edit, { minLength: 0, maxLength: 4 }).map((edits) => {
    let pairs = base.map(([k, v]): Pair => [encodeQueryPart(k), encodeQueryPart(v)]);
    for (const [kind, key, value] of edits) {
      const k = encodeQueryPart(key);
      if (kind === 'set') pairs = [...pairs.filter(([pk]) => pk !== k), [k, encodeQueryPart(value)]];
      else if (kind === 'dup' || kind === 'add') pairs.push([k, encodeQueryPart(value)]);
      else if (kind === 'drop') pairs = pairs.filter(([pk]) => pk !== k);
      else pairs = [...pairs.filter(([pk]) => pk !== k), [k, value]];
    }
    return pairs.length ? '?' + pairs.map(([k, v]) => `${k}=${v}`).join('&') : '';
  });
}

/** How the body travels: framing, encoding and content type. */
type Framing =
  | { kind: 'json' }
  | { kind: 'chunked' }
  | { kind: 'truncated'; at: number }
  | { kind: 'gzip-claim' }
  | { kind: 'gzipped' }
  | { kind: 'bom' }
  | { kind: 'utf16' }
  | { kind: 'content-type'; type: string | null }
  | { kind: 'not-json'; bytes: Uint8Array };

const framing: fc.Arbitrary<Framing> = fc.oneof(
  { arbitrary: fc.constant<Framing>({ kind: 'json' }), weight: 14 },
  { arbitrary: fc.constant<Framing>({ kind: 'chunked' }), weight: 2 },
  { arbitrary: fc.nat({ max: 10_000 }).map((at): Framing => ({ kind: 'truncated', at })), weight: 2 },
  { arbitrary: fc.constantFrom<Framing>({ kind: 'gzip-claim' }, { kind: 'gzipped' }, { kind: 'bom' }, { kind: 'utf16' }), weight: 2 },
  {
    arbitrary: fc
      .constantFrom(
        null,
        '',
        'text/plain',
        'application/x-www-form-urlencoded',
        'multipart/form-data; boundary=x',
        'application/json; charset=utf-16',
        'application/json; charset=latin1',
        'application/jsonx',
        'application/xml',
        'application/merge-patch+json',
        'application/json\t',
        ' application/json',
        'APPLICATION/JSON',
        '*/*',
        'application/json; boundary="',
        'application/\u00e9json',
      )
      .map((type): Framing => ({ kind: 'content-type', type })),
    weight: 2,
  },
  { arbitrary: fc.uint8Array({ minLength: 1, maxLength: 300 }).map((bytes): Framing => ({ kind: 'not-json', bytes })), weight: 1 },
);

/** Authorization headers: the team's FULL key most of the time, something broken now and then. */
function authHeader(key: string): fc.Arbitrary<string | null> {
  return fc.oneof(
    { arbitrary: fc.constant(`Bearer ${key}`), weight: 20 },
    {
      arbitrary: fc.constantFrom(null, '', 'Bearer', 'Bearer ', `Bearer ${key} extra`, `bearer\t${key}`, `Basic ${Buffer.from(`apikey:${key}`).toString('base64')}`, `Bearer ${key.slice(0, -1)}`, 'Bearer \u00ff\u00fe', `Bearer ${'x'.repeat(5000)}`),
      weight: 1,
    },
  );
}

/** Header values that node's client will put on the wire (latin1, no CR/LF/NUL). */
const headerSafe = hostileString.map((s) => [...s].filter((c) => c.charCodeAt(0) <= 0xff && (c === '\t' || c.charCodeAt(0) >= 0x20) && c.charCodeAt(0) !== 0x7f).join(''));

export interface FuzzRequest {
  request: ProbeRequest;
  /** A short description for failure messages. */
  describe: string;
}

const ODD_METHODS = ['HEAD', 'OPTIONS', 'TRACE', 'PROPFIND', 'PURGE', 'LINK', 'get', 'M-SEARCH'] as const;

export function routeRequest(route: RouteDef, example: RouteExample, key: string, prefixes: readonly string[] = ['/v1', '/api/v1']): fc.Arbitrary<FuzzRequest> {
  const paramNames = [...route.path.matchAll(/:([A-Za-z]+)/g)].map((m) => m[1]!);
  const idFor = (name: string) => fc.oneof({ arbitrary: fc.constant(percentEncode(example.params[name] ?? '')), weight: 5 }, { arbitrary: weirdPathId, weight: 1 });
  const path = fc.tuple(fc.constantFrom(...prefixes), fc.tuple(...paramNames.map(idFor))).map(([prefix, ids]) => {
    let p = route.path;
    paramNames.forEach((name, i) => {
      p = p.replace(`:${name}`, ids[i]!);
    });
    return prefix + p;
  });
  const isGet = route.method === 'GET';
  const query = fc.oneof({ arbitrary: mutatedQuery(example.query ?? {}), weight: isGet ? 6 : 1 }, { arbitrary: fc.constant(''), weight: isGet ? 1 : 6 });
  const body: fc.Arbitrary<unknown> = isGet ? fc.oneof({ arbitrary: fc.constant(undefined), weight: 8 }, { arbitrary: mutatedBody({ page: 1 }), weight: 1 }) : fc.oneof({ arbitrary: mutatedBody(example.body ?? {}), weight: 10 }, { arbitrary: fc.constant(undefined), weight: 1 });
  const method = fc.oneof({ arbitrary: fc.constant(route.method as string), weight: 30 }, { arbitrary: fc.constantFrom<string>(...ODD_METHODS), weight: 1 });
  const sendsIdempotency = route.path.startsWith('/emails') && route.method === 'POST';
  const idempotency = sendsIdempotency ? fc.option(fc.oneof(fc.constantFrom('k1', 'k2', '', ' ', 'x'.repeat(257)), headerSafe), { freq: 2 }) : fc.constant(null);

  return fc.record({ path, query, body, framing, method, auth: authHeader(key), idempotency }).map(({ path, query, body, framing: f, method, auth, idempotency }) => {
    const headers: Record<string, string> = {};
    if (auth !== null) headers.authorization = auth;
    if (idempotency !== null) headers['idempotency-key'] = idempotency;
    let bytes: Buffer | undefined = body === undefined ? undefined : serializeBody(body);
    let chunked = false;
    if (bytes) {
      headers['content-type'] = 'application/json';
      switch (f.kind) {
        case 'chunked':
          chunked = true;
          break;
        case 'truncated':
          bytes = bytes.subarray(0, f.at % Math.max(bytes.length, 1));
          break;
        case 'gzip-claim':
          headers['content-encoding'] = 'gzip';
          break;
        case 'gzipped':
          headers['content-encoding'] = 'gzip';
          bytes = gzipSync(bytes);
          break;
        case 'bom':
          bytes = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), bytes]);
          break;
        case 'utf16':
          headers['content-type'] = 'application/json; charset=utf-16';
          bytes = Buffer.from(bytes.toString('utf8'), 'utf16le');
          break;
        case 'content-type':
          if (f.type === null) delete headers['content-type'];
          else headers['content-type'] = f.type;
          break;
        case 'not-json':
          bytes = Buffer.from(f.bytes);
          break;
        case 'json':
          break;
      }
    }
    const request: ProbeRequest = { method, path: path + query, headers, body: bytes, chunked };
    const shownBody = bytes === undefined ? '-' : bytes.length > 300 ? `${bytes.length} bytes: ${bytes.subarray(0, 200).toString('utf8')}...` : bytes.toString('utf8');
    const describe = `${method} ${(path + query).slice(0, 400)} [${f.kind}${'type' in f ? ` ${f.type}` : ''}] headers=${JSON.stringify(headers).slice(0, 300)} body=${shownBody}`;
    // fast-check prints a counterexample through this: the short description, not megabytes of path
    return { request, describe, [fc.toStringMethod]: () => describe };
  });
}
