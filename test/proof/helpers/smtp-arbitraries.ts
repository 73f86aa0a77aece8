// fast-check arbitraries for hostile SMTP sessions: commands in any order with garbage
// arguments, pipelined nonsense, NUL and 8-bit bytes, over-long lines, AUTH with garbage,
// STARTTLS followed by garbage, MAIL/RCPT floods, and DATA with broken or huge MIME, ended
// properly or abandoned midway.
import fc from 'fast-check';
import { EDGE_CHARS, hostileString } from './hostile.js';

export type Step =
  /** Command lines, sent and answered one at a time. */
  | { kind: 'lines'; text: Buffer }
  /** Command lines in one write (pipelining whatever the rules say). */
  | { kind: 'pipeline'; text: Buffer }
  /** Bytes with no line end: the server must keep waiting, then cope with what follows. */
  | { kind: 'bytes'; bytes: Buffer }
  /** MAIL FROM, then RCPT TO for each address (a flood when there are many). */
  | { kind: 'envelope'; from: string; params: string; rcpt: string[] }
  /** DATA, then the body; 'dot' ends it, 'abort' drops the connection mid-DATA. */
  | { kind: 'data'; body: Buffer; end: 'dot' | 'abort' }
  | { kind: 'starttls' }
  /** STARTTLS, then bytes that are no TLS handshake. */
  | { kind: 'starttls-garbage'; bytes: Buffer }
  /** AUTH with the real key (after STARTTLS when needed), to get deeper. */
  | { kind: 'auth-valid'; method: 'PLAIN' | 'LOGIN' }
  /** AUTH exchanges with garbage (after STARTTLS when needed, so they are not just refused with 538). */
  | { kind: 'auth-garbage'; lines: Buffer }
  /** Drops the connection right here, after a partial command. */
  | { kind: 'abort'; partial: Buffer };

const VERBS = ['EHLO', 'HELO', 'LHLO', 'MAIL FROM:', 'RCPT TO:', 'DATA', 'RSET', 'NOOP', 'VRFY', 'EXPN', 'HELP', 'AUTH PLAIN', 'AUTH LOGIN', 'AUTH CRAM-MD5', 'AUTH XOAUTH2', 'AUTH', 'STARTTLS', 'BDAT 10 LAST', 'XCLIENT ADDR=10.0.0.1', 'XFORWARD NAME=x', 'ETRN x', 'TURN', 'ehlo', 'mail from:', 'Rcpt To:', 'QUIT', ''] as const;

const MAIL_PARAMS = ['', 'SIZE=100', 'SIZE=-1', 'SIZE=99999999999999999999', 'SIZE=abc', 'BODY=8BITMIME', 'BODY=BINARYMIME', 'BODY=', 'SMTPUTF8', 'RET=FULL ENVID=x', 'AUTH=<>', 'NOTIFY=NEVER', 'X=\u00ff', 'SIZE=1 SIZE=2', '=', 'a=b=c'] as const;

/** Latin1 text as the bytes it names; anything above U+00FF becomes its UTF-8 bytes (8-bit in commands). */
export function bytesOf(text: string): Buffer {
  return /[^\u0000-\u00ff]/.test(text) ? Buffer.from(text, 'utf8') : Buffer.from(text, 'latin1');
}

const address = fc.oneof(
  hostileString,
  fc.constantFrom('', '<>', '<', '>', '<<a@b.c>>', '<a@b.c', 'a@b.c>', '<@relay.test:a@b.c>', '<a@[127.0.0.1]>', '<a@[IPv6:::1]>', '<"a b"@c.d>', '<a\u0000@b.c>', '<\u00e9@b.c>', '<a@b.c> SIZE=1', '<' + 'a'.repeat(300) + '@b.c>', '<a@' + 'b.'.repeat(200) + 'c>'),
);

function commandLine(): fc.Arbitrary<string> {
  return fc.tuple(fc.constantFrom(...VERBS), fc.oneof(fc.constant(''), hostileString, address), fc.oneof({ arbitrary: fc.constant(''), weight: 4 }, { arbitrary: fc.constantFrom(...MAIL_PARAMS), weight: 1 })).map(([verb, arg, param]) => `${verb}${verb.endsWith(':') ? '' : ' '}${arg}${param ? ' ' + param : ''}`);
}

/** Lines of any kind: commands with garbage, random bytes, NUL/8-bit, a line over the length limit. */
const lines: fc.Arbitrary<Step> = fc
  .array(
    fc.oneof(
      { arbitrary: commandLine(), weight: 6 },
      { arbitrary: fc.string({ unit: 'binary', maxLength: 60 }), weight: 2 },
      { arbitrary: fc.constantFrom(...EDGE_CHARS).map((c) => `NOOP ${c}`), weight: 1 },
      { arbitrary: fc.constantFrom(1_000, 4_000, 16_384, 16_385, 40_000).map((n) => 'EHLO ' + 'x'.repeat(n)), weight: 1 },
      { arbitrary: fc.constant('GET / HTTP/1.1'), weight: 1 },
    ),
    { minLength: 1, maxLength: 6 },
  )
  .chain((ls) => fc.constantFrom<Step>({ kind: 'lines', text: bytesOf(ls.join('\r\n')) }, { kind: 'pipeline', text: bytesOf(ls.join('\r\n')) }));

const rawBytes: fc.Arbitrary<Step> = fc.uint8Array({ minLength: 1, maxLength: 600 }).map((b) => ({ kind: 'bytes', bytes: Buffer.from(b.filter((x) => x !== 0x0a)) }));

const b64 = (b: Uint8Array | string) => Buffer.from(b as Uint8Array).toString('base64');

/** AUTH with garbage: random base64, broken padding, not base64 at all, wrong keys, cancels. */
const authGarbage: fc.Arbitrary<Step> = fc
  .oneof(
    fc.uint8Array({ maxLength: 200 }).map((b) => [`AUTH PLAIN ${b64(b)}`]),
    fc.constantFrom(['AUTH PLAIN ='], ['AUTH PLAIN ===='], ['AUTH PLAIN *'], ['AUTH PLAIN', '*'], ['AUTH PLAIN', ''], ['AUTH LOGIN', '*'], ['AUTH PLAIN AAAA'], ['AUTH PLAIN ' + b64('\0\0')], ['AUTH PLAIN ' + b64('\0apikey\0ph_nope_nope')], ['AUTH PLAIN ' + b64('x'.repeat(20_000))], ['AUTH LOGIN ' + b64('apikey'), b64('not-a-key')], ['AUTH CRAM-MD5', 'Zm9v'], ['AUTH XOAUTH2 ' + b64('user=x\x01auth=Bearer y\x01\x01')]),
    fc.tuple(hostileString, hostileString).map(([a, b]) => ['AUTH LOGIN', a, b]),
    fc.tuple(fc.uint8Array({ maxLength: 60 }), fc.uint8Array({ maxLength: 60 })).map(([a, b]) => ['AUTH LOGIN', b64(a), b64(b)]),
  )
  .map((ls): Step => ({ kind: 'auth-garbage', lines: bytesOf(ls.join('\r\n')) }));

export function envelopeStep(recipients: string[]): fc.Arbitrary<Step> {
  const rcpt = fc.oneof(
    { arbitrary: fc.constantFrom(...recipients).map((r) => `<${r}>`), weight: 4 },
    { arbitrary: address, weight: 2 },
  );
  return fc
    .record({
      from: fc.oneof({ arbitrary: fc.constantFrom('<>', '<sender@remote.test>', '<hello@sender.dev>'), weight: 3 }, { arbitrary: address, weight: 1 }),
      params: fc.constantFrom(...MAIL_PARAMS),
      rcpt: fc.oneof({ arbitrary: fc.array(rcpt, { minLength: 1, maxLength: 4 }), weight: 5 }, { arbitrary: fc.tuple(rcpt, fc.integer({ min: 90, max: 130 })).map(([r, n]) => Array.from({ length: n }, (_, i) => (i % 2 ? r : `<flood${i}@example.net>`))), weight: 1 }),
    })
    .map((e): Step => ({ kind: 'envelope', ...e }));
}

function multipart(depth: number): string {
  let open = '';
  let close = '';
  for (let i = 0; i < depth; i++) {
    open += `Content-Type: multipart/mixed; boundary="b${i}"\r\n\r\n--b${i}\r\n`;
    close = `\r\n--b${i}--\r\n` + close;
  }
  return `From: a@remote.test\r\nSubject: deep\r\nMIME-Version: 1.0\r\n${open}Content-Type: text/plain\r\n\r\nleaf${close}`;
}

function nestedRfc822(depth: number): string {
  let out = 'Subject: leaf\r\n\r\nleaf\r\n';
  for (let i = 0; i < depth; i++) out = `Subject: level ${i}\r\nContent-Type: message/rfc822\r\n\r\n${out}`;
  return `From: a@remote.test\r\n${out}`;
}

/** Replaces each lone "." line (which would end DATA early) so the body travels whole. */
function dotSafe(body: Buffer): Buffer {
  return Buffer.from(body.toString('latin1').replace(/(^|\r\n)\.(?=\r\n|$)/g, '$1..'), 'latin1');
}

/** Edits a message's bytes: truncate, insert garbage, drop or replace a line, duplicate a chunk. */
const byteEdit = fc.tuple(fc.constantFrom('truncate', 'insert', 'drop-line', 'replace-line', 'duplicate'), fc.nat(), fc.oneof(hostileString, fc.string({ unit: 'binary', maxLength: 40 })));

function applyEdits(base: Buffer, edits: [string, number, string][]): Buffer {
  let text = base.toString('latin1');
  for (const [kind, at, junk] of edits) {
    const i = text.length ? at % text.length : 0;
    const lines = text.split('\r\n');
    const li = lines.length ? at % lines.length : 0;
    if (kind === 'truncate') text = text.slice(0, i);
    else if (kind === 'insert') text = text.slice(0, i) + bytesOf(junk).toString('latin1') + text.slice(i);
    else if (kind === 'drop-line') text = lines.filter((_, k) => k !== li).join('\r\n');
    else if (kind === 'replace-line') text = lines.map((l, k) => (k === li ? bytesOf(junk).toString('latin1') : l)).join('\r\n');
    else text = text.slice(0, i) + text.slice(i, i + 200) + text.slice(i);
  }
  return Buffer.from(text, 'latin1');
}

/** Message content: well-formed templates mutated, broken MIME, deep nesting, huge parts, plain garbage. */
export function messageBody(templates: Buffer[], maxMessageBytes: number): fc.Arbitrary<Buffer> {
  return fc.oneof(
    { arbitrary: fc.tuple(fc.constantFrom(...templates), fc.array(byteEdit, { maxLength: 4 })).map(([t, edits]) => applyEdits(t, edits)), weight: 6 },
    { arbitrary: fc.uint8Array({ maxLength: 3000, size: 'max' }).map((b) => Buffer.from(b)), weight: 2 },
    { arbitrary: fc.constantFrom(5, 50, 500, 3000).map((d) => Buffer.from(multipart(d))), weight: 1 },
    { arbitrary: fc.constantFrom(5, 50, 500, 3000).map((d) => Buffer.from(nestedRfc822(d))), weight: 1 },
    {
      arbitrary: fc.constantFrom(
        Buffer.from('Subject: many\r\n' + 'X-H: v\r\n'.repeat(20_000) + '\r\nbody\r\n'),
        Buffer.from('Subject: ' + 'x'.repeat(200_000) + '\r\n\r\nbody\r\n'),
        Buffer.from('From: a@remote.test\r\nContent-Type: text/plain; charset=x-unknown-\u00ff\r\nContent-Transfer-Encoding: base64\r\n\r\n' + '!!!!'.repeat(1000) + '\r\n', 'latin1'),
        Buffer.from('From: =?utf-8?B?' + 'A'.repeat(10_000) + '?=\r\nSubject: =?x?Q?=00=0D=0A?=\r\n\r\n\u0000\u0000\r\n', 'latin1'),
        Buffer.from('Content-Type: multipart/mixed; boundary=""\r\n\r\n--\r\n--\r\n'),
        Buffer.from('\r\n\r\n\r\n'),
        Buffer.alloc(maxMessageBytes + 10, 'a'), // over the size limit
        Buffer.from(('a'.repeat(998) + '\r\n').repeat(Math.ceil(maxMessageBytes / 1000) - 5)), // just under it
      ),
      weight: 1,
    },
  ).map(dotSafe);
}

export function smtpSession(opts: { recipients: string[]; templates: Buffer[]; maxMessageBytes: number; submission: boolean }): fc.Arbitrary<Step[]> {
  const data = fc.tuple(messageBody(opts.templates, opts.maxMessageBytes), fc.constantFrom<'dot' | 'abort'>('dot', 'dot', 'dot', 'abort')).map(([body, end]): Step => ({ kind: 'data', body, end }));
  const greeting = fc.constantFrom<Step>({ kind: 'lines', text: Buffer.from('EHLO fuzz.remote.test') }, { kind: 'lines', text: Buffer.from('HELO fuzz') });
  const step: fc.Arbitrary<Step> = fc.oneof(
    { arbitrary: lines, weight: 4 },
    { arbitrary: rawBytes, weight: 1 },
    { arbitrary: envelopeStep(opts.recipients), weight: 4 },
    { arbitrary: data, weight: 4 },
    { arbitrary: fc.constant<Step>({ kind: 'starttls' }), weight: 1 },
    { arbitrary: fc.uint8Array({ minLength: 1, maxLength: 300 }).map((b): Step => ({ kind: 'starttls-garbage', bytes: Buffer.from(b) })), weight: 1 },
    { arbitrary: fc.constantFrom<Step>({ kind: 'auth-valid', method: 'PLAIN' }, { kind: 'auth-valid', method: 'LOGIN' }), weight: opts.submission ? 3 : 1 },
    { arbitrary: authGarbage, weight: opts.submission ? 3 : 1 },
    { arbitrary: fc.oneof(commandLine(), fc.constant('DATA')).map((c): Step => ({ kind: 'abort', partial: bytesOf(c) })), weight: 1 },
  );
  // A whole transaction to accepted recipients, so broken and hostile content reaches the
  // message parsers (report parser, received-mail builder, submission) and not only DATA.
  const transaction = fc
    .tuple(
      fc.constantFrom('<>', '<sender@remote.test>', '<hello@sender.dev>'),
      fc.subarray(opts.recipients.slice(0, 3), { minLength: 1 }),
      data,
    )
    .map(([from, rcpt, d]): Step[] => [{ kind: 'envelope', from, params: '', rcpt: rcpt.map((r) => `<${r}>`) }, d]);
  const auth: Step[] = opts.submission ? [{ kind: 'auth-valid', method: 'PLAIN' }] : [];
  // Most sessions open properly, so the later steps reach MAIL, RCPT and DATA.
  return fc
    .tuple(fc.option(greeting, { freq: 5, nil: null }), fc.array(fc.oneof({ arbitrary: step.map((st) => [st]), weight: 4 }, { arbitrary: transaction.map((tx) => [...auth, ...tx]), weight: 1 }), { minLength: 1, maxLength: 6 }))
    .map(([g, groups]) => [...(g ? [g] : []), ...groups.flat()]);
}
