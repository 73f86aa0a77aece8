import test from 'ava';
import { simpleParser } from 'mailparser';
import type { AddressObject, ParsedMail } from 'mailparser';
import { COMPOSER_OWNED_HEADERS, ENGINE_OWNED_HEADERS } from '../../../src/core/emails/email-headers.js';
import { HTML_TO_TEXT_MAX_CHARS } from '../../../src/render/html-to-plain-text.js';
import { composeMessage, contentTypeForFilename, crlfBuffer, type ComposeInput } from '../../../src/smtp/outbound/mime-builder.js';

const PDF_BYTES = Buffer.concat([Buffer.from('%PDF-1.4\n'), Buffer.from(Array.from({ length: 3000 }, (_, i) => (i * 37) % 256))]);
const CSV_BYTES = Buffer.from('name,city\r\nZoë,Zürich\r\n');

function baseInput(overrides: Partial<ComposeInput> = {}): ComposeInput {
  return {
    from: 'Acmé Ltd <hi@acme.com>',
    to: ['bob@example.com', '"Smith, Alice" <alice@example.org>'],
    cc: ['Carol <carol@example.net>'],
    replyTo: ['support@acme.com'],
    subject: 'Your invoice — Grüße from Zürich',
    text: 'Hello Bob,\n\nyour invoice is attached.\n',
    html: '<p>Hello <b>Bob</b>,</p><p>your invoice is attached. ✓</p>',
    headers: { 'X-Campaign': 'Été 2024 — soldes', 'X-Entity-Ref-ID': 'abc-123', 'List-Unsubscribe': '<https://acme.com/u/1>' },
    attachments: [
      { filename: 'invoice.pdf', content: PDF_BYTES.toString('base64') },
      { filename: 'données été.csv', content: CSV_BYTES.toString('base64'), contentType: 'text/csv' },
    ],
    messageId: '<0193a5b2.c3d4@acme.com>',
    date: new Date('2024-06-01T12:34:56Z'),
    inReplyTo: '<parent@example.com>',
    references: ['<root@example.com>', '<parent@example.com>'],
    ...overrides,
  };
}

/**
 * mailparser leaves unknown (X-) headers as encoded words, so they are decoded here
 * (RFC 2047: Q and B words, whitespace between adjacent words dropped, 6.2).
 */
function decodeWords(value: string): string {
  return value
    .replace(/(\?=)\s+(?==\?)/g, '$1')
    .replace(/=\?([^?]+)\?([QqBb])\?([^?]*)\?=/g, (_, charset: string, enc: string, text: string) => {
      const bytes =
        enc.toUpperCase() === 'B'
          ? Buffer.from(text, 'base64')
          : Buffer.from(text.replace(/_/g, ' ').replace(/=([0-9A-Fa-f]{2})/g, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16))), 'latin1');
      return new TextDecoder(charset).decode(bytes);
    });
}

function addresses(field: AddressObject | AddressObject[] | undefined): { name: string; address: string | undefined }[] {
  return [field ?? []].flat().flatMap((group) => group.value.map((a) => ({ name: a.name, address: a.address })));
}

/** The raw header block, unfolded, one entry per field. */
function rawHeaderFields(message: Buffer): string[] {
  const text = message.toString('latin1');
  return text
    .slice(0, text.indexOf('\r\n\r\n'))
    .replace(/\r\n[ \t]/g, ' ')
    .split('\r\n');
}

function assertWireFormat(t: import('ava').ExecutionContext, message: Buffer): void {
  const text = message.toString('latin1');
  t.false(/(^|[^\r])\n/.test(text), 'no bare LF');
  t.false(/\r(?!\n)/.test(text), 'no bare CR');
  t.true(text.endsWith('\r\n'));
  const longest = Math.max(...text.split('\r\n').map((line) => line.length));
  t.true(longest <= 998, `longest line ${longest} octets`);
}

test('composes every field, and mailparser reads them all back', async (t) => {
  const message = await composeMessage(baseInput());
  const parsed: ParsedMail = await simpleParser(message);

  t.deepEqual(addresses(parsed.from), [{ name: 'Acmé Ltd', address: 'hi@acme.com' }]);
  t.deepEqual(addresses(parsed.to), [
    { name: '', address: 'bob@example.com' },
    { name: 'Smith, Alice', address: 'alice@example.org' },
  ]);
  t.deepEqual(addresses(parsed.cc), [{ name: 'Carol', address: 'carol@example.net' }]);
  t.deepEqual(addresses(parsed.replyTo), [{ name: '', address: 'support@acme.com' }]);
  t.is(parsed.subject, 'Your invoice — Grüße from Zürich');
  t.is(parsed.messageId, '<0193a5b2.c3d4@acme.com>');
  t.is(parsed.date?.toISOString(), '2024-06-01T12:34:56.000Z');
  t.is(parsed.inReplyTo, '<parent@example.com>');
  t.deepEqual([parsed.references ?? []].flat(), ['<root@example.com>', '<parent@example.com>']);

  t.is(parsed.text, 'Hello Bob,\n\nyour invoice is attached.\n');
  t.is(parsed.html, '<p>Hello <b>Bob</b>,</p><p>your invoice is attached. ✓</p>');

  t.is(decodeWords(String(parsed.headers.get('x-campaign'))), 'Été 2024 — soldes');
  t.is(parsed.headers.get('x-entity-ref-id'), 'abc-123');
  t.deepEqual((parsed.headers.get('list') as { unsubscribe?: { url: string } } | undefined)?.unsubscribe?.url, 'https://acme.com/u/1');
  t.is(parsed.headers.get('mime-version'), '1.0');

  t.is(parsed.attachments.length, 2);
  const [pdf, csv] = parsed.attachments;
  t.is(pdf!.filename, 'invoice.pdf');
  t.is(pdf!.contentType, 'application/pdf');
  t.true(pdf!.content.equals(PDF_BYTES), 'pdf bytes identical');
  t.is(csv!.filename, 'données été.csv');
  t.is(csv!.contentType, 'text/csv');
  t.true(csv!.content.equals(CSV_BYTES), 'csv bytes identical');

  const fields = rawHeaderFields(message);
  t.false(parsed.headers.has('bcc'));
  t.false(fields.some((f) => /^bcc:/i.test(f)), 'no Bcc header');
  // the caller's casing is kept (nodemailer alone would write "X-Entity-Ref-Id")
  t.true(fields.includes('X-Entity-Ref-ID: abc-123'));
  // non-ASCII header values travel as RFC 2047 encoded words, the header block is ASCII
  t.true(/^[\x20-\x7e\r\n\t]*$/.test(message.toString('latin1', 0, message.indexOf('\r\n\r\n'))));
  assertWireFormat(t, message);
});

test('html only: no plain-text part is invented', async (t) => {
  const message = await composeMessage(baseInput({ text: null, attachments: [] }));
  const parsed = await simpleParser(message);
  t.regex(parsed.headers.get('content-type') ? String((parsed.headers.get('content-type') as { value: string }).value) : '', /^text\/html$/);
  t.is((parsed.html || '').trimEnd(), '<p>Hello <b>Bob</b>,</p><p>your invoice is attached. ✓</p>');
  // (mailparser derives parsed.text from the html itself, so the raw message is what tells)
  t.false(message.toString().includes('text/plain'));
});

test('html only with textFromHtml: the plain-text alternative is made from that HTML; given text wins', async (t) => {
  const message = await composeMessage(baseInput({ text: null, attachments: [], html: '<p>Tracked <a href="https://t.example/c/1">link</a></p>', textFromHtml: '<p>Original <a href="https://acme.com/x">link</a></p>' }));
  const parsed = await simpleParser(message, { skipHtmlToText: true });
  t.is(parsed.text?.trimEnd(), 'Original link [https://acme.com/x]');
  t.regex(String(parsed.html), /Tracked/);
  const given = await simpleParser(await composeMessage(baseInput({ attachments: [], textFromHtml: '<p>Ignored</p>' })), { skipHtmlToText: true });
  t.regex(given.text ?? '', /your invoice is attached/);
  t.notRegex(given.text ?? '', /Ignored/);
});

test('textFromHtml over HTML_TO_TEXT_MAX_CHARS, or nested too deeply for the converter: HTML-only, not a failure', async (t) => {
  const big = '<p>words</p>'.repeat(Math.floor(HTML_TO_TEXT_MAX_CHARS / 12) + 1);
  const deep = `${'<div>'.repeat(20_000)}deep${'</div>'.repeat(20_000)}`;
  for (const html of [big, deep]) {
    const message = await composeMessage(baseInput({ text: null, attachments: [], html, textFromHtml: html }));
    t.false(message.toString('latin1').includes('text/plain'));
    t.regex(message.toString('latin1'), /^Content-Type: text\/html/m);
  }
});

test('empty cc, reply-to and references produce no header at all', async (t) => {
  const message = await composeMessage(baseInput({ cc: [], replyTo: [], references: [], inReplyTo: null, attachments: [] }));
  const names = rawHeaderFields(message).map((f) => f.split(':')[0]!.toLowerCase());
  for (const absent of ['cc', 'reply-to', 'references', 'in-reply-to', 'bcc']) t.false(names.includes(absent), absent);
  for (const present of ['from', 'to', 'subject', 'date', 'message-id', 'mime-version', 'content-type']) t.true(names.includes(present), present);
});

test('bare LF and bare CR in bodies become CRLF', async (t) => {
  const message = await composeMessage(baseInput({ text: 'one\ntwo\rthree\r\nfour', html: '<p>a</p>\n<p>b</p>\r<p>c</p>', attachments: [] }));
  assertWireFormat(t, message);
  const parsed = await simpleParser(message);
  t.is(parsed.text, 'one\ntwo\nthree\nfour');
});

test('long lines in bodies and long headers with spaces stay within 998 octets', async (t) => {
  const message = await composeMessage(
    baseInput({
      text: 'x'.repeat(5000),
      html: `<p>${'y'.repeat(5000)}</p>`,
      subject: 'word '.repeat(400).trim(),
      headers: { 'X-Words': 'token '.repeat(400).trim() },
    }),
  );
  assertWireFormat(t, message);
  const parsed = await simpleParser(message);
  t.is(parsed.text?.trim(), 'x'.repeat(5000));
  t.is(parsed.subject, 'word '.repeat(400).trim());
});

test('an unbroken 1000-character header value is refused (RFC 5322 2.1.1) instead of sent over-long', async (t) => {
  const err = await t.throwsAsync(composeMessage(baseInput({ headers: { 'X-Token': 'z'.repeat(1000) } })), { instanceOf: RangeError });
  t.regex(err!.message, /header "X-Token" has a 10\d\d-octet line/);
  await t.throwsAsync(composeMessage(baseInput({ subject: 'q'.repeat(1200) })), { message: /header "Subject"/ });
});

test('custom headers the composer owns, or with CR/LF, or with a bad name are refused', async (t) => {
  for (const name of ['From', 'bcc', 'Content-Type', 'DKIM-Signature', 'Message-ID', 'Reply-To']) {
    await t.throwsAsync(composeMessage(baseInput({ headers: { [name]: 'x' } })), { message: /written by the composer/ }, name);
  }
  await t.throwsAsync(composeMessage(baseInput({ headers: { 'X-Evil': 'a\r\nBcc: victim@example.com' } })), { message: /without CR, LF or NUL/ });
  await t.throwsAsync(composeMessage(baseInput({ headers: { 'X Bad': 'a' } })), { message: /invalid header name/ });
  await t.throwsAsync(composeMessage(baseInput({ headers: { 'X-Colon:': 'a' } })), { message: /invalid header name/ });
});

test('COMPOSER_OWNED_HEADERS: lowercase, covers what the composer writes, leaves List-Unsubscribe to the engine', (t) => {
  for (const name of COMPOSER_OWNED_HEADERS) t.is(name, name.toLowerCase());
  for (const name of ['from', 'to', 'cc', 'bcc', 'subject', 'date', 'message-id', 'mime-version', 'content-type', 'content-transfer-encoding', 'dkim-signature', 'return-path', 'received', 'in-reply-to', 'references', 'sender', 'reply-to']) {
    t.true(COMPOSER_OWNED_HEADERS.has(name), name);
  }
  t.false(COMPOSER_OWNED_HEADERS.has('list-unsubscribe'));
  t.false(COMPOSER_OWNED_HEADERS.has('list-unsubscribe-post'));
});

test('ENGINE_OWNED_HEADERS, which callers may not set, are the composer\'s plus the ones the engine adds and the ones only a receiver writes', (t) => {
  for (const name of COMPOSER_OWNED_HEADERS) t.true(ENGINE_OWNED_HEADERS.has(name), name);
  t.deepEqual(
    [...ENGINE_OWNED_HEADERS].filter((name) => !COMPOSER_OWNED_HEADERS.has(name)),
    ['list-unsubscribe', 'list-unsubscribe-post', 'x-posthorn-email-id', 'authentication-results', 'arc-seal', 'arc-message-signature', 'arc-authentication-results', 'received-spf', 'delivered-to', 'x-original-to'],
  );
});

test('a receiver\'s header stored with an email accepted before the API refused it still composes', async (t) => {
  const fields = rawHeaderFields(await composeMessage(baseInput({ headers: { 'Authentication-Results': 'mx.example.net; none' } })));
  t.true(fields.includes('Authentication-Results: mx.example.net; none'));
});

test('a Delivered-To stored with an email accepted before the API refused it still composes', async (t) => {
  const fields = rawHeaderFields(await composeMessage(baseInput({ headers: { 'Delivered-To': 'alice@example.net', 'X-Original-To': 'alice@example.net' } })));
  t.true(fields.includes('Delivered-To: alice@example.net'));
  t.true(fields.includes('X-Original-To: alice@example.net'));
});

test('a Resent-From stored with an email accepted before the API refused it still composes', async (t) => {
  const fields = rawHeaderFields(await composeMessage(baseInput({ headers: { 'Resent-From': 'hello@sender.dev' } })));
  t.true(fields.includes('Resent-From: hello@sender.dev'));
});

test('engine headers List-Unsubscribe / List-Unsubscribe-Post pass through unchanged', async (t) => {
  const headers = { 'List-Unsubscribe': '<https://acme.com/u/Zx9>, <mailto:u+Zx9@acme.com>', 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' };
  const fields = rawHeaderFields(await composeMessage(baseInput({ headers })));
  t.true(fields.includes('List-Unsubscribe: <https://acme.com/u/Zx9>, <mailto:u+Zx9@acme.com>'));
  t.true(fields.includes('List-Unsubscribe-Post: List-Unsubscribe=One-Click'));
});

test('message/rfc822 attachments: 7bit-clean ones stay message/rfc822, others travel as base64 octets', async (t) => {
  const clean = Buffer.from('From: a@b.c\r\nSubject: hi\r\n\r\nplain ascii\r\n');
  const eightBit = Buffer.from('From: a@b.c\r\nSubject: hi\r\n\r\nGrüße\r\n');
  const message = await composeMessage(
    baseInput({
      attachments: [
        { filename: 'clean.eml', content: clean.toString('base64') },
        { filename: 'utf8.eml', content: eightBit.toString('base64') },
      ],
    }),
  );
  const text = message.toString('latin1');
  t.false(/Content-Transfer-Encoding: 8bit/i.test(text), 'nothing that needs 8BITMIME');
  t.regex(text, /Content-Type: message\/rfc822; name=clean\.eml/);
  t.regex(text, /Content-Type: application\/octet-stream; name=utf8\.eml/);
  const parsed = await simpleParser(message);
  const utf8 = parsed.attachments.find((a) => a.filename === 'utf8.eml');
  t.true(utf8?.content.equals(eightBit));
  assertWireFormat(t, message);
});

test('a message/rfc822 attachment with bare LF line ends still goes out with CRLF only', async (t) => {
  // The composer's output is made CRLF on the finished buffer (crlfBuffer), not by a stream stage.
  const lf = Buffer.from('From: a@b.c\nSubject: hi\n\nline one\nline two\rend\n');
  const message = await composeMessage(baseInput({ attachments: [{ filename: 'lf.eml', content: lf.toString('base64') }] }));
  t.regex(message.toString('latin1'), /Content-Type: message\/rfc822; name=lf\.eml/);
  assertWireFormat(t, message);
});

test('crlfBuffer returns the very same buffer when there is nothing to fix', (t) => {
  const clean = Buffer.from('a: b\r\n\r\nbody\r\n');
  t.is(crlfBuffer(clean), clean);
  t.is(crlfBuffer(Buffer.from('a\nb\rc\r\n')).toString(), 'a\r\nb\r\nc\r\n');
  t.is(crlfBuffer(Buffer.from('\nx')).toString(), '\r\nx');
});

test('a multipart content type for an attachment is refused', async (t) => {
  await t.throwsAsync(composeMessage(baseInput({ attachments: [{ filename: 'x.bin', content: 'AAAA', contentType: 'multipart/mixed' }] })), {
    message: /multipart/,
  });
});

test('a header that nodemailer would fold at a U+2028 or U+00A0 is refused, not written as a line of its own', async (t) => {
  // a UTF-8 local part reaches the header raw; the API refuses these characters, this is the backstop
  for (const sep of ['\u2028', '\u00a0', '\u3000']) {
    const err = await t.throwsAsync(composeMessage(baseInput({ cc: ['rcc0@example.org', '"Zoë" <rcc1@example.org>', `"c${sep}X-Injected: 1"@example.org`, `${'x'.repeat(30)}@example.org`] })));
    t.regex(err!.message, /neither a field nor a fold/);
  }
  // an ordinary space folds into a proper continuation line
  const message = await composeMessage(baseInput({ cc: ['rcc0@example.org', '"Zoë" <rcc1@example.org>', '"c X-Folded: 1"@example.org', `${'x'.repeat(30)}@example.org`] }));
  assertWireFormat(t, message);
  t.true(message.includes('<"c\r\n X-Folded: 1"@example.org>'), 'folded at the space, as a continuation line');
});

test('contentTypeForFilename', (t) => {
  const cases: [string, string][] = [
    ['invoice.pdf', 'application/pdf'],
    ['INVOICE.PDF', 'application/pdf'],
    ['photo.jpeg', 'image/jpeg'],
    ['photo.JPG', 'image/jpeg'],
    ['logo.png', 'image/png'],
    ['report.docx', 'application/vnd.openxmlformats-officedocument.wordprocessingml.document'],
    ['sheet.xlsx', 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet'],
    ['data.csv', 'text/csv'],
    ['notes.txt', 'text/plain'],
    ['page.html', 'text/html'],
    ['data.json', 'application/json'],
    ['archive.tar.gz', 'application/x-gzip'],
    ['bundle.zip', 'application/zip'],
    // nodemailer's table names multipart/x-gzip first, which no attachment can be
    ['backup.gzip', 'application/x-gzip'],
    ['invite.ics', 'text/calendar'],
    ['forwarded.eml', 'message/rfc822'],
    ['dir/sub/logo.png', 'image/png'],
    ['C:\\Users\\x\\logo.png', 'image/png'],
    ['données été.csv', 'text/csv'],
    ['unknown.weird-ext', 'application/octet-stream'],
    ['README', 'application/octet-stream'],
    ['pdf', 'application/octet-stream'], // a bare name is not an extension
    ['.bashrc', 'application/octet-stream'],
    ['trailing.', 'application/octet-stream'],
    ['', 'application/octet-stream'],
  ];
  for (const [filename, expected] of cases) t.is(contentTypeForFilename(filename), expected, filename);
});
