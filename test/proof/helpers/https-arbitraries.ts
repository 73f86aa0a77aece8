// fast-check arbitraries for the hostile HTTP(S) server (hostile-http.ts): an answer of every
// status class (1xx before or instead of it, 101 too, redirects to elsewhere), well-formed or
// broken status lines, odd, duplicate, huge and invalid headers, bodies empty, textual, binary,
// with NUL, invalid UTF-8, past each client's cap or endless, framed honestly or with a
// Content-Length that lies either way, chunked encoding broken, answers written before the
// request body is read, dripped, cut at any byte, silence, resets, and the TLS handshake: a good
// certificate, one for another name, one nobody trusts, garbage, a close or silence.
import fc from 'fast-check';
import type { Answer, TlsMode } from './hostile-http.js';

export type Use = 'webhook' | 'policy' | 'report';

const REASONS: Record<number, string> = { 100: 'Continue', 101: 'Switching Protocols', 102: 'Processing', 103: 'Early Hints', 200: 'OK', 201: 'Created', 202: 'Accepted', 204: 'No Content', 206: 'Partial Content', 299: 'Whatever', 300: 'Multiple Choices', 301: 'Moved Permanently', 302: 'Found', 303: 'See Other', 304: 'Not Modified', 307: 'Temporary Redirect', 308: 'Permanent Redirect', 400: 'Bad Request', 401: 'Unauthorized', 404: 'Not Found', 410: 'Gone', 413: 'Payload Too Large', 429: 'Too Many Requests', 500: 'Internal Server Error', 502: 'Bad Gateway', 503: 'Service Unavailable', 599: 'Network Timeout' };

/** 1xx, 2xx, ... weights per use: what each client must get right most often. */
const STATUSES: Record<string, readonly number[]> = {
  '1': [100, 101, 102, 103],
  '2': [200, 200, 200, 201, 202, 204, 206, 299],
  '3': [300, 301, 302, 303, 304, 307, 308],
  '4': [400, 401, 404, 410, 413, 429],
  '5': [500, 502, 503, 599],
};
const statusCode: fc.Arbitrary<number> = fc
  .oneof({ weight: 12, arbitrary: fc.constant('2') }, { weight: 1, arbitrary: fc.constant('1') }, { weight: 3, arbitrary: fc.constant('3') }, { weight: 2, arbitrary: fc.constant('4') }, { weight: 2, arbitrary: fc.constant('5') })
  .chain((c) => fc.constantFrom(...STATUSES[c]!));

/** A status line: well-formed (the status is readable), or one no client should take as an answer. */
type StatusLine = { line: Buffer; status: number | null; clean: boolean };
function statusLine(code: number): fc.Arbitrary<StatusLine> {
  const ok = (line: string, clean = true): StatusLine => ({ line: Buffer.from(line, 'latin1'), status: code, clean });
  const bad = (line: string): StatusLine => ({ line: Buffer.from(line, 'latin1'), status: null, clean: false });
  return fc.oneof(
    { weight: 30, arbitrary: fc.constant(ok(`HTTP/1.1 ${code} ${REASONS[code] ?? 'X'}`)) },
    { weight: 3, arbitrary: fc.constant(ok(`HTTP/1.0 ${code} ${REASONS[code] ?? 'X'}`)) },
    { weight: 2, arbitrary: fc.constant(ok(`HTTP/1.1 ${code} `)) },
    { weight: 2, arbitrary: fc.constantFrom(ok(`HTTP/1.1 ${code} \u00e9t\u00e9 \u00ff`, false), ok(`HTTP/1.1 ${code} ${'R'.repeat(3000)}`, false)) },
    {
      weight: 3,
      arbitrary: fc.constantFrom(
        bad(`HTTP/1.1 ${String(code).slice(0, 2)}O OK`),
        bad(`HTTP/9.9 ${code} OK`),
        bad(`ICY ${code} OK`),
        bad(`HTTP/1.1 ${code}OK`),
        bad(`HTTP/1.1 ${code}0 OK`),
        bad(`HTTP/1.1 ${code % 100} OK`),
        bad(''),
        bad(`http/1.1 ${code} ok`),
        bad(`HTTP/1.1 ${code}\u0000 OK`),
        bad(`\u0000\u0001\u00ff garbage`),
      ),
    },
  );
}

const NORMAL_HEADERS = ['Server: hostile/1.0', 'Date: Mon, 01 Jun 2026 08:00:00 GMT', 'X-Request-Id: 4f2a1b', 'Cache-Control: no-store', 'Vary: Accept-Encoding', 'Set-Cookie: a=b; HttpOnly'];
/** Header lines a careful client must survive; `clean: false` where a parser may refuse them. */
const oddHeaders: fc.Arbitrary<{ lines: Buffer[]; clean: boolean }> = fc.oneof(
  { weight: 20, arbitrary: fc.subarray(NORMAL_HEADERS, { maxLength: 3 }).map((ls) => ({ lines: ls.map((l) => Buffer.from(l)), clean: true })) },
  { weight: 1, arbitrary: fc.constant({ lines: Array.from({ length: 300 }, (_, i): Buffer => Buffer.from(`X-Filler-${i}: ${'v'.repeat(20)}`)), clean: false as boolean }) },
  { weight: 1, arbitrary: fc.constant({ lines: [Buffer.from(`X-Huge: ${'h'.repeat(20_000)}`)] as Buffer[], clean: false as boolean }) },
  {
    weight: 3,
    arbitrary: fc
      .subarray(
        [
          'X-Bin: \u00ff\u00fe\u0080',
          'X-Ctl: a\u0001b',
          'X-Nul: a\u0000b',
          'Bad Header: space in the name',
          'NoColonAtAll',
          ': empty name',
          ' folded continuation',
          'X-Dup: 1',
          'X-Dup: 2',
          'Content-Encoding: gzip',
          'Connection: upgrade',
          'Upgrade: websocket',
          'Trailer: X-Late',
          'Keep-Alive: timeout=0',
          'Connection: keep-alive, close',
        ],
        { minLength: 1, maxLength: 4 },
      )
      .map((ls) => ({ lines: ls.map((l) => Buffer.from(l, 'latin1')), clean: false as boolean })),
  },
);

const CONTENT_TYPES = ['text/plain', 'text/plain; charset=utf-8', 'TEXT/PLAIN', 'text/plain;charset=us-ascii', 'text/plain ; charset=utf-8', 'text/html', 'application/json', 'text/plainx', 'text/plain-ish', 'application/octet-stream', ''];
const contentType: fc.Arbitrary<string[] | null> = fc.oneof(
  { weight: 12, arbitrary: fc.constantFrom(...CONTENT_TYPES).map((c) => [c]) },
  { weight: 2, arbitrary: fc.constant(null) },
  { weight: 1, arbitrary: fc.constantFrom<string[]>(['text/html', 'text/plain'], ['text/plain', 'text/html']) },
);

/** Policy texts: valid ones (either line ending, extension fields, NUL in one) and broken ones. */
export function policyText(mx: fc.Arbitrary<string[]>): fc.Arbitrary<string> {
  const valid = fc
    .record({ mode: fc.constantFrom('enforce', 'enforce', 'testing', 'none'), mx, maxAge: fc.constantFrom(86400, 604800, 3600, 31557600), eol: fc.constantFrom('\r\n', '\r\n', '\n'), ext: fc.constantFrom<string[]>([], ['x_ext: 1'], ['x_nul: a\u0000b'], ['x_utf: caf\u00e9']) })
    .map(({ mode, mx: m, maxAge, eol, ext }) => ['version: STSv1', `mode: ${mode}`, ...m.map((x) => `mx: ${x}`), `max_age: ${maxAge}`, ...ext, ''].join(eol));
  const broken = fc.constantFrom(
    'version: STSv2\r\nmode: enforce\r\nmx: mx1.tls.test\r\nmax_age: 86400\r\n',
    'mode: enforce\r\nmx: mx1.tls.test\r\nmax_age: 86400\r\n',
    'version: STSv1\r\nmode: bogus\r\nmx: mx1.tls.test\r\nmax_age: 86400\r\n',
    'version: STSv1\r\nmode: enforce\r\nmax_age: 86400\r\n',
    'version: STSv1\r\nmode: enforce\r\nmx: mx1.tls.test\r\nmax_age: 99999999999\r\n',
    'version: STSv1\r\nmode: enforce\r\nmx: mx1.tls.test\r\nmax_age: -1\r\n',
    'version: STSv1\r\nmode: enforce\r\nmx: mx1\u0000.tls.test\r\nmax_age: 86400\r\n',
    '\ufeffversion: STSv1\r\nmode: enforce\r\nmx: mx1.tls.test\r\nmax_age: 86400\r\n',
    '<html><body>It works!</body></html>',
    '',
  );
  return fc.oneof({ weight: 4, arbitrary: valid }, { weight: 1, arbitrary: broken });
}

type Content = { bytes: Buffer; policy?: string; label: string };
function content(use: Use, policy: fc.Arbitrary<string> | null): fc.Arbitrary<Content> {
  const c = (label: string, bytes: Buffer): Content => ({ bytes, label });
  const common: fc.Arbitrary<Content>[] = [
    fc.constant(c('empty', Buffer.alloc(0))),
    fc.constantFrom(c('text', Buffer.from('ok')), c('json', Buffer.from('{"received":true}'))),
    fc.uint8Array({ maxLength: 300 }).map((a) => c('binary', Buffer.from(a))),
    fc.constantFrom(c('nul', Buffer.from('a\u0000b\u0000\u0000c')), c('invalid-utf8', Buffer.from([0x6f, 0x6b, 0xc3, 0x28, 0xff, 0xed, 0xa0, 0x80, 0xf0, 0x9f]))),
    // Past the caps: 4 KB (webhook and report answers), 64 KiB (policies), and far past.
    fc.constantFrom(4097, 5000, 70_000, 1_100_000).chain((n) => fc.constantFrom(c(`big-${n}`, Buffer.alloc(n, 0x78)), c(`big-emoji-${n}`, Buffer.from('\u{1F600}'.repeat(Math.ceil(n / 4)))))),
  ];
  if (use === 'policy' && policy) {
    const served = policy.map((p) => ({ bytes: Buffer.from(p, 'utf8'), policy: p, label: 'policy' }));
    // A valid policy padded past the 64 KiB cap with an extension field.
    const padded = policy.map((p) => {
      const text = `${p}x_pad: ${'p'.repeat(66_000)}\r\n`;
      return { bytes: Buffer.from(text), policy: text, label: 'policy-padded' };
    });
    return fc.oneof({ weight: 12, arbitrary: served }, { weight: 1, arbitrary: padded }, ...common.map((arbitrary) => ({ weight: 1, arbitrary })));
  }
  return fc.oneof(...common.map((arbitrary, i) => ({ weight: i === 1 ? 6 : 1, arbitrary })));
}

type Framing = 'cl' | 'chunked' | 'close-delimited' | 'cl-short' | 'cl-long' | 'cl-conflict' | 'cl-and-te' | 'chunked-bad-size' | 'chunked-no-end' | 'chunked-huge-size' | 'endless-chunked' | 'endless-cl' | 'endless-close';
const framing: fc.Arbitrary<Framing> = fc.oneof(
  { weight: 20, arbitrary: fc.constant<Framing>('cl') },
  { weight: 6, arbitrary: fc.constant<Framing>('chunked') },
  { weight: 2, arbitrary: fc.constant<Framing>('close-delimited') },
  { weight: 1, arbitrary: fc.constantFrom<Framing>('cl-short', 'cl-long', 'cl-conflict', 'cl-and-te', 'chunked-bad-size', 'chunked-no-end', 'chunked-huge-size') },
  { weight: 1, arbitrary: fc.constantFrom<Framing>('endless-chunked', 'endless-cl', 'endless-close') },
);

function frame(f: Framing, body: Buffer): { headers: string[]; body: Buffer; stream: Answer['stream']; honest: boolean; desync: boolean; mustClose: boolean } {
  const chunked = (b: Buffer) => (b.length ? Buffer.concat([Buffer.from(`${b.length.toString(16)}\r\n`), b, Buffer.from('\r\n0\r\n\r\n')]) : Buffer.from('0\r\n\r\n'));
  switch (f) {
    case 'cl':
      return { headers: [`Content-Length: ${body.length}`], body, stream: null, honest: true, desync: false, mustClose: false };
    case 'chunked':
      return { headers: ['Transfer-Encoding: chunked'], body: chunked(body), stream: null, honest: true, desync: false, mustClose: false };
    case 'close-delimited':
      return { headers: [], body, stream: null, honest: true, desync: false, mustClose: true };
    case 'cl-short':
      return { headers: [`Content-Length: ${Math.floor(body.length / 2)}`], body, stream: null, honest: false, desync: body.length > 1, mustClose: false };
    case 'cl-long':
      return { headers: [`Content-Length: ${body.length + 100}`], body, stream: null, honest: false, desync: false, mustClose: false };
    case 'cl-conflict':
      return { headers: [`Content-Length: ${body.length}`, `Content-Length: ${body.length + 7}`], body, stream: null, honest: false, desync: true, mustClose: false };
    case 'cl-and-te':
      return { headers: [`Content-Length: ${body.length}`, 'Transfer-Encoding: chunked'], body: chunked(body), stream: null, honest: false, desync: true, mustClose: false };
    case 'chunked-bad-size':
      return { headers: ['Transfer-Encoding: chunked'], body: Buffer.concat([Buffer.from('zz\r\n'), body, Buffer.from('\r\n0\r\n\r\n')]), stream: null, honest: false, desync: true, mustClose: false };
    case 'chunked-no-end':
      return { headers: ['Transfer-Encoding: chunked'], body: body.length ? Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from('\r\n')]) : Buffer.alloc(0), stream: null, honest: false, desync: false, mustClose: false };
    case 'chunked-huge-size':
      return { headers: ['Transfer-Encoding: chunked'], body: Buffer.concat([Buffer.from('ffffffffffffffffff\r\n'), body]), stream: null, honest: false, desync: true, mustClose: false };
    case 'endless-chunked':
      return { headers: ['Transfer-Encoding: chunked'], body: Buffer.alloc(0), stream: { chunked: true }, honest: false, desync: false, mustClose: false };
    case 'endless-cl':
      return { headers: ['Content-Length: 99999999999'], body: Buffer.alloc(0), stream: { chunked: false }, honest: false, desync: false, mustClose: false };
    case 'endless-close':
      return { headers: [], body: Buffer.alloc(0), stream: { chunked: false }, honest: false, desync: false, mustClose: false };
  }
}

const tlsMode: fc.Arbitrary<TlsMode> = fc.oneof(
  { weight: 24, arbitrary: fc.constant<TlsMode>('good') },
  { weight: 1, arbitrary: fc.constantFrom<TlsMode>('wrong-name', 'untrusted', 'garbage', 'close') },
  { weight: 1, arbitrary: fc.constant<TlsMode>('silent') },
);

/** 1xx heads sent before the answer: the client must wait for the final one. */
const interim: fc.Arbitrary<string[]> = fc.oneof(
  { weight: 12, arbitrary: fc.constant<string[]>([]) },
  { weight: 1, arbitrary: fc.constantFrom<string[]>(['HTTP/1.1 100 Continue\r\n\r\n'], ['HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n'], ['HTTP/1.1 102 Processing\r\n\r\n', 'HTTP/1.1 100 Continue\r\n\r\n']) },
);

export interface AnswerOptions {
  use: Use;
  /** Where a redirect points: places the client must never go (they count connections). */
  redirects: string[];
  /** Valid and broken policy texts (policy use only). */
  policy?: fc.Arbitrary<string>;
}

export function answer(opts: AnswerOptions): fc.Arbitrary<Answer> {
  return fc
    .record({
      tls: tlsMode,
      when: fc.oneof({ weight: 5, arbitrary: fc.constant<Answer['when']>('after-body') }, { weight: 1, arbitrary: fc.constant<Answer['when']>('after-head') }),
      action: fc.oneof({ weight: 40, arbitrary: fc.constant<Answer['action']>('answer') }, { weight: 1, arbitrary: fc.constant<Answer['action']>('hang') }, { weight: 2, arbitrary: fc.constantFrom<Answer['action']>('reset', 'close') }),
      code: statusCode,
      interim,
      headers: oddHeaders,
      contentType,
      location: fc.constantFrom(...opts.redirects, '/relative/elsewhere', `http://x.example/${'l'.repeat(12_000)}`, 'http://caf\u00e9.example/\u00ff'),
      content: content(opts.use, opts.policy ?? null),
      framing,
      eol: fc.oneof({ weight: 10, arbitrary: fc.constant('\r\n') }, { weight: 1, arbitrary: fc.constant('\n') }),
      cut: fc.oneof({ weight: 12, arbitrary: fc.constant<number | null>(null) }, { weight: 1, arbitrary: fc.nat(400) }),
      pieces: fc.oneof({ weight: 6, arbitrary: fc.constant(1) }, { weight: 2, arbitrary: fc.integer({ min: 2, max: 6 }) }),
      dripMs: fc.oneof({ weight: 6, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.integer({ min: 1, max: 30 }) }),
      after: fc.oneof({ weight: 12, arbitrary: fc.constant<Answer['after']>('stay') }, { weight: 1, arbitrary: fc.constantFrom<Answer['after']>('close', 'reset') }),
    })
    .chain((r) => statusLine(r.code).map((sl) => ({ ...r, sl })))
    .map((r): Answer => {
      const noBody = r.code < 200 || r.code === 204 || r.code === 304;
      const f = frame(r.framing, r.content.bytes);
      const lines: Buffer[] = [r.sl.line];
      if (r.code >= 300 && r.code < 400) lines.push(Buffer.from(`Location: ${r.location}`, 'latin1'));
      if (r.contentType) for (const ct of r.contentType) lines.push(Buffer.from(`Content-Type: ${ct}`));
      lines.push(...r.headers.lines);
      if (r.code !== 101) lines.push(...f.headers.map((h) => Buffer.from(h)));
      else lines.push(Buffer.from('Upgrade: websocket'), Buffer.from('Connection: Upgrade'));
      if (f.mustClose && r.after === 'stay') lines.push(Buffer.from('Connection: close'));
      const eol = Buffer.from(r.eol);
      const head = Buffer.concat([...lines.flatMap((l) => [l, eol]), eol]);
      const bytes = Buffer.concat([...r.interim.map((h) => Buffer.from(h)), head, ...(r.code === 101 ? [Buffer.from('\u0081\u0005hello')] : [f.body])]);
      const after = f.mustClose ? 'close' : r.after;
      const clean =
        r.action === 'answer' &&
        r.sl.clean &&
        r.headers.clean &&
        f.honest &&
        r.cut === null &&
        // A reset right behind the answer may drop it unread from the client's buffer (RFC 9293 3.10.7.4).
        after !== 'reset' &&
        r.eol === '\r\n' &&
        r.code >= 200 &&
        !(r.code >= 300 && r.code < 400 && r.location.length > 8000) &&
        !(noBody && r.content.bytes.length > 0) &&
        (opts.use === 'webhook' || r.tls === 'good');
      // A body after an answer that has none (204, 304, a 1xx), or a length that lies short: bytes nobody asked for.
      const desync = f.desync || (noBody && f.body.length > 0) || r.code === 101 || (r.code < 200 && r.code !== 101);
      return {
        tls: r.tls,
        when: r.when,
        action: r.action,
        bytes,
        stream: r.code === 101 || noBody ? null : f.stream,
        status: r.sl.status,
        clean,
        desync,
        cutAt: r.cut,
        pieces: r.pieces,
        dripMs: r.dripMs,
        after,
        label: `${r.action === 'answer' ? `${r.code}${r.sl.status === null ? '-garbled' : ''}` : r.action} ${r.framing} ${r.content.label}${r.tls === 'good' ? '' : ` tls-${r.tls}`}${r.cut === null ? '' : ' cut'}`,
        ...(r.content.policy !== undefined ? { policy: r.content.policy } : {}),
        bodyBytes: f.stream ? Infinity : r.content.bytes.length,
        contentType: r.contentType ? r.contentType[0]! : null,
      };
    });
}

/** A well-behaved answer, for the recovery at the end. */
export function wellBehaved(status: number, body: string, contentType = 'text/plain'): Answer {
  const b = Buffer.from(body);
  return {
    tls: 'good',
    when: 'after-body',
    action: 'answer',
    bytes: Buffer.concat([Buffer.from(`HTTP/1.1 ${status} ${REASONS[status] ?? 'OK'}\r\nContent-Type: ${contentType}\r\nContent-Length: ${b.length}\r\n\r\n`), b]),
    stream: null,
    status,
    clean: true,
    desync: false,
    cutAt: null,
    pieces: 1,
    dripMs: 0,
    after: 'stay',
    label: `well-behaved ${status}`,
    policy: body,
    bodyBytes: b.length,
    contentType,
  };
}

/**
 * Policy answers: most of the hostile kind, but enough plain good ones (a policy, honest framing,
 * a media type of either verdict) that adoption itself is tried, not only refusal.
 */
export function policyAnswer(opts: AnswerOptions & { policy: fc.Arbitrary<string> }): fc.Arbitrary<Answer> {
  const plain = fc
    .record({ policy: opts.policy, contentType: fc.constantFrom('text/plain', 'text/plain; charset=utf-8', 'TEXT/PLAIN', 'text/plain;charset=us-ascii', 'text/html', 'application/octet-stream') })
    .map(({ policy, contentType: ct }) => wellBehaved(200, policy, ct));
  return fc.oneof({ weight: 2, arbitrary: plain }, { weight: 3, arbitrary: answer(opts) });
}
