import test from 'ava';
import { headerBlockProblem, MAX_HEADER_LINES, MAX_LINE_BREAK_RUN, MAX_SIGNATURE_FIELD_BYTES } from '../../src/smtp/inbound/header-block-limits.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { smtpSend } from './helpers/smtp-client.js';

// Header blocks whose shape makes mailauth's parsing quadratic on the main thread (the reasons
// are in src/smtp/inbound/header-block-limits.ts) are refused before any parser sees them; the
// largest shapes within the bounds go through SPF/DKIM/DMARC within the suite's timeout; and the
// server answers the next message.

const MB = 1024 * 1024;
const blanks = (n: number) => ' \t'.repeat(n / 2);
const sig = (value: string) => `DKIM-Signature: v=1; a=rsa-sha256; c=simple/simple; d=remote.test; s=s; h=from; bh=AAAA;${value} b=AAAA\r\n`;
const tail = 'From: a@remote.test\r\nTo: inbox@inbox.dev\r\nSubject: shapes\r\n\r\nhi\r\n';

const REFUSED: Record<string, string> = {
  'a field of 1 MB of continuation lines': 'X-A: a\r\n' + ' b\r\n'.repeat(MB / 4) + tail,
  'many folded fields': 'X-A: a\r\n b\r\n'.repeat(MB / 12) + tail,
  'a DKIM-Signature of 1 MB of blanks': sig(blanks(MB)) + tail,
  'an ARC-Seal of 1 MB of "; "': `ARC-Seal: i=1; a=rsa-sha256; d=remote.test; s=s; cv=none${'; '.repeat(MB / 2)} b=AAAA\r\n` + tail,
  'many signatures just under the bound each': sig(blanks(MAX_SIGNATURE_FIELD_BYTES - 200)).repeat(16) + tail,
};
const ACCEPTED: Record<string, string> = {
  'as many continuation lines as allowed': 'X-A: a\r\n' + ' b\r\n'.repeat(MAX_HEADER_LINES - 10) + tail,
  'a DKIM-Signature of blanks as long as allowed': sig(blanks(MAX_SIGNATURE_FIELD_BYTES - 200)) + tail,
  'a header of 1 MB of blanks on one line': 'X-A: ' + blanks(MB) + '\r\n' + tail,
  'a message of 1 MB of blanks without a line break': 'X-A: ' + blanks(MB),
  'a From of 1 MB of blanks': 'From: a' + blanks(MB) + 'b@remote.test\r\nTo: inbox@inbox.dev\r\n\r\nhi\r\n',
};

test('headerBlockProblem: the bounds, counted in the header block only', (t) => {
  t.is(headerBlockProblem(Buffer.from(tail)), null);
  t.is(headerBlockProblem(Buffer.from(tail + ' b\r\n'.repeat(MAX_HEADER_LINES + 1))), null, 'the body is not counted');
  t.regex(headerBlockProblem(Buffer.from('X-A: a\r\n' + ' b\r\n'.repeat(MAX_HEADER_LINES) + tail)) ?? '', /more than 2000 lines/);
  // (The SMTP client in this test turns bare CRs into line breaks, so this shape is checked here only.)
  t.regex(headerBlockProblem(Buffer.from('X-A: ' + '\r'.repeat(MB) + 'x\r\n' + tail)) ?? '', /line-break/);
  t.is(headerBlockProblem(Buffer.from('X-A: ' + '\r'.repeat(MAX_LINE_BREAK_RUN - 2) + 'x\r\n' + tail)), null);
  t.regex(headerBlockProblem(Buffer.from(sig(' '.repeat(MAX_SIGNATURE_FIELD_BYTES)) + tail)) ?? '', /signature field is longer/);
  t.regex(headerBlockProblem(Buffer.from('arc-message-signature:' + ' '.repeat(MAX_SIGNATURE_FIELD_BYTES) + tail)) ?? '', /signature field is longer/);
  t.is(headerBlockProblem(Buffer.from('X-DKIM-Signature: ' + ' '.repeat(MAX_SIGNATURE_FIELD_BYTES) + '\r\n' + tail)), null, 'another field of that length');
  t.regex(headerBlockProblem(Buffer.from(sig(blanks(3000)).repeat(11) + tail)) ?? '', /together/);
  // mailauth trims the name before the colon: blanks there (any number, NBSP too) still make it a signature field.
  t.regex(headerBlockProblem(Buffer.from('DKIM-Signature' + ' '.repeat(100) + ':' + ' '.repeat(MAX_SIGNATURE_FIELD_BYTES) + '\r\n' + tail)) ?? '', /signature field is longer/);
  t.regex(headerBlockProblem(Buffer.from('ARC-Seal\t\u00a0:' + ' '.repeat(MAX_SIGNATURE_FIELD_BYTES) + '\r\n' + tail, 'latin1')) ?? '', /signature field is longer/);
});

let t0: TestApp;
let port: number;
test.before(async () => {
  t0 = await startTestApp();
  port = t0.app.listeners.inbound!.port;
  const inbox = await addVerifiedDomain(t0, 'inbox.dev');
  await t0.request('PATCH', `/v1/domains/${inbox.id}`, { body: { receiving: true } });
});
test.after.always(async () => {
  await t0?.close();
});

const send = (raw: string) => smtpSend({ port, from: 'a@remote.test', to: ['inbox@inbox.dev'], raw: Buffer.from(raw, 'latin1'), plaintext: true });

for (const [name, raw] of Object.entries(REFUSED)) {
  test.serial(`refused with 552 5.6.0: ${name}; the next message is received`, async (t) => {
    const res = await send(raw);
    t.false(res.ok);
    t.is(res.responseCode, 552, res.response);
    t.regex(res.response, /5\.6\.0/);
    t.true((await send(tail)).ok);
  });
}

for (const [name, raw] of Object.entries(ACCEPTED)) {
  test.serial(`received, authentication checked: ${name}`, async (t) => {
    const res = await send(raw);
    t.true(res.ok, res.response);
  });
}
