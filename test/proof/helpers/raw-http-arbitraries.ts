// Malformed HTTP/1.1 at the byte level: request lines, header blocks, framing (Content-Length
// and chunked), pipelining, and plain garbage.
import fc from 'fast-check';

const METHOD = fc.oneof(
  { arbitrary: fc.constantFrom('GET', 'POST', 'PATCH', 'PUT', 'DELETE'), weight: 6 },
  { arbitrary: fc.constantFrom('get', 'G\u0000ET', 'GET\u00e9', '', ' ', 'POST POST', 'HEAD', 'OPTIONS', 'CONNECT', 'PRI', 'X'.repeat(300), 'PATCH\t'), weight: 2 },
);

const TARGET = fc.oneof(
  { arbitrary: fc.constantFrom('/v1/emails', '/v1/domains', '/v1/contactBooks', '/api/v1/emails/batch', '/v1/suppressions', '/health', '/t/o/x.gif', '/unsubscribe/x', '/confirm/x'), weight: 6 },
  {
    arbitrary: fc.constantFrom(
      '',
      '*',
      '/',
      'v1/emails',
      'http://evil.test/v1/emails',
      '//v1/emails',
      '/v1/../../etc/passwd',
      '/v1/domains/%',
      '/v1/domains/%zz',
      '/v1/domains/\u00ff\u00fe',
      '/v1/domains/a b',
      '/v1/domains/\u0000',
      '/v1/emails?x=\u0001',
      '/v1/emails#frag',
      '/v1/emails?' + 'a=1&'.repeat(3000),
      '/v1/' + 'x'.repeat(20_000),
    ),
    weight: 3,
  },
);

const VERSION = fc.oneof({ arbitrary: fc.constant('HTTP/1.1'), weight: 6 }, { arbitrary: fc.constantFrom('HTTP/1.0', 'HTTP/2.0', 'HTTP/0.9', 'HTTP/1.1x', 'HTTP/', 'http/1.1', '', 'HTTP/1.1 extra', 'HTTP/9.9'), weight: 2 });

const EOL = fc.oneof({ arbitrary: fc.constant('\r\n'), weight: 6 }, { arbitrary: fc.constantFrom('\n', '\r', '\r\r\n', '\n\r'), weight: 1 });

/** Header lines beyond Host and Authorization: framing conflicts, bad names, folding, NUL, size. */
const ODD_HEADER = fc.constantFrom(
  'Content-Length: 5',
  'Content-Length: -1',
  'Content-Length: 1e3',
  'Content-Length: 99999999999999999999',
  'Content-Length: 5, 6',
  'Content-Length: 0x10',
  'Content-Length: 10\r\nContent-Length: 20',
  'Transfer-Encoding: chunked',
  'Transfer-Encoding: gzip, chunked',
  'Transfer-Encoding: chunked, identity',
  'Transfer-Encoding: xchunked',
  'Transfer-Encoding: chunked\r\nContent-Length: 3',
  'Content-Type: application/json',
  'Content-Type: text/plain',
  'Content-Encoding: gzip',
  'Content-Encoding: br, deflate',
  'Expect: 100-continue',
  'Expect: 999-nope',
  'Connection: keep-alive',
  'Connection: close',
  'Connection: Upgrade\r\nUpgrade: websocket',
  'Upgrade: h2c',
  'X-Forwarded-For: 1.2.3.4, <script>',
  'X-Forwarded-For: ' + 'f'.repeat(5000),
  'Idempotency-Key: k',
  'Bad Header: x',
  'No-Colon-Here',
  ': empty name',
  'Name\u0000: nul',
  'X-Nul: a\u0000b',
  'X-Bell: \u0007',
  'X-High: \u00ff\u00fe',
  ' folded: continuation',
  'X-Fold: a\r\n b',
  'X-Long: ' + 'x'.repeat(20_000),
  'Host: second.example',
);

const BODY = fc.oneof(
  fc.constant(''),
  fc.constantFrom('{"from":"a@sender.dev","to":"b@example.net","subject":"s","text":"t"}', '{"name":', '[1,2', 'null', '{}', '\u00ff\u00fe\u0000', '5\r\nhello\r\n0\r\n\r\n', 'zz\r\nhello\r\n0\r\n\r\n', 'ffffffffffffffff\r\nx\r\n', '5;ext=1\r\nhello\r\n0\r\nTrailer: x\r\n\r\n', '3\r\nab', '0\r\n\r\nGET / HTTP/1.1\r\n\r\n'),
  fc.string({ unit: 'binary', maxLength: 200 }),
);

/** Bytes as latin1: every char 0..255 is one byte; anything above becomes its UTF-8 bytes. */
function bytes(text: string): Buffer {
  return /[^\u0000-\u00ff]/.test(text) ? Buffer.from(text, 'utf8') : Buffer.from(text, 'latin1');
}

export interface RawCase {
  pieces: Buffer[];
  describe: string;
  /** The first request is a HEAD (its answer has no body). */
  headFirst: boolean;
  /** The first request targets the API (its errors must be JSON in the spec's shape). */
  api: boolean;
}

export function rawHttpCase(key: string): fc.Arbitrary<RawCase> {
  const structured: fc.Arbitrary<RawCase> = fc
    .record({
      method: METHOD,
      target: TARGET,
      version: VERSION,
      eol: EOL,
      host: fc.oneof({ arbitrary: fc.constant<string | null>('127.0.0.1'), weight: 5 }, { arbitrary: fc.constantFrom<string | null>(null, '', 'a b', '\u00ff', 'x'.repeat(300)), weight: 1 }),
      auth: fc.boolean(),
      headers: fc.array(ODD_HEADER, { maxLength: 4 }),
      body: BODY,
      pipelined: fc.constantFrom(0, 0, 0, 1, 3),
      split: fc.nat({ max: 100 }),
    })
    .map(({ method, target, version, eol, host, auth, headers, body, pipelined, split }) => {
      const lines = [`${method} ${target} ${version}`.replace(/ $/, '')];
      if (host !== null) lines.push(`Host: ${host}`);
      if (auth) lines.push(`Authorization: Bearer ${key}`);
      lines.push(...headers);
      const head = lines.join(eol) + eol + eol;
      let text = head + body;
      // pipelined followers: well-formed requests after the broken one
      for (let i = 0; i < pipelined; i++) text += `GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`;
      const all = bytes(text);
      // delivered in two writes at an arbitrary point, so parsers see split tokens
      const at = Math.floor((all.length * split) / 100);
      return {
        pieces: [all.subarray(0, at), all.subarray(at)],
        describe: JSON.stringify(text.length > 600 ? text.slice(0, 600) + '...' : text),
        headFirst: method === 'HEAD',
        api: /^\/(api\/)?v1\//.test(target),
      };
    });
  const garbage = fc.uint8Array({ minLength: 1, maxLength: 4000 }).map((b): RawCase => ({ pieces: [Buffer.from(b)], describe: `garbage ${Buffer.from(b).subarray(0, 80).toString('hex')}`, headFirst: false, api: false }));
  const manyHeaders = fc.nat({ max: 3000 }).map((n) => {
    const text = `GET /v1/domains HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n${'X-A: b\r\n'.repeat(n)}\r\n`;
    return { pieces: [Buffer.from(text)], describe: `GET with ${n} extra headers`, headFirst: false, api: true } satisfies RawCase;
  });
  return fc.oneof({ arbitrary: structured, weight: 8 }, { arbitrary: garbage, weight: 1 }, { arbitrary: manyHeaders, weight: 1 });
}
