import test from 'ava';
import fc from 'fast-check';
import MailComposer from 'nodemailer/lib/mail-composer';
import type Mail from 'nodemailer/lib/mailer';
import { serializeMimeTree } from '../../../src/smtp/outbound/mime-serializer.js';

// serializeMimeTree() must write exactly the bytes nodemailer's streaming build() writes for
// the same tree: it is an optimisation, never a second MIME implementation. Generated
// messages cover what the composer is handed (UTF-8 and 8-bit text, long lines, trailing
// white space, bare CR/LF, empty parts, attachments of every kind, forced transfer
// encodings, alternatives, calendar parts) and the two outputs are compared byte for byte.

const SEED = Number(process.env.FUZZ_SEED ?? 20261122);
const RUNS = Number(process.env.FUZZ_RUNS ?? 300);

/** Text with the characters that change MIME encoding decisions. */
const awkwardText = fc
  .array(
    fc.oneof(
      fc.string({ maxLength: 40 }),
      fc.string({ unit: 'grapheme', maxLength: 20 }),
      fc.constantFrom('\r\n', '\n', '\r', ' ', '\t', ' \r\n', '=', '.', '\u00e9', '\u2713', '\u{1F600}', '\0', 'x'.repeat(120), 'y '.repeat(60)),
    ),
    { maxLength: 30 },
  )
  .map((parts) => parts.join(''));

const attachment = fc.record({
  filename: fc.constantFrom('a.pdf', 'notes.txt', 'data.csv', 'mail.eml', 'pic.png', 'x', 'donn\u00e9es \u00e9t\u00e9.csv'),
  content: fc.oneof(
    fc.uint8Array({ maxLength: 3000 }).map((a) => Buffer.from(a)),
    awkwardText,
  ),
  contentType: fc.option(fc.constantFrom('text/plain', 'text/csv', 'message/rfc822', 'application/octet-stream', 'image/png'), { nil: undefined }),
  // how a string content is to be decoded first (nodemailer reads it with Buffer.from)
  encoding: fc.option(fc.constantFrom('base64', 'hex'), { nil: undefined }),
  contentTransferEncoding: fc.option(fc.constantFrom('base64' as const, 'quoted-printable' as const, '7bit' as const), { nil: undefined }),
});

const mailOptions: fc.Arbitrary<Mail.Options> = fc.record(
  {
    subject: awkwardText,
    text: fc.option(awkwardText, { nil: undefined }),
    html: fc.option(awkwardText, { nil: undefined }),
    textEncoding: fc.option(fc.constantFrom('base64' as const, 'quoted-printable' as const), { nil: undefined }),
    attachments: fc.array(attachment, { maxLength: 3 }),
    alternatives: fc.array(fc.record({ contentType: fc.constantFrom('text/x-web-markdown', 'text/calendar'), content: awkwardText }), { maxLength: 1 }),
    // non-empty: nodemailer itself can not stream an empty calendar part (it keeps the descriptor object as content)
    icalEvent: fc.option(fc.record({ method: fc.constant('request'), content: awkwardText.filter((s) => s.length > 0) }), { nil: undefined }),
    headers: fc.dictionary(fc.constantFrom('X-A', 'X-Long', 'X-Utf'), awkwardText.map((v) => v.replace(/[\r\n\0]/g, ' ')), { maxKeys: 3 }),
  },
  { requiredKeys: ['subject', 'attachments', 'alternatives', 'headers'] },
);

async function both(options: Mail.Options): Promise<{ sync: Buffer | undefined; streamed: Buffer }> {
  const tree = new MailComposer({
    from: 'Acm\u00e9 <hi@acme.dev>',
    to: 'Bob <bob@example.com>',
    messageId: '<fixed@acme.dev>',
    date: new Date('2026-01-02T03:04:05Z'),
    disableFileAccess: true,
    disableUrlAccess: true,
    ...options,
  }).compile();
  // the same tree both ways: the boundaries are drawn once, when the headers are first built
  const sync = serializeMimeTree(tree);
  const streamed = await tree.build();
  return { sync, streamed };
}

test('the bytes are those of nodemailer build() for generated messages', async (t) => {
  await fc.assert(
    fc.asyncProperty(mailOptions, async (options) => {
      const { sync, streamed } = await both(options);
      if (!sync) throw new Error('string and Buffer content must not need the streaming path');
      if (!sync.equals(streamed)) throw new Error(`differs at byte ${[...sync].findIndex((b, i) => b !== streamed[i])}: ${sync.length} vs ${streamed.length} bytes`);
    }),
    { seed: SEED, numRuns: RUNS },
  );
  t.pass();
});

test('fixed shapes: empty message, text only, html with attachment, forced base64, raw-free nested alternative', async (t) => {
  const shapes: Mail.Options[] = [
    {},
    { text: '' },
    { text: 'Hello' },
    { text: 'ends without newline', html: '<p>ends with CR\r' },
    { html: '<p>caf\u00e9</p>', attachments: [{ filename: 'a.pdf', content: Buffer.alloc(5000, 7) }] },
    { text: 'x'.repeat(2000), textEncoding: 'base64' },
    { text: 'plain', html: '<p>html</p>', attachments: [{ filename: 'inline.png', content: Buffer.from([1, 2, 3]), cid: 'logo@acme' }] },
  ];
  for (const options of shapes) {
    const { sync, streamed } = await both(options);
    t.truthy(sync, JSON.stringify(options).slice(0, 60));
    t.is(sync!.toString('latin1'), streamed.toString('latin1'));
  }
});

test('content only the streaming path can read is left to build()', async (t) => {
  const { Readable } = await import('node:stream');
  const withStream = new MailComposer({ from: 'a@b.c', to: 'd@e.f', text: Readable.from(['streamed']) }).compile();
  t.is(serializeMimeTree(withStream), undefined);
  const raw = new MailComposer({ raw: 'Subject: hi\r\n\r\nbody\r\n' }).compile();
  t.is(serializeMimeTree(raw), undefined);
});
