// fast-check arbitraries for the hostile MX (hostile-mx.ts): a reply for each stage of a
// session, valid codes of every class, multi-line replies with consistent and inconsistent codes
// and '-' misused, odd capability lists, non-numeric and out-of-range codes, missing text, bare
// LF, over-long lines, NUL and 8-bit bytes, unsolicited extra replies, replies split across
// writes or dripped, and connections closed or cut at any point.
import fc from 'fast-check';
import type { ReplySpec, SessionScript } from './hostile-mx.js';

type Outcome = 'ok' | 'temp' | 'perm' | 'odd' | 'garbage';

const OK_CODES: Record<string, readonly string[]> = {
  greeting: ['220'],
  ehlo: ['250'],
  starttls: ['220'],
  mail: ['250', '251'],
  rcpt: ['250', '251', '252'],
  data: ['354'],
  eod: ['250'],
  other: ['250', '221'],
};
const TEMP_CODES = ['421', '450', '451', '452', '454', '455', '471'];
const PERM_CODES = ['500', '501', '502', '503', '530', '550', '551', '552', '553', '554', '555'];
/** Valid codes of classes the stage does not expect: 1yz, 3yz (and 2yz to DATA). */
const ODD_CODES = ['100', '199', '211', '214', '334', '354', '250', '221'];
const GARBAGE_CODES = ['abc', '2', '25', '2500', '999', '000', '600', '-250', ' 250', '25O', '\u00ff50', '\u000050', '2.5'];

const ENHANCED_BY_CLASS: Record<string, readonly string[]> = {
  '2': ['2.0.0', '2.1.0', '2.1.5', '2.6.0'],
  '4': ['4.2.2', '4.3.0', '4.4.1', '4.4.5', '4.7.0', '4.7.1', '4.7.28'],
  '5': ['5.1.1', '5.1.0', '5.2.1', '5.2.2', '5.3.4', '5.5.0', '5.7.1', '5.7.26', '5.0.0', '5.1.8'],
};

const TEXTS = [
  'OK',
  'Ok: queued as 4F2A1B2C3D',
  'Go ahead',
  'End data with <CR><LF>.<CR><LF>',
  'mx.hostile.test ESMTP',
  'Requested mail action okay, completed',
  'User unknown',
  'mailbox unavailable',
  'Mailbox full',
  'Try again later',
  'try again in 5 minutes',
  'Greylisted, please retry in 300 seconds',
  'Service not available, closing transmission channel',
  'Message rejected as spam',
  'Client host blocked using zen.spamhaus.org',
  'Sender address rejected',
  'Message size exceeds fixed limit',
  'Rate limit exceeded',
  'Recipient address rejected: Access denied',
  'does not exist',
];

/** Reply text as bytes: a usual one, random latin1 with NUL and 8-bit, UTF-8 astral characters, nothing, or a very long line. */
const text: fc.Arbitrary<Buffer> = fc.oneof(
  { weight: 160, arbitrary: fc.constantFrom(...TEXTS).map((t) => Buffer.from(t)) },
  { weight: 40, arbitrary: fc.constant(Buffer.alloc(0)) },
  { weight: 40, arbitrary: fc.uint8Array({ maxLength: 40 }).map((a) => Buffer.from(a.map((b) => (b === 0x0a || b === 0x0d ? 0x20 : b)))) },
  { weight: 20, arbitrary: fc.string({ unit: 'grapheme', maxLength: 20 }).map((s) => Buffer.from(s.replace(/[\r\n]/g, ' '))) },
  { weight: 20, arbitrary: fc.constantFrom('\u0000\u0000', 'ok\u0000nul', '\u00e9t\u00e9', '\u{1F600}\u{1F4E7}', '\u202e\u2028', '\ufeffBOM').map((t) => Buffer.from(t)) },
  // Over the 2,000 characters Posthorn keeps, in astral characters (surrogate pairs in JS) and ASCII.
  { weight: 20, arbitrary: fc.tuple(fc.integer({ min: 990, max: 1_500 }), fc.constantFrom('\u{1F600}', 'x', 'a\u{1F4E7}')).map(([n, c]) => Buffer.from(c.repeat(n))) },
  // Over nodemailer's 1 MiB reply limit: rare, it costs a megabyte on the wire.
  { weight: 1, arbitrary: fc.constant(Buffer.alloc(1_100_000, 0x78)) },
);

function codeFor(stage: string, outcome: Outcome): fc.Arbitrary<string> {
  switch (outcome) {
    case 'ok':
      return fc.constantFrom(...OK_CODES[stage]!);
    case 'temp':
      return fc.constantFrom(...TEMP_CODES);
    case 'perm':
      return fc.constantFrom(...PERM_CODES);
    case 'odd':
      return fc.constantFrom(...ODD_CODES.filter((c) => !OK_CODES[stage]!.includes(c)));
    case 'garbage':
      return fc.constantFrom(...GARBAGE_CODES);
  }
}

/** One line's body after the code and separator: an enhanced code (sometimes) and the text. */
function lineBody(code: string): fc.Arbitrary<Buffer> {
  const enhanced = ENHANCED_BY_CLASS[code[0]!];
  return fc.tuple(enhanced ? fc.option(fc.constantFrom(...enhanced), { freq: 2 }) : fc.constant(null), text).map(([e, t]) => (e ? Buffer.concat([Buffer.from(`${e} `), t]) : t));
}

type Framing = 'single' | 'multi' | 'mixed-codes' | 'all-final' | 'last-continues' | 'bare-code' | 'empty-line';

/**
 * A reply's lines. single: "250 text"; multi: "250-a", "250 b"; mixed-codes: the lines disagree;
 * all-final: every line ends with ' ' (so several replies); last-continues: the last line has '-'
 * too (the reply never ends, or merges into the next); bare-code: "250" alone; empty-line: "".
 */
function replyLines(stage: string, outcome: Outcome, extraLines: fc.Arbitrary<Buffer[]> | null): fc.Arbitrary<Buffer[]> {
  const framing = fc.oneof(
    { weight: 120, arbitrary: fc.constant<Framing>('single') },
    { weight: 40, arbitrary: fc.constant<Framing>('multi') },
    { weight: 10, arbitrary: fc.constant<Framing>('mixed-codes') },
    { weight: 4, arbitrary: fc.constant<Framing>('all-final') },
    { weight: 3, arbitrary: fc.constant<Framing>('last-continues') },
    { weight: 20, arbitrary: fc.constant<Framing>('bare-code') },
    { weight: 3, arbitrary: fc.constant<Framing>('empty-line') },
  );
  return fc.tuple(codeFor(stage, outcome), framing, fc.array(fc.constant(0), { minLength: 1, maxLength: 3 }), codeFor(stage, outcome === 'ok' ? 'perm' : 'ok')).chain(([code, f, more, other]) => {
    if (f === 'bare-code') return fc.constant([Buffer.from(code)]);
    if (f === 'empty-line') return fc.constant([Buffer.alloc(0)]);
    const n = f === 'single' ? 1 : more.length + 1;
    const bodies = fc.array(lineBody(code), { minLength: n, maxLength: n });
    return fc.tuple(bodies, extraLines ?? fc.constant<Buffer[]>([])).map(([bs, extra]) => {
      const all = [...bs.slice(0, -1), ...extra, bs[bs.length - 1]!];
      return all.map((b, i) => {
        const last = i === all.length - 1;
        const lineCode = f === 'mixed-codes' && i > 0 ? other : code;
        const sep = f === 'all-final' ? ' ' : f === 'last-continues' ? '-' : last ? ' ' : '-';
        return Buffer.concat([Buffer.from(lineCode, 'latin1'), Buffer.from(sep), b]);
      });
    });
  });
}

const outcome = (okWeight: number): fc.Arbitrary<Outcome> =>
  fc.oneof(
    { weight: okWeight, arbitrary: fc.constant<Outcome>('ok') },
    { weight: 2, arbitrary: fc.constant<Outcome>('temp') },
    { weight: 2, arbitrary: fc.constant<Outcome>('perm') },
    { weight: 1, arbitrary: fc.constant<Outcome>('odd') },
    { weight: 1, arbitrary: fc.constant<Outcome>('garbage') },
  );

/** How the bytes go out: pieces, drip, line ends, an unsolicited reply after it, what follows. */
function framed(lines: fc.Arbitrary<Buffer[]>): fc.Arbitrary<ReplySpec> {
  return fc
    .record({
      lines,
      eol: fc.oneof({ weight: 5, arbitrary: fc.constant('\r\n') }, { weight: 1, arbitrary: fc.constant('\n') }),
      unsolicited: fc.oneof({ weight: 40, arbitrary: fc.constant<string | null>(null) }, { weight: 1, arbitrary: fc.constantFrom('250 2.0.0 OK', '220 again', '421 4.3.2 Bye', '550 5.7.1 No', '354 Go') }),
      pieces: fc.oneof({ weight: 6, arbitrary: fc.constant(1) }, { weight: 2, arbitrary: fc.integer({ min: 2, max: 5 }) }),
      dripMs: fc.oneof({ weight: 3, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.integer({ min: 1, max: 40 }) }),
      after: fc.oneof({ weight: 50, arbitrary: fc.constant<ReplySpec['after']>('stay') }, { weight: 1, arbitrary: fc.constant<ReplySpec['after']>('close') }, { weight: 1, arbitrary: fc.constant<ReplySpec['after']>('cut-mid') }),
    })
    .map(({ lines: ls, eol, unsolicited, pieces, dripMs, after }) => ({
      bytes: Buffer.concat([...ls.flatMap((l) => [l, Buffer.from(eol)]), ...(unsolicited ? [Buffer.from(`${unsolicited}${eol}`)] : [])]),
      pieces,
      dripMs,
      after,
    }));
}

export function stageReply(stage: string, okWeight = 10): fc.Arbitrary<ReplySpec> {
  return outcome(okWeight).chain((o) => framed(replyLines(stage, o, null)));
}

/** EHLO capabilities: odd or huge lists, SIZE smaller than the message or garbage, PIPELINING, 8BITMIME absent, SMTPUTF8, AUTH, STARTTLS. */
const capability = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('PIPELINING', '8BITMIME', 'SMTPUTF8', 'ENHANCEDSTATUSCODES', 'STARTTLS', 'AUTH PLAIN LOGIN', 'AUTH=LOGIN', 'CHUNKING', 'DSN', 'HELP', 'BINARYMIME', 'X-UNKNOWN foo') },
  { weight: 1, arbitrary: fc.constantFrom('SIZE', 'SIZE 0', 'SIZE 100', 'SIZE 1000', 'SIZE 35882577', 'SIZE abc', 'SIZE -5', 'SIZE 99999999999999999999999', 'SIZE 1e3') },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 20 }).map((a) => Buffer.from(a.map((b) => (b === 0x0a || b === 0x0d ? 0x20 : b))).toString('latin1')) },
);
const ehloReply: fc.Arbitrary<ReplySpec> = fc.oneof(
  {
    weight: 8,
    arbitrary: framed(
      fc.tuple(fc.uniqueArray(capability, { maxLength: 7 }), fc.oneof({ weight: 6, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.integer({ min: 50, max: 400 }) })).map(([caps, junk]) => {
        const all = ['mx.hostile.test Hello', ...caps, ...Array.from({ length: junk }, (_, i) => `X-FILLER-${i}`)];
        return all.map((c, i) => Buffer.from(`250${i === all.length - 1 ? ' ' : '-'}${c}`, 'latin1'));
      }),
    ),
  },
  { weight: 2, arbitrary: stageReply('ehlo', 1) },
);

const replies = (stage: string, okWeight: number, max: number) => fc.array(stageReply(stage, okWeight), { minLength: 1, maxLength: max });

export const sessionScript: fc.Arbitrary<SessionScript> = fc.record({
  greeting: fc.oneof({ weight: 12, arbitrary: stageReply('greeting', 30) }, { weight: 1, arbitrary: fc.constant<'drop'>('drop') }),
  ehlo: ehloReply,
  helo: stageReply('ehlo', 8),
  starttls: stageReply('starttls', 6),
  afterStarttls: fc.constantFrom<SessionScript['afterStarttls']>('tls', 'tls', 'garbage', 'plain'),
  mail: replies('mail', 20, 2),
  rcpt: replies('rcpt', 12, 4),
  data: replies('data', 20, 2),
  eod: replies('eod', 12, 2),
  other: stageReply('other', 10),
  dataCut: fc.oneof({ weight: 8, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.nat(4000) }),
});

/** A well-behaved MX, for the recovery at the end. */
export function wellBehavedScript(): SessionScript {
  const ok = (line: string): ReplySpec => ({ bytes: Buffer.from(`${line}\r\n`), pieces: 1, dripMs: 0, after: 'stay' });
  return {
    greeting: ok('220 mx.hostile.test ESMTP'),
    ehlo: ok('250-mx.hostile.test Hello\r\n250-PIPELINING\r\n250-8BITMIME\r\n250-SMTPUTF8\r\n250 ENHANCEDSTATUSCODES'),
    helo: ok('250 mx.hostile.test'),
    starttls: ok('454 4.7.0 TLS not available'),
    afterStarttls: 'plain',
    mail: [ok('250 2.1.0 Ok')],
    rcpt: [ok('250 2.1.5 Ok')],
    data: [ok('354 End data with <CR><LF>.<CR><LF>')],
    eod: [ok('250 2.0.0 Ok: queued')],
    other: ok('250 2.0.0 Ok'),
    dataCut: null,
  };
}
