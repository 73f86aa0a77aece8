// Hostile values for the fuzz suites: strings with unicode edge cases and line breaks,
// values of the wrong type, oversized strings, deep nesting, prototype-pollution keys, and
// bytes that are not UTF-8 at all.
//
// Two things can not be carried by a JS value through JSON.stringify: nesting deeper than
// the test's own stack, and invalid UTF-8. Both travel as marker strings that serializeBody()
// replaces in the final bytes.
import fc from 'fast-check';

/** Single code points and short sequences that break naive code. */
export const EDGE_CHARS = [
  '\u0000', // NUL
  '\u0001',
  '\u0007',
  '\b',
  '\t',
  '\u000b', // VT
  '\f',
  '\r',
  '\n',
  '\r\n',
  '\u001b[31m', // ANSI escape
  '\u007f', // DEL
  '\u0085', // NEL
  '\u00a0', // NBSP
  '\u00ad', // soft hyphen
  '\u2028', // LINE SEPARATOR
  '\u2029', // PARAGRAPH SEPARATOR
  '\u200b', // zero width space
  '\u200d', // ZWJ
  '\u202e', // RIGHT-TO-LEFT OVERRIDE
  '\u2066', // LEFT-TO-RIGHT ISOLATE
  '\u061c', // ARABIC LETTER MARK
  '\ufeff', // BOM
  '\ufffd',
  '\uffff', // noncharacter
  '\ud800', // lone high surrogate
  '\udfff', // lone low surrogate
  '\udc00\ud800', // reversed pair
  'e\u0301\u0301\u0301\u0301\u0301\u0301', // stacked combining marks
  'Z\u0351\u0355\u0359\u035a\u0360\u0361', // zalgo
  '\ud83c\udff3\ufe0f\u200d\ud83c\udf08', // emoji ZWJ sequence
  '\ud83d\udc69\ud83c\udffd\u200d\ud83d\udcbb',
  '\u0130', // dotted capital I (case mapping changes length)
  '\u00df', // sharp s (uppercases to two letters)
  '\ufb03', // ffi ligature
  '\u212a', // KELVIN SIGN (lowercases to ASCII k)
  '\uff21', // fullwidth A
  '\u0663', // ARABIC-INDIC DIGIT THREE
  '\uff11', // FULLWIDTH DIGIT ONE
  '\u{10ffff}',
  '\u{e0001}', // language tag
] as const;

/** Whole strings with a meaning somewhere: injections, numbers in disguise, paths, templates. */
export const NASTY_STRINGS = [
  '',
  ' ',
  '   ',
  'null',
  'undefined',
  'true',
  'false',
  'NaN',
  '-NaN',
  'Infinity',
  '-Infinity',
  '1e309',
  '-0',
  '0x10',
  '0b1',
  '1_000',
  '9007199254740993',
  '-2147483649',
  '2147483648',
  '1.5',
  '١٢٣',
  '__proto__',
  'constructor',
  'prototype',
  'hasOwnProperty',
  'toString',
  '../../../../etc/passwd',
  '..\\..\\windows\\win.ini',
  '%00',
  '%2e%2e%2f',
  '%s%s%s%n',
  '{{constructor.constructor("return process")()}}',
  '{{#each this}}{{/each}}',
  '{{firstName,fallback=}}',
  '${7*7}',
  '<script>alert(1)</script>',
  '"><img src=x onerror=alert(1)>',
  "' OR '1'='1' --",
  "'; DROP TABLE emails; --",
  'a%_\\',
  '\\',
  '"',
  "'",
  '`',
  '\r\nBcc: victim@evil.com',
  '\nX-Injected: 1',
  '\rX-Injected: 1',
  'x\r\n\r\n<html>body</html>',
  '=?utf-8?Q?a=0D=0ABcc:_x@evil.com?=',
  '=?utf-8?B?DQpCY2M6IHhAZXZpbC5jb20=?=',
  'a@b.com\r\nRCPT TO:<x@evil.com>',
  'a@b.com,evil@evil.com',
  'a@b.com;evil@evil.com',
  '<a@b.com>',
  'Evil <evil@evil.com>',
  '"a\\"b"@example.net',
  'user@[127.0.0.1]',
  'user@localhost',
  'a@xn--80ak6aa92e.com',
  'a@ex\u00e4mple.com',
  'javascript:alert(1)',
  'http://127.0.0.1:1/x',
  'file:///etc/passwd',
  'data:text/html,x',
  'CON',
  'aux.txt',
] as const;

const LIMIT_LENGTHS = [63, 64, 65, 100, 101, 200, 201, 253, 254, 255, 256, 257, 320, 321, 500, 501, 900, 901, 998, 999, 1000, 1001, 2000, 2001, 4000, 4001, 8193, 65_537] as const;

/** A string of one unit repeated to a length around a likely limit. */
export const oversizedString = fc
  .tuple(fc.constantFrom(...LIMIT_LENGTHS), fc.constantFrom('a', 'é', '\u2028', '\ud83d\ude00', ' ', 'ab ', '\u0000', '1'))
  .map(([length, unit]) => unit.repeat(Math.ceil(length / unit.length)).slice(0, length));

/** Any string: edge characters mixed into random text, nasty whole strings, random full-unicode. */
export const hostileString: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.constantFrom(...NASTY_STRINGS), weight: 4 },
  { arbitrary: fc.array(fc.oneof(fc.constantFrom(...EDGE_CHARS), fc.string({ maxLength: 6 })), { minLength: 1, maxLength: 8 }).map((parts) => parts.join('')), weight: 4 },
  { arbitrary: fc.string({ unit: 'binary', maxLength: 40 }), weight: 2 },
  { arbitrary: fc.string({ unit: 'grapheme', maxLength: 40 }), weight: 1 },
  { arbitrary: oversizedString, weight: 1 },
);

/** Marker strings serializeBody() turns into nesting deeper than JSON.stringify could write. */
export const DEEP_MARKER = /"@@deep:(array|object|mixed):(\d+)@@"/g;
/** Marker strings serializeBody() turns into bytes that are not UTF-8. */
export const BYTES_MARKER = '@@bytes:';

const INVALID_UTF8 = [
  'ff', // never valid
  'fe',
  'c080', // overlong NUL
  'c0af', // overlong slash
  'e080af', // overlong slash, 3 bytes
  'f08080af', // overlong slash, 4 bytes
  'eda080', // UTF-8 encoded high surrogate (CESU)
  'edbfbf', // UTF-8 encoded low surrogate
  'e282', // truncated sequence
  '80', // lone continuation byte
  'f4908080', // above U+10FFFF
  'f8888080af', // 5-byte form
] as const;

export const deepValue = fc
  .tuple(fc.constantFrom('array', 'object', 'mixed'), fc.constantFrom(16, 65, 129, 300, 1_000, 5_000, 50_000, 200_000))
  .map(([kind, depth]) => `@@deep:${kind}:${depth}@@`);

export const invalidUtf8String = fc
  .tuple(fc.string({ maxLength: 4 }), fc.constantFrom(...INVALID_UTF8), fc.string({ maxLength: 4 }))
  .map(([a, hex, b]) => `${a}${BYTES_MARKER}${hex}@@${b}`);

/** A value of a type an API field never expects, or at a range it never takes. */
export const wrongTypedValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom<unknown>(null, true, false, 0, -1, 1, 1.5, -0.5, 2 ** 31, -(2 ** 31) - 1, 2 ** 53 + 2, 1e21, 1e308, -1e308, Number.MIN_VALUE, [], [null], [[]], {}, { '': '' }),
  fc.double(),
  fc.integer(),
  fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 4 }),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 3 }),
  fc.array(fc.constant('x'), { minLength: 101, maxLength: 1_100 }), // over the list limits
);

/** Anything hostile that can stand where a JSON value goes. */
export const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: hostileString, weight: 5 },
  { arbitrary: wrongTypedValue, weight: 4 },
  { arbitrary: deepValue, weight: 2 },
  { arbitrary: invalidUtf8String, weight: 1 },
);

/** Keys that poison naive object handling. */
export const POISON_KEYS = ['__proto__', 'constructor', 'prototype', 'toString', 'valueOf', 'hasOwnProperty', '__defineGetter__', 'then', ''] as const;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Every path into a JSON value (root first), as lists of keys / indexes. */
export function jsonPaths(value: unknown, prefix: (string | number)[] = [], out: (string | number)[][] = []): (string | number)[][] {
  out.push(prefix);
  if (Array.isArray(value)) value.forEach((v, i) => jsonPaths(v, [...prefix, i], out));
  else if (value !== null && typeof value === 'object') for (const [k, v] of Object.entries(value)) jsonPaths(v, [...prefix, k], out);
  return out;
}

function clone<T>(value: T): T {
  return value === undefined ? value : (JSON.parse(JSON.stringify(value)) as T);
}

/** Sets an own property, even "__proto__" (plain assignment would change the prototype). */
export function setOwn(obj: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

function replaceAt(root: unknown, path: (string | number)[], value: unknown): unknown {
  if (path.length === 0) return value;
  const copy = clone(root) as Json;
  let node = copy as Record<string | number, unknown>;
  for (const key of path.slice(0, -1)) node = node[key] as Record<string | number, unknown>;
  const last = path[path.length - 1]!;
  if (Array.isArray(node)) node[last as number] = value;
  else setOwn(node, String(last), value);
  return copy;
}

function deleteAt(root: unknown, path: (string | number)[]): unknown {
  if (path.length === 0) return undefined;
  const copy = clone(root) as Json;
  let node = copy as Record<string | number, unknown>;
  for (const key of path.slice(0, -1)) node = node[key] as Record<string | number, unknown>;
  const last = path[path.length - 1]!;
  if (Array.isArray(node)) node.splice(last as number, 1);
  else delete node[last];
  return copy;
}

function objectPaths(value: unknown): (string | number)[][] {
  return jsonPaths(value).filter((p) => {
    let node: unknown = value;
    for (const k of p) node = (node as Record<string | number, unknown>)[k];
    return node !== null && typeof node === 'object' && !Array.isArray(node);
  });
}

function addKeyAt(root: unknown, path: (string | number)[], key: string, value: unknown): unknown {
  const copy = clone(root);
  let node = copy as Record<string | number, unknown>;
  for (const k of path) node = node[k] as Record<string | number, unknown>;
  setOwn(node as Record<string, unknown>, key, value);
  return copy;
}

/** One mutation of a valid example: a field replaced, removed, a key added, or the whole body swapped. */
function mutationOf(example: unknown): fc.Arbitrary<unknown> {
  const paths = jsonPaths(example);
  const objects = objectPaths(example);
  const options: fc.Arbitrary<unknown>[] = [
    fc.tuple(fc.nat({ max: paths.length - 1 }), hostileValue).map(([i, v]) => replaceAt(example, paths[i]!, v)),
    fc.tuple(fc.nat({ max: paths.length - 1 }), hostileValue).map(([i, v]) => replaceAt(example, paths[i]!, v)),
  ];
  if (paths.length > 1) options.push(fc.nat({ max: paths.length - 2 }).map((i) => deleteAt(example, paths[i + 1]!)));
  if (objects.length) {
    options.push(
      fc
        .tuple(fc.nat({ max: objects.length - 1 }), fc.oneof(fc.constantFrom(...POISON_KEYS), hostileString), fc.oneof(fc.constant({ polluted: 'yes' }), hostileValue))
        .map(([i, k, v]) => addKeyAt(example, objects[i]!, k, v)),
    );
  }
  return fc.oneof(...options);
}

/**
 * The valid example itself (now and then), or one to three mutations of it. Mutations chain,
 * so a later one may reach into a value an earlier one put in.
 */
export function mutatedBody(example: unknown): fc.Arbitrary<unknown> {
  return fc.oneof(
    { arbitrary: fc.constant(example), weight: 1 },
    { arbitrary: mutationOf(example), weight: 6 },
    { arbitrary: mutationOf(example).chain((once) => mutationOf(once)), weight: 2 },
    { arbitrary: mutationOf(example).chain((once) => mutationOf(once).chain((twice) => mutationOf(twice))), weight: 1 },
    { arbitrary: hostileValue, weight: 1 },
  );
}

function deepText(kind: string, depth: number): string {
  if (kind === 'array') return '['.repeat(depth) + '1' + ']'.repeat(depth);
  if (kind === 'object') return '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
  const half = Math.ceil(depth / 2);
  return '[{"a":'.repeat(half) + '1' + '}]'.repeat(half);
}

/** JSON text of a value, with deep-nesting markers expanded and byte markers turned into raw bytes. */
export function serializeBody(value: unknown): Buffer {
  if (value === undefined) return Buffer.alloc(0);
  const text = JSON.stringify(value).replace(DEEP_MARKER, (_m, kind: string, depth: string) => deepText(kind, Number(depth)));
  if (!text.includes(BYTES_MARKER)) return Buffer.from(text, 'utf8');
  const parts: Buffer[] = [];
  const re = /@@bytes:([0-9a-f]+)@@/g;
  let last = 0;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    parts.push(Buffer.from(text.slice(last, m.index), 'utf8'), Buffer.from(m[1]!, 'hex'));
    last = m.index + m[0].length;
  }
  parts.push(Buffer.from(text.slice(last), 'utf8'));
  return Buffer.concat(parts);
}

/**
 * Percent-encodes a string for a URL path segment or query value, byte by byte (a lone
 * surrogate becomes U+FFFD's bytes, where encodeURIComponent would throw). `keep` leaves some
 * characters raw (dots, %-sequences) so already-encoded or dot-segment input reaches the server as is.
 */
export function percentEncode(text: string, keep = /[A-Za-z0-9\-_.~]/): string {
  let out = '';
  for (const ch of text) {
    if (keep.test(ch)) out += ch;
    else for (const b of Buffer.from(ch, 'utf8')) out += `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}
