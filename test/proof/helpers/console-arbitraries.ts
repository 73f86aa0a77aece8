// fast-check arbitraries for requests to one console route: its valid example with path ids,
// the query string and the form mutated, and, for the contact import, broken CSV files and
// broken multipart framing. Values carry XSS_MARKERS now and then, so a page that writes one
// back unescaped is caught (test/proof/helpers/console-check.ts).
import fc from 'fast-check';
import { weirdPathId } from './api-arbitraries.js';
import type { ConsoleExample, ConsoleRoute, FormPairs } from './console-examples.js';
import { hostileString, mutatedBody, percentEncode, POISON_KEYS, serializeBody } from './hostile.js';

/** Markup that must never reach a console page as markup: `<x-fuzz` and `<svg/x-fuzz` are looked for raw. */
export const XSS_MARKERS = ['<x-fuzz-1>', '"\'><svg/x-fuzz onload=alert(1)>', '</textarea></title><x-fuzz-2>', 'a<x-fuzz-3>@example.org', '{{<x-fuzz-4>}}', 'javascript:"><x-fuzz-5>'] as const;
export const XSS_FOUND = /<x-fuzz|<svg\/x-fuzz/i;

/** A form or query value: text to percent-encode, or bytes already encoded (broken escapes, invalid UTF-8). */
export type Value = string | { raw: string };

const encode = (v: Value) => (typeof v === 'string' ? percentEncode(v) : v.raw);

/** Invalid or broken percent-escapes, as they go on the wire. */
const BROKEN_ESCAPES = ['%', '%Z', '%ZZ', '%FF', '%FE%FF', '%C0%80', '%C0%AF', '%ED%A0%80', '%E2%82', '%F4%90%80%80', '%00', '%2', '%%', '%u0041', 'a%00b', '%0D%0A', '+%2B+'] as const;

/** Hostile text, a marker (alone or inside text), or broken escapes. */
export const hostileText: fc.Arbitrary<Value> = fc.oneof(
  { arbitrary: hostileString, weight: 6 },
  { arbitrary: fc.constantFrom(...XSS_MARKERS), weight: 3 },
  { arbitrary: fc.tuple(hostileString, fc.constantFrom(...XSS_MARKERS)).map(([s, m]) => `${s.slice(0, 200)}${m}`), weight: 1 },
  { arbitrary: fc.tuple(fc.string({ maxLength: 4 }), fc.constantFrom(...BROKEN_ESCAPES)).map(([s, e]): Value => ({ raw: `${percentEncode(s)}${e}` })), weight: 2 },
);

/** Values a page number, an id or a date filter never is. */
const ODD_QUERY_VALUES = ['-1', '0', '-0', 'NaN', 'Infinity', '1e9', '1.5', ' 1', '0x10', '99999999999999999999', '100001', '2147483648', '١', '１', '2024-02-30', '2024-13-01', '0000-00-00', '9999-99-99', '2024-1-1', '2024-01-01T00:00:00Z', '+275760-09-13', '-000001-01-01', 'yesterday', '', 'true', 'null', '__proto__', 'constructor'] as const;

/** The query keys console pages read, plus keys they never do. */
const QUERY_KEYS = ['page', 'q', 'domainId', 'tag', 'since', 'until', 'status', 'reason', 'book', 'mode', 'images', 'watch', 'cursor', 'next', 'compose', 'limit'] as const;

type Pair = [string, Value];

/** Query edits: a value replaced (odd, hostile, another team's id), a key repeated, dropped, poisoned. */
export function consoleQuery(example: [string, string][], foreignIds: string[]): fc.Arbitrary<string> {
  const keys = [...new Set([...example.map(([k]) => k), ...QUERY_KEYS])];
  const value: fc.Arbitrary<Value> = fc.oneof(
    { arbitrary: hostileText, weight: 4 },
    { arbitrary: fc.constantFrom(...ODD_QUERY_VALUES), weight: 3 },
    ...(foreignIds.length ? [{ arbitrary: fc.constantFrom(...foreignIds), weight: 2 }] : []),
  );
  const anyKey = fc.oneof(fc.constantFrom(...keys), fc.constantFrom(...POISON_KEYS, 'page[]', 'q[0]', 'a[b]', '__proto__[polluted]', 'constructor[prototype][polluted]'), hostileString);
  const edit = fc.oneof(
    fc.tuple(fc.constant('set' as const), fc.constantFrom(...keys), value),
    fc.tuple(fc.constant('dup' as const), fc.constantFrom(...keys), value),
    fc.tuple(fc.constant('drop' as const), fc.constantFrom(...keys), fc.constant('')),
    fc.tuple(fc.constant('add' as const), anyKey, value),
  );
  return fc.array(edit, { minLength: 1, maxLength: 4 }).map((edits) => {
    let pairs: Pair[] = example.map(([k, v]) => [k, v]);
    for (const [kind, key, v] of edits) {
      if (kind === 'set') pairs = [...pairs.filter(([k]) => k !== key), [key, v]];
      else if (kind === 'drop') pairs = pairs.filter(([k]) => k !== key);
      else pairs.push([key, v]);
    }
    return pairs.length ? '?' + pairs.map(([k, v]) => `${percentEncode(k)}=${encode(v)}`).join('&') : '';
  });
}

/** Path ids: another team's, not ids at all, traversal, encoded slashes. */
export function pathId(example: string, foreign: string | undefined): fc.Arbitrary<string> {
  return fc.oneof(
    { arbitrary: fc.constant(percentEncode(example)), weight: 6 },
    ...(foreign ? [{ arbitrary: fc.constant(percentEncode(foreign)), weight: 2 }] : []),
    { arbitrary: weirdPathId, weight: 3 },
    { arbitrary: fc.constantFrom('..%2F..%2Fapi-keys', '%2e%2e', '%252F', 'a%2Fb', '..%5C..', `${percentEncode(example)}%2F..%2F..`, `${percentEncode(example)}%00`, `${percentEncode(example)}%20`, percentEncode(example.toUpperCase()), `%${percentEncode(example)}`), weight: 1 },
  );
}

/** A JSON field's value (segment filters, editor documents): its example mutated as fuzz-api mutates bodies, as the bytes it would be. */
function jsonText(example: unknown): fc.Arbitrary<Value> {
  return mutatedBody(example).map((v) => bytesValue(serializeBody(v)));
}

/** Bytes (latin1 string) percent-encoded one byte per escape, so invalid UTF-8 reaches the server as it is. */
function bytesValue(bytes: Buffer): Value {
  let out = '';
  for (const b of bytes) out += /[A-Za-z0-9\-_.~]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  return { raw: out };
}

const FILTER_EXAMPLE = { match: 'all', conditions: [{ field: 'email', op: 'contains', value: 'alpha' }, { match: 'any', conditions: [{ field: 'properties.plan', op: 'in', value: ['a', 'b'] }] }] };
const DOC_EXAMPLE = { type: 'doc', content: [{ type: 'heading', attrs: { level: 1 }, content: [{ type: 'text', text: 'Hi' }] }, { type: 'paragraph', content: [{ type: 'text', text: 'x', marks: [{ type: 'link', attrs: { href: 'https://example.com' } }] }] }] };

/** Values that mean something to one field. */
function fieldValue(name: string): fc.Arbitrary<Value> {
  if (name === 'filtersJson') return fc.oneof(jsonText(FILTER_EXAMPLE), hostileText);
  if (name === 'content') return fc.oneof(jsonText(DOC_EXAMPLE).map((v): Value => v), hostileText, fc.constantFrom('[[<x-fuzz-6>]](javascript:alert(1))', '[x](javascript:alert(1))', '# <x-fuzz-7>', '{{#each}}', '{{{{raw}}}}', '-'.repeat(5000)));
  if (name === 'properties') {
    const line = fc.tuple(fc.oneof(fc.constantFrom(...POISON_KEYS, 'plan', 'a.b', 'a[b]', ' '), hostileString.map((s) => s.replace(/[=\r\n]/g, ''))), hostileString.map((s) => s.replace(/[\r\n]/g, ''))).map(([k, v]) => `${k}=${v}`);
    return fc.oneof(fc.array(line, { minLength: 1, maxLength: 5 }).map((l) => l.join('\n')), hostileText);
  }
  return hostileText;
}

/** A form (urlencoded pairs) mutated: a field hostile, gone, repeated, renamed into a prototype key; or oversized. */
export function mutatedForm(example: FormPairs): fc.Arbitrary<Pair[]> {
  const n = example.length;
  const names = [...new Set(example.map(([k]) => k))];
  const base: Pair[] = example.map(([k, v]) => [k, v]);
  const options: fc.Arbitrary<(p: Pair[]) => Pair[]>[] = [
    fc.tuple(fc.constantFrom(...POISON_KEYS, '__proto__[polluted]', 'constructor[prototype][polluted]', '_csrf[]', 'a[b]'), fc.oneof(hostileText, fc.constant<Value>('yes'))).map(([k, v]) => (p: Pair[]) => [...p, [k, v] as Pair]),
    hostileText.map((v) => (p: Pair[]) => [...p, [percentEncode('\u0000'), v] as Pair]),
  ];
  if (n) {
    options.push(
      fc.nat({ max: n - 1 }).chain((i) => fieldValue(example[i]![0]).map((v) => (p: Pair[]) => p.map((x, j): Pair => (j === i ? [x[0], v] : x)))),
      fc.nat({ max: n - 1 }).chain((i) => fieldValue(example[i]![0]).map((v) => (p: Pair[]) => p.map((x, j): Pair => (j === i ? [x[0], v] : x)))),
      fc.nat({ max: n - 1 }).map((i) => (p: Pair[]) => p.filter((_x, j) => j !== i)),
      fc.nat({ max: n - 1 }).map((i) => (p: Pair[]) => p.map((x, j): Pair => (j === i ? [x[0], ''] : x))),
      fc.tuple(fc.constantFrom(...names), hostileText).map(([k, v]) => (p: Pair[]) => [...p, [k, v] as Pair]),
      fc.tuple(fc.constantFrom(...names), hostileText).map(([k, v]) => (p: Pair[]) => [[k, v] as Pair, ...p]),
      fc.tuple(fc.nat({ max: n - 1 }), fc.constantFrom('[]', '[0]', '.x', '%00', ' ', '\u00a0')).map(([i, suffix]) => (p: Pair[]) => p.map((x, j): Pair => (j === i ? [x[0] + suffix, x[1]] : x))),
      fc.tuple(fc.nat({ max: n - 1 }), fc.uint8Array({ minLength: 1, maxLength: 40 })).map(([i, bytes]) => (p: Pair[]) => p.map((x, j): Pair => (j === i ? [x[0], bytesValue(Buffer.from(bytes))] : x))),
    );
  }
  const oneEdit = fc.oneof(...options);
  return fc.oneof(
    { arbitrary: fc.constant(base), weight: 1 },
    { arbitrary: fc.array(oneEdit, { minLength: 1, maxLength: 3 }).map((edits) => edits.reduce((p, f) => f(p), base)), weight: 12 },
    // over the 2 MB form limit: a 413, read to the end
    { arbitrary: fc.constant<Pair[]>([...base, ['pad', 'a'.repeat(2 * 1024 * 1024 + 10)]]), weight: 1 },
  );
}

export function encodeForm(pairs: Pair[]): string {
  return pairs.map(([k, v]) => `${percentEncode(k)}=${encode(v)}`).join('&');
}

/** A form as multipart/form-data, each value as its UTF-8 (or raw) bytes. */
export function multipartOf(pairs: Pair[], boundary: string, file?: { name: string; body: Buffer; field?: string }): Buffer {
  const parts: Buffer[] = [];
  const bytesOf = (v: Value) => (typeof v === 'string' ? Buffer.from(v, 'utf8') : Buffer.from(decodeRaw(v.raw), 'latin1'));
  for (const [k, v] of pairs) parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${k.replace(/"/g, '%22')}"\r\n\r\n`), bytesOf(v), Buffer.from('\r\n'));
  if (file) parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${file.field ?? 'file'}"; filename="${file.name}"\r\nContent-Type: text/csv\r\n\r\n`), file.body, Buffer.from('\r\n'));
  parts.push(Buffer.from(`--${boundary}--\r\n`));
  return Buffer.concat(parts);
}

/** %XX escapes to the bytes they stand for (latin1), leaving broken ones as they are. */
function decodeRaw(raw: string): string {
  return raw.replace(/%([0-9A-Fa-f]{2})/g, (_m, h: string) => String.fromCharCode(parseInt(h, 16)));
}

/** CSV files an import must refuse or import, never choke on. */
export const hostileCsv: fc.Arbitrary<Buffer> = fc.oneof(
  fc.constantFrom(
    '',
    'email',
    'email\n',
    'firstName,lastName\nAnn,Alpha\n',
    'email,email\na@example.org,b@example.org\n',
    '__proto__,email,constructor\npolluted,p1@example.org,x\n',
    'email,__proto__\np2@example.org,{"polluted":"yes"}\n',
    'email,toString,hasOwnProperty,valueOf\np3@example.org,1,2,3\n',
    '"email\na@example.org\n',
    'email\n"unterminated@example.org\n',
    'email,firstName\n"a@example.org","x""y""\n',
    'email\r\r\ra@example.org\r',
    '\ufeff\ufeffemail\na@example.org\n',
    'email;firstName\na@example.org;Ann\n',
    'email\tfirstName\na@example.org\tAnn\n',
    `email,firstName\n${XSS_MARKERS[3]},${XSS_MARKERS[0]}\n`,
    `email,${XSS_MARKERS[1]}\nmk@example.org,${XSS_MARKERS[2]}\n`,
    'email,subscribed\na@example.org,maybe\nb@example.org,\u0000\n',
    'email\n' + 'x'.repeat(200_000) + '@example.org\n',
    'email,firstName\n' + Array.from({ length: 3000 }, (_v, i) => `bulk${i}@example.org,N${i}`).join('\n'),
    'email\n' + ',,,,,,,,\n'.repeat(500),
    `email,${'c,'.repeat(2000)}x\na@example.org\n`,
  ).map((s) => Buffer.from(s, 'utf8')),
  hostileString.map((s) => Buffer.from(`email,firstName\n${s}\n`, 'utf8')),
  fc.array(fc.array(hostileString.filter((s) => s.length < 200), { minLength: 1, maxLength: 4 }).map((cells) => cells.join(',')), { minLength: 1, maxLength: 6 }).map((lines) => Buffer.from(`email,firstName,note\n${lines.join('\n')}`, 'utf8')),
  fc.uint8Array({ minLength: 1, maxLength: 2000 }).map((b) => Buffer.concat([Buffer.from('email\n'), Buffer.from(b)])),
  fc.tuple(fc.constantFrom('ff', 'c080', 'eda080', 'e282', '80'), fc.constantFrom('email\n', 'email,firstName\na@example.org,')).map(([hex, head]) => Buffer.concat([Buffer.from(head), Buffer.from(hex, 'hex'), Buffer.from('\n')])),
);

export interface ImportRequest {
  contentType: string;
  body: Buffer;
  describe: string;
}

/** The contact import: a valid multipart with a hostile CSV, or broken multipart framing. */
export function importRequest(csrf: string, validCsv: string): fc.Arbitrary<ImportRequest> {
  const boundary = '----fuzzBoundary7MA4YWxk';
  const ok = (csv: Buffer, name = 'contacts.csv'): Buffer => multipartOf([['_csrf', csrf]], boundary, { name, body: csv });
  const ct = `multipart/form-data; boundary=${boundary}`;
  const framings: fc.Arbitrary<ImportRequest> = fc.oneof(
    fc.constant({ contentType: 'multipart/form-data', body: ok(Buffer.from(validCsv)), describe: 'no boundary' }),
    fc.constant({ contentType: 'multipart/form-data; boundary=other', body: ok(Buffer.from(validCsv)), describe: 'another boundary' }),
    fc.constant({ contentType: `multipart/form-data; boundary="${boundary}"`, body: ok(Buffer.from(validCsv)), describe: 'quoted boundary' }),
    fc.constant({ contentType: 'multipart/form-data; boundary=', body: ok(Buffer.from(validCsv)), describe: 'empty boundary' }),
    fc.constant({ contentType: `multipart/form-data; boundary=${'b'.repeat(5000)}`, body: Buffer.from(`--${'b'.repeat(5000)}--\r\n`), describe: 'a 5000-character boundary' }),
    fc.nat({ max: 400 }).map((at) => ({ contentType: ct, body: ok(Buffer.from(validCsv)).subarray(0, at), describe: `truncated at ${at}` })),
    fc.constant({ contentType: ct, body: Buffer.from(ok(Buffer.from(validCsv)).toString('latin1').replace(/\r\n/g, '\n'), 'latin1'), describe: 'LF line ends' }),
    fc.constant({ contentType: ct, body: Buffer.from(ok(Buffer.from(validCsv)).toString('latin1').replace(`--${boundary}--\r\n`, ''), 'latin1'), describe: 'no closing delimiter' }),
    fc.constant({ contentType: ct, body: Buffer.concat([multipartOf([['_csrf', csrf]], boundary, { name: 'a.csv', body: Buffer.from(validCsv) }).subarray(0, -(boundary.length + 6)), Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="b.csv"\r\n\r\nemail\r\n--${boundary}--\r\n`)]), describe: 'two files' }),
    fc.constant({ contentType: ct, body: Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="x.csv"\r\n--${boundary}--\r\n`), describe: 'a part with no blank line' }),
    fc.constant({ contentType: ct, body: Buffer.from(`--${boundary}\r\n\r\n${validCsv}\r\n--${boundary}--\r\n`), describe: 'a part with no headers' }),
    fc.constant({ contentType: ct, body: Buffer.from(`garbage before\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="x.csv"\r\n\r\n${validCsv}\r\n--${boundary}--\r\ngarbage after`), describe: 'preamble and epilogue' }),
    fc.constant({ contentType: ct, body: multipartOf([], boundary), describe: 'no file' }),
    fc.constant({ contentType: ct, body: multipartOf([], boundary, { name: '', body: Buffer.alloc(0) }), describe: 'an empty file input' }),
    fc.constant({ contentType: ct, body: multipartOf([], boundary, { name: 'x.csv', body: Buffer.from(validCsv), field: '__proto__' }), describe: 'the file under __proto__' }),
    fc.constantFrom('../../etc/passwd', '..\\..\\boot.ini', XSS_MARKERS[0], XSS_MARKERS[1], 'a\u0000b.csv', '\u202ecsv.exe', 'x'.repeat(5000)).map((name) => ({ contentType: ct, body: multipartOf([], boundary, { name, body: Buffer.from(validCsv) }), describe: `file name ${JSON.stringify(name.slice(0, 40))}` })),
    fc.constant({ contentType: ct, body: Buffer.concat([Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.csv"\r\n\r\n`), Buffer.alloc(10 * 1024 * 1024 + 200 * 1024, 'a'), Buffer.from(`\r\n--${boundary}--\r\n`)]), describe: 'over the CSV size limit' }),
    fc.constant({ contentType: 'application/x-www-form-urlencoded', body: Buffer.from(`_csrf=${csrf}&file=${encodeURIComponent(validCsv)}`), describe: 'urlencoded, no file' }),
    fc.uint8Array({ maxLength: 500 }).map((b) => ({ contentType: ct, body: Buffer.from(b), describe: `${b.length} random bytes` })),
  );
  return fc.oneof(
    { arbitrary: hostileCsv.map((csv) => ({ contentType: ct, body: ok(csv), describe: `CSV ${JSON.stringify(csv.subarray(0, 120).toString('latin1'))}${csv.length > 120 ? ` (${csv.length} bytes)` : ''}` })), weight: 3 },
    { arbitrary: framings, weight: 2 },
  );
}

export interface ConsoleFuzzRequest {
  path: string;
  contentType?: string;
  body?: Buffer;
  /** Where the CSRF token goes: the form's _csrf field, the X-CSRF-Token header, or nowhere/wrong (then 403 is the only right answer). */
  csrf: 'field' | 'header' | 'missing' | 'wrong';
  headers: Record<string, string>;
  describe: string;
}

/** The CSRF token is filled in at send time (a session's token can change during a run). */
export const CSRF_SLOT = '@@csrf@@';

export function consoleRequest(route: ConsoleRoute, ex: ConsoleExample): fc.Arbitrary<ConsoleFuzzRequest> {
  const names = [...route.path.matchAll(/:([A-Za-z]+)/g)].map((m) => m[1]!);
  const path = fc.tuple(...names.map((n) => pathId(ex.params[n]!, ex.foreign[n]))).map((ids) => names.reduce((p, n, i) => p.replace(`:${n}`, ids[i]!), route.path));
  const foreignIds = Object.values(ex.foreign);
  const isGet = route.method === 'GET';
  const query = isGet ? fc.oneof({ arbitrary: consoleQuery(ex.query, foreignIds), weight: 5 }, { arbitrary: fc.constant(ex.query.length ? '?' + ex.query.map(([k, v]) => `${percentEncode(k)}=${percentEncode(v)}`).join('&') : ''), weight: 1 }) : fc.oneof({ arbitrary: fc.constant(''), weight: 6 }, { arbitrary: consoleQuery([], foreignIds), weight: 1 });
  const extraHeaders = fc.oneof(
    { arbitrary: fc.constant({} as Record<string, string>), weight: 8 },
    { arbitrary: fc.constant({ accept: 'application/json' }), weight: 1 },
    { arbitrary: hostileString.map((s) => ({ referer: `http://127.0.0.1/console/${[...s].filter((c) => c.charCodeAt(0) > 0x20 && c.charCodeAt(0) < 0x7f).join('')}` })), weight: 1 },
  );
  if (isGet) {
    return fc.record({ path, query, extra: extraHeaders }).map(({ path: p, query: q, extra }) => {
      const describe = `GET ${(p + q).slice(0, 500)} ${JSON.stringify(extra)}`;
      return { path: p + q, csrf: 'field' as const, headers: extra, describe, [fc.toStringMethod]: () => describe };
    });
  }
  const csrf = fc.oneof({ arbitrary: fc.constant<'field'>('field'), weight: 14 }, { arbitrary: fc.constant<'header'>('header'), weight: 3 }, { arbitrary: fc.constantFrom<'missing' | 'wrong'>('missing', 'wrong'), weight: 1 });
  const encoding = fc.oneof(
    { arbitrary: fc.constant('application/x-www-form-urlencoded'), weight: 12 },
    { arbitrary: fc.constantFrom('', 'multipart/form-data', 'text/plain', 'application/json', 'application/x-www-form-urlencoded; charset=iso-8859-1', 'APPLICATION/X-WWW-FORM-URLENCODED'), weight: 2 },
  );
  if (ex.csv !== undefined) {
    return fc.record({ path, csrf, req: importRequest(CSRF_SLOT, ex.csv) }).map(({ path: p, csrf: c, req }) => {
      // with a bad token, the request must be refused however the body is framed
      const describe = `POST ${p.slice(0, 400)} [${c}] ${req.describe}`;
      return { path: p, contentType: req.contentType, body: req.body, csrf: c === 'field' ? ('header' as const) : c, headers: {}, describe, [fc.toStringMethod]: () => describe };
    });
  }
  return fc.record({ path, query, form: mutatedForm(ex.form), csrf, encoding, extra: extraHeaders }).map(({ path: p, query: q, form, csrf: c, encoding: enc, extra }) => {
    // A CSRF case sends the example's own form: the token alone decides the answer (403).
    const pairs: Pair[] = c === 'missing' || c === 'wrong' ? ex.form.map(([k, v]) => [k, v]) : form;
    const withToken: Pair[] = c === 'field' ? [['_csrf', { raw: CSRF_SLOT }], ...pairs] : c === 'wrong' ? [['_csrf', 'x'.repeat(32)], ...pairs] : pairs;
    const contentType = c === 'missing' || c === 'wrong' ? 'application/x-www-form-urlencoded' : enc;
    const body = contentType === 'multipart/form-data' ? multipartOf(withToken, 'fuzzForm') : Buffer.from(encodeForm(withToken), 'latin1');
    const ctHeader = contentType === 'multipart/form-data' ? 'multipart/form-data; boundary=fuzzForm' : contentType;
    const shown = body.length > 400 ? `${body.length} bytes: ${body.subarray(0, 300).toString('latin1')}...` : body.toString('latin1');
    const describe = `POST ${(p + q).slice(0, 400)} [${c}, ${ctHeader}] ${JSON.stringify(extra)} body=${shown}`;
    return { path: p + q, contentType: ctHeader, body, csrf: c, headers: extra, describe, [fc.toStringMethod]: () => describe };
  });
}
