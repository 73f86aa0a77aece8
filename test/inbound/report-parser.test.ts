import test from 'ava';
import { parseMessage } from '../../src/smtp/parsed-mail.js';
import { parseReport } from '../../src/smtp/inbound/report-parser.js';
import { fixture } from './helpers/smtp-client.js';

// The report parser on its own: every field the linking and classification rely on, read
// from providers' formats, and garbage that must come out as 'other' instead of an exception.

const ORIGINAL = [
  'DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d=sender.dev; s=posthorn;',
  ' h=from:to:subject; bh=abc=; b=def=',
  'From: Sender <hello@sender.dev>',
  'To: Alice <alice@example.net>, bob@example.net',
  'Subject: Hello',
  'Message-ID: <abc123.xyz@sender.dev>',
  'X-Posthorn-Email-ID: em_0123456789abcdefghijk',
  'MIME-Version: 1.0',
  'Content-Type: text/plain; charset=utf-8',
  '',
  'Hi there',
].join('\r\n');
const RP = 'bounces+em_0123456789abcdefghijk@bounces.sender.dev';

async function parse(raw: Buffer) {
  return parseReport(raw, await parseMessage(raw));
}

test('Postfix DSN: recipient, action, status, diagnostic, MTAs, original, hard bounce', async (t) => {
  const r = await parse(fixture('postfix-dsn-user-unknown.eml', { RETURN_PATH: RP, RECIPIENT: 'alice@example.net', ORIGINAL }));
  t.is(r.type, 'dsn');
  t.is(r.reportingMta, 'mx1.example.net');
  t.is(r.recipients.length, 1);
  const [rcpt] = r.recipients;
  t.like(rcpt, {
    finalRecipient: 'alice@example.net',
    originalRecipient: 'alice@example.net',
    action: 'failed',
    status: '5.1.1',
    smtpCode: 550,
    remoteMta: 'mailstore1.example.net',
    hardBounce: true,
    category: 'recipient',
  });
  t.is(rcpt!.diagnosticCode, '550 5.1.1 <alice@example.net>: Recipient address rejected: User unknown in virtual mailbox table');
  t.deepEqual(r.original, { messageId: '<abc123.xyz@sender.dev>', posthornEmailId: 'em_0123456789abcdefghijk', returnPath: null, to: ['alice@example.net', 'bob@example.net'] });
  t.is(r.subject, 'Undelivered Mail Returned to Sender');
});

test('Google DSN: a multi-line 550-5.1.1 diagnostic and the original after a nested related part', async (t) => {
  const r = await parse(fixture('gmail-dsn-no-such-user.eml', { RETURN_PATH: RP, RECIPIENT: 'alice@example.net', MESSAGE_ID: '<abc123.xyz@sender.dev>', ORIGINAL }));
  t.is(r.type, 'dsn');
  t.is(r.reportingMta, 'googlemail.com');
  t.like(r.recipients[0], { finalRecipient: 'alice@example.net', action: 'failed', status: '5.1.1', smtpCode: 550, hardBounce: true });
  t.regex(r.recipients[0]!.diagnosticCode!, /unnecessary spaces\. For more information, go to 550 5\.1\.1 {2}https:/);
  t.is(r.original?.posthornEmailId, 'em_0123456789abcdefghijk');
});

test('Exchange delay: delayed 4.4.7 with Will-Retry-Until; never a hard bounce', async (t) => {
  const r = await parse(
    fixture('exchange-dsn-delayed.eml', { RETURN_PATH: RP, RECIPIENT: 'alice@example.net', MESSAGE_ID: '<abc123.xyz@sender.dev>', SUBJECT: 'Hello', ORIGINAL_HEADERS: ORIGINAL.split('\r\n\r\n')[0]! }),
  );
  t.is(r.type, 'dsn');
  t.like(r.recipients[0], { action: 'delayed', status: '4.4.7', smtpCode: 400, hardBounce: false, willRetryUntil: 'Thu, 15 Jan 2026 10:11:37 +0000' });
  t.is(r.original?.messageId, '<abc123.xyz@sender.dev>');
});

test('a 5.7.1 spam rejection is a bounce that does not suppress', async (t) => {
  const r = await parse(fixture('postfix-dsn-spam-policy.eml', { RETURN_PATH: RP, RECIPIENT: 'alice@example.net', ORIGINAL_HEADERS: 'Message-ID: <m@sender.dev>' }));
  t.like(r.recipients[0], { action: 'failed', status: '5.7.1', smtpCode: 554, hardBounce: false, category: 'spam' });
  t.is(r.original?.messageId, '<m@sender.dev>');
});

test('Yahoo ARF: feedback fields and the return path it quotes', async (t) => {
  const r = await parse(fixture('yahoo-arf-abuse.eml', { REPORT_TO: 'complaints@x.test', SUBJECT: 'Hello', RETURN_PATH: RP, RECIPIENT: 'alice@example.net', ORIGINAL }));
  t.is(r.type, 'arf');
  t.deepEqual(r.feedback, {
    feedbackType: 'abuse',
    userAgent: 'Yahoo!-Mail-Feedback/2.0',
    originalMailFrom: RP,
    originalRcptTo: ['alice@example.net'],
    arrivalDate: 'Mon, 12 Jan 2026 16:31:07 +0000',
    sourceIp: null,
    reportedDomain: 'sender.dev',
  });
  t.is(r.original?.returnPath, RP);
  t.is(r.original?.posthornEmailId, 'em_0123456789abcdefghijk');
});

test('AOL ARF: an inline message/rfc822 original is still read', async (t) => {
  const r = await parse(fixture('aol-arf-redacted.eml', { REPORT_TO: 'complaints@x.test', MESSAGE_ID: '<abc123.xyz@sender.dev>', ORIGINAL_REDACTED: ORIGINAL.replace(/^To: .*$/m, 'To: redacted@aol.com') }));
  t.is(r.type, 'arf');
  t.is(r.feedback?.sourceIp, '203.0.113.25');
  t.deepEqual(r.feedback?.originalRcptTo, []);
  t.is(r.original?.messageId, '<abc123.xyz@sender.dev>');
  t.deepEqual(r.original?.to, ['redacted@aol.com']);
});

test('a base64-encoded delivery-status part (seen from some gateways) is decoded', async (t) => {
  const status = Buffer.from('Reporting-MTA: dns; gw.example\r\n\r\nFinal-Recipient: rfc822; alice@example.net\r\nAction: failed\r\nStatus: 5.2.2\r\n').toString('base64');
  const raw = Buffer.from(
    `Content-Type: multipart/report; report-type="delivery-status"; boundary="=_b"\r\nSubject: failed\r\n\r\n--=_b\r\nContent-Type: text/plain\r\n\r\nfailed\r\n--=_b\r\nContent-Type: message/delivery-status\r\nContent-Transfer-Encoding: base64\r\n\r\n${status}\r\n--=_b--\r\n`,
  );
  const r = await parse(raw);
  t.is(r.reportingMta, 'gw.example');
  t.like(r.recipients[0], { finalRecipient: 'alice@example.net', status: '5.2.2', hardBounce: false, category: 'mailbox-full' });
});

test('an internationalised recipient: a utf-8 address as UTF-8 or with RFC 6533 \\x{HEX} escapes reads as the same address', async (t) => {
  const base = fixture('postfix-dsn-user-unknown.eml', { RETURN_PATH: RP, RECIPIENT: 'kunde@bücher.example', ORIGINAL }).toString();
  const escaped = base
    .replace('Final-Recipient: rfc822; kunde@bücher.example', 'Final-Recipient: utf-8; KUNDE@B\\x{DC}CHER.example')
    .replace('Original-Recipient: rfc822;kunde@bücher.example', 'Original-Recipient: UTF-8;kunde@b\\x{fc}cher.example\\x{}\\x{D800}\\x{110000}');
  const r = await parse(Buffer.from(escaped));
  t.is(r.recipients[0]!.finalRecipient, 'KUNDE@BÜCHER.example');
  t.is(r.recipients[0]!.originalRecipient, 'kunde@bücher.example\\x{}\\x{D800}\\x{110000}', 'what is not a character is left as written');
  const raw = await parse(Buffer.from(base.replace('Final-Recipient: rfc822;', 'Final-Recipient: utf-8;')));
  t.is(raw.recipients[0]!.finalRecipient, 'kunde@bücher.example');
  // Only a utf-8 address has escapes (an rfc822 one is ASCII).
  const rfc822 = await parse(Buffer.from(base.replace('Final-Recipient: rfc822; kunde@bücher.example', 'Final-Recipient: rfc822; kunde\\x{FC}@example.net')));
  t.is(rfc822.recipients[0]!.finalRecipient, 'kunde\\x{FC}@example.net');
});

test('garbage comes out as "other" or an empty report, never an exception', async (t) => {
  const inputs = [
    Buffer.alloc(0),
    Buffer.from([0, 1, 2, 3, 0xff, 0xfe, 0x0a]),
    Buffer.from('Content-Type: multipart/report; boundary=\r\n\r\n--\r\n'),
    Buffer.from('Content-Type: multipart/report; report-type=delivery-status; boundary="(.*)+"\r\n\r\n--(.*)+\r\nContent-Type: message/delivery-status\r\n\r\n\r\n\r\n--(.*)+--'),
    Buffer.from('Content-Type: multipart/report; report-type=feedback-report; boundary=z\r\n\r\n--z\r\nContent-Type: message/feedback-report\r\n\r\n:::\r\nFeedback-Type\r\n--z'),
    Buffer.from(`Content-Type: multipart/report; boundary=q\r\n\r\n${'--q\r\n\r\n'.repeat(5000)}`),
  ];
  for (const raw of inputs) {
    const r = await parse(raw);
    t.true(['other', 'dsn', 'arf'].includes(r.type));
    t.true(Array.isArray(r.recipients));
  }
});

test('a message of the largest accepted size in quoted-printable parts is read in a heap of a few times its size', async (t) => {
  // Anyone may mail the complaint address; the message is parsed whole. 30 MiB (inbound.maxMessageBytes)
  // must not take many times its size (npm start gives the heap 512 MB) nor crash the process.
  const parser = new URL('../../src/smtp/inbound/report-parser.js', import.meta.url).href;
  const script = `
    import { parseReport } from ${JSON.stringify(parser)};
    const part = (type, size) => Buffer.concat([Buffer.from('--b\\r\\nContent-Type: ' + type + '\\r\\nContent-Transfer-Encoding: quoted-printable\\r\\n\\r\\n'), Buffer.alloc(size, 'a'), Buffer.from('\\r\\n')]);
    const raw = Buffer.concat([Buffer.from('Content-Type: multipart/report; report-type=delivery-status; boundary="b"\\r\\n\\r\\n'), part('text/plain', 15 * 1024 * 1024), part('message/delivery-status', 15 * 1024 * 1024), Buffer.from('--b--\\r\\n')]);
    const report = parseReport(raw, null);
    process.stdout.write(report.type);
  `;
  const { execFile } = await import('node:child_process');
  const result = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = execFile(process.execPath, ['--max-old-space-size=128', '--input-type=module', '-e', script], { maxBuffer: 1024 * 1024 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr: stderr.slice(-500) });
    });
    child.stdin?.end();
  });
  t.is(result.code, 0, result.stderr);
  t.is(result.stdout, 'dsn');
});

// Plain-text bounces (text-bounce.ts): what makes one, and what never does.

function textMessage(headers: string[], body: string[]): Buffer {
  return Buffer.from([...headers, 'Content-Type: text/plain; charset=us-ascii', '', ...body, ''].join('\r\n'));
}

async function parseFrom(raw: Buffer, mailFrom: string | null) {
  return parseReport(raw, await parseMessage(raw), mailFrom);
}

test('text bounce: Exim with X-Failed-Recipients and its own Auto-Submitted is read; an IP address is not a status code', async (t) => {
  const raw = fixture('exim-text-bounce.eml', { RETURN_PATH: RP, RECIPIENT: 'alice@example.net', ORIGINAL });
  const r = await parseFrom(raw, '');
  t.is(r.type, 'text');
  t.deepEqual(r.textBounce, { evidence: 'x-failed-recipients', reportingMta: null });
  t.is(r.recipients.length, 1);
  t.like(r.recipients[0], { finalRecipient: 'alice@example.net', action: 'failed', status: '5.1.1', smtpCode: 550, hardBounce: true, category: 'recipient', source: 'text' });
  t.regex(r.recipients[0]!.diagnosticCode!, /^550 5\.1\.1 <alice@example\.net>: Recipient address rejected/);
  // The returned original (its To: names bob too) is not read.
  t.is((await parseFrom(fixture('exim-text-bounce.eml', { RETURN_PATH: RP, RECIPIENT: 'alice@example.net', ORIGINAL }), 'someone@example.org')).type, 'text', 'X-Failed-Recipients alone is enough');
});

test('text bounce: X-Failed-Recipients without a code is a failure that does not suppress (like a DSN without a status)', async (t) => {
  const raw = textMessage(['X-Failed-Recipients: <alice@example.net>, bob@example.net', 'Subject: Mail delivery failed'], ['The following address(es) failed:', '', '  alice@example.net', '    no reply recorded']);
  const r = await parseFrom(raw, '');
  t.is(r.type, 'text');
  t.deepEqual(r.recipients.map((x) => [x.finalRecipient, x.action, x.smtpCode, x.hardBounce]), [
    ['alice@example.net', 'failed', null, false],
    ['bob@example.net', 'failed', null, false],
  ]);
});

test('text bounce: qmail counts only from the null reverse-path', async (t) => {
  const raw = fixture('qmail-text-bounce.eml', { RETURN_PATH: RP, RECIPIENT: 'alice@example.net', ORIGINAL });
  const r = await parseFrom(raw, '');
  t.is(r.type, 'text');
  t.deepEqual(r.textBounce, { evidence: 'bounce-text', reportingMta: 'mail.example.org' });
  t.like(r.recipients[0], { finalRecipient: 'alice@example.net', action: 'failed', status: '5.1.1', smtpCode: null, hardBounce: true });
  t.is((await parseFrom(raw, 'someone@example.org')).type, 'other');
  t.is((await parseFrom(raw, null)).type, 'other', 'an unknown reverse-path is not the null one');
});

test('text bounce: never an auto-reply, and never an address without a reply code in its block', async (t) => {
  const bounceBody = ['Your message could not be delivered.', '', '  alice@example.net', '    550 5.1.1 User unknown'];
  const plain = textMessage(['Subject: Undeliverable'], bounceBody);
  t.is((await parseFrom(plain, '')).type, 'text', 'the control: this text is a bounce');
  t.is((await parseFrom(textMessage(['Subject: Undeliverable', 'Auto-Submitted: auto-replied'], bounceBody), '')).type, 'other', 'Auto-Submitted: auto-replied without X-Failed-Recipients');
  t.is((await parseFrom(textMessage(['Subject: Out of Office', 'X-Failed-Recipients: alice@example.net'], bounceBody), '')).type, 'other', 'an out-of-office subject vetoes even X-Failed-Recipients');
  t.is((await parseFrom(textMessage(['Subject: Undeliverable', 'X-Autoreply: yes'], bounceBody), '')).type, 'other');
  t.is((await parseFrom(textMessage(['Subject: Undeliverable', 'Precedence: auto_reply'], bounceBody), '')).type, 'other');
  t.is((await parseFrom(textMessage(['Subject: Re: Hello'], ['I am on vacation until Monday.', ...bounceBody]), '')).type, 'other');
  t.is((await parseFrom(textMessage(['Subject: Undeliverable'], ['Your message could not be delivered.', '', '  alice@example.net', '    host mx.example.net [10.4.5.6] did not answer']), '')).type, 'other', 'an IP address is no status code');
  t.is((await parseFrom(textMessage(['Subject: Hello'], ['Thanks for your message.', '', '  alice@example.net', '    550 5.1.1 User unknown']), '')).type, 'other', 'no bounce text');
});

test('large header fields from a remote are read in linear time: a Content-Type parameter without "=", an X-Failed-Recipients without "@"', async (t) => {
  // Both patterns were retried from inside a long run of characters: 20 minutes or more each.
  // The test's timeout is the check.
  const run = 'a'.repeat(1024 * 1024);
  const ct = Buffer.from(`Content-Type: multipart/report; ${run}\r\nSubject: x\r\n\r\nbody\r\n`);
  t.is(parseReport(ct, null).type, 'other');
  // Just under the 1 MB header block mailparser reads at most (it gives up on a larger one).
  const failed = textMessage([`X-Failed-Recipients: ${run.slice(0, 900_000)}, alice@example.net`, 'Subject: Mail delivery failed'], ['alice@example.net', '  550 5.1.1 User unknown']);
  const r = await parseFrom(failed, '');
  t.is(r.type, 'text');
  t.deepEqual(r.recipients.map((x) => [x.finalRecipient, x.status]), [['alice@example.net', '5.1.1']]);
});
