import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import test from 'ava';
import { simpleParser } from 'mailparser';
import { createTransport } from 'nodemailer';
import SMTPConnection from 'nodemailer/lib/smtp-connection';
import type SMTPTransport from 'nodemailer/lib/smtp-transport';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { waitForStatus } from '../inbound/helpers/inbound-world.js';

// SMTP submission (RFC 6409) with an API key as the password, through nodemailer: the same
// send path as the API, so messages are DKIM-signed and delivered to the recipients' MX.

let w: MailWorld;
let port: number;
let ca: string;

test.before(async () => {
  w = await startMailWorld();
  port = w.t0.app.listeners.submission!.port;
  // Clients must trust the server: the generated certificate is pinned as the CA.
  ca = readFileSync(join(w.t0.dataDir, 'tls', 'self-signed-cert.pem'), 'utf8');
});
test.after.always(async () => {
  await w?.close();
});

function transport(pass: string, extra: Partial<SMTPTransport.Options> = {}) {
  return createTransport({
    host: '127.0.0.1',
    port,
    secure: false,
    requireTLS: true,
    tls: { ca, servername: 'mx.posthorn.test' },
    auth: { user: 'apikey', pass },
    ...extra,
  } as SMTPTransport.Options);
}

async function sendError(p: Promise<unknown>): Promise<SMTPConnection.SMTPError> {
  try {
    await p;
  } catch (err) {
    return err as SMTPConnection.SMTPError;
  }
  throw new Error('expected the send to fail');
}

test.serial('a submitted message is queued, DKIM-signed and delivered like an API send; the reply carries the email id', async (t) => {
  const before = w.sink.messages.length;
  const tx = transport(w.t0.key);
  const info = await tx.sendMail({
    from: 'Sender <hello@sender.dev>',
    to: 'Alice <alice@example.net>',
    cc: 'carol@example.org',
    bcc: 'bob@example.net',
    replyTo: 'support@sender.dev',
    subject: 'Submitted über SMTP',
    text: 'Plain body',
    html: '<p>HTML <b>body</b></p>',
    headers: { 'X-Campaign': 'spring', 'X-Posthorn-Email-ID': 'em_forged' },
    attachments: [{ filename: 'report.csv', content: 'a,b\n1,2\n' }],
  });
  tx.close();
  const m = /^250 2\.0\.0 Ok: queued as (em_[0-9a-z]{9}[A-Za-z0-9]{21})$/.exec(info.response);
  t.truthy(m, info.response);
  const emailId = m![1]!;

  const email = await waitForStatus(w, emailId, 'DELIVERED');
  t.is(email.from, 'Sender <hello@sender.dev>');
  t.is(email.to, 'Alice <alice@example.net>');
  t.is(email.cc, 'carol@example.org');
  t.is(email.bcc, 'bob@example.net', 'envelope recipients in neither To nor Cc are Bcc');
  t.is(email.subject, 'Submitted über SMTP');

  const delivered = w.sink.messages.slice(before);
  t.is(delivered.length, 3, 'one transaction per recipient');
  const toNet = delivered.find((d) => d.rcptTo.includes('alice@example.net'))!;
  t.deepEqual(toNet.rcptTo, ['alice@example.net']);
  t.regex(toNet.mailFrom, new RegExp(`^bounces\\+${emailId}_[0-9a-f]{12}@bounces\\.sender\\.dev$`));
  t.is(await w.dkimStatus(toNet.raw), 'pass');
  const parsed = await simpleParser(toNet.raw);
  t.is(parsed.subject, 'Submitted über SMTP');
  t.is(parsed.headers.get('x-campaign'), 'spring');
  t.is(parsed.headers.get('x-posthorn-email-id'), emailId, 'engine-owned headers cannot be forged through submission');
  t.is(parsed.headers.get('bcc'), undefined);
  t.regex(parsed.text ?? '', /Plain body/);
  t.regex(String(parsed.html), /HTML <b>body<\/b>/);
  t.is(parsed.attachments[0]?.filename, 'report.csv');
  t.is(parsed.attachments[0]?.content.toString(), 'a,b\n1,2\n');
  t.is(parsed.replyTo?.value[0]?.address, 'support@sender.dev');
});

test.serial('a submitted message\'s own Bcc, Message-ID, Date, DKIM-Signature, Return-Path, Received and results are not sent on: the blind recipient only in RCPT TO, one DKIM signature (ours) that passes', async (t) => {
  const before = w.sink.messages.length;
  const raw = [
    'Return-Path: <forged@evil.example>',
    'Received: from evil.example by evil.example; Mon, 1 Jan 2001 00:00:00 +0000',
    'DKIM-Signature: v=1; a=rsa-sha256; d=evil.example; s=x; h=from; bh=x; b=x',
    'Authentication-Results: mx.example.net; dkim=pass; spf=pass',
    // A resent block naming another domain's sender: left out, as every field but X- ones is.
    'Resent-From: CEO <ceo@evil.example>',
    'Resent-Sender: ceo@evil.example',
    'Resent-Message-ID: <resent@evil.example>',
    'Message-ID: <forged@evil.example>',
    'Date: Mon, 1 Jan 2001 00:00:00 +0000',
    'From: Sender <hello@sender.dev>',
    'To: Alice <alice@example.net>',
    'Bcc: Hidden <hidden@example.net>',
    'Subject: Raw submission',
    // An encoded CRLF stays encoded; a raw U+2028 (8-bit header) is written as an encoded word.
    'X-Encoded: =?utf-8?q?a=0D=0ABcc:_x@evil.example?=',
    'X-Sep: a\u2028X-Injected: 1',
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=utf-8',
    '',
    'Body',
    '',
  ].join('\r\n');
  const tx = transport(w.t0.key);
  const info = await tx.sendMail({ envelope: { from: 'hello@sender.dev', to: ['alice@example.net', 'hidden@example.net'] }, raw: Buffer.from(raw, 'utf8') });
  tx.close();
  const emailId = /queued as (em_\w+)/.exec(info.response)![1]!;
  await waitForStatus(w, emailId, 'DELIVERED');
  const delivered = w.sink.messages.slice(before);
  t.is(delivered.length, 2);
  t.deepEqual(delivered.map((d) => d.rcptTo).flat().sort(), ['alice@example.net', 'hidden@example.net']);
  for (const d of delivered) {
    const text = d.raw.toString('latin1');
    const head = text.slice(0, text.indexOf('\r\n\r\n'));
    for (const line of head.split('\r\n')) {
      t.regex(line, /^([ \t]|[!-9;-~]+:)/);
      t.true(Buffer.byteLength(line) <= 998);
    }
    t.notRegex(head, /^(Bcc|Return-Path|Received|Authentication-Results|Resent-[!-9;-~]*|X-Injected):/im);
    t.notRegex(head, /hidden@example\.net|evil\.example>|2001/i);
    t.is(head.match(/^DKIM-Signature:/gim)?.length, 1);
    t.regex(head, /^DKIM-Signature:[^]*?\bd=sender\.dev;/m);
    t.is(await w.dkimStatus(d.raw), 'pass');
    const parsed = await simpleParser(d.raw);
    t.not(parsed.messageId, '<forged@evil.example>');
    t.is(parsed.bcc, undefined);
    t.is(parsed.headers.get('x-encoded'), '=?utf-8?q?a=0D=0ABcc:_x@evil.example?=', 'passed on as written: still one field');
    // One encoded word of the UTF-8 the client wrote (read as bytes, it was sent on as "aâ\u0080¨...").
    t.is(parsed.headers.get('x-sep'), '=?UTF-8?Q?a=E2=80=A8X-Injected=3A_1?=');
  }
});

test.serial('AUTH before STARTTLS is refused and the key never crosses in the clear', async (t) => {
  const err = await sendError(transport(w.t0.key, { requireTLS: false, ignoreTLS: true }).sendMail({ from: 'hello@sender.dev', to: 'a@example.net', subject: 's', text: 't' }));
  t.is(err.code, 'EAUTH');
  t.is(err.responseCode, 538);
});

test.serial('bad credentials get 535 5.7.8', async (t) => {
  const revoked = await w.t0.app.services.apiKeys.create(w.t0.teamId, { name: 'gone', permission: 'FULL' });
  await w.t0.app.services.apiKeys.revoke(revoked.id, w.t0.teamId);
  for (const pass of ['ph_000000000000_notARealSecretAtAll1234', 'not a key', `${w.t0.key}x`, revoked.token]) {
    const err = await sendError(transport(pass).sendMail({ from: 'hello@sender.dev', to: 'a@example.net', subject: 's', text: 't' }));
    t.is(err.code, 'EAUTH', pass);
    t.is(err.responseCode, 535, pass);
    t.regex(err.response ?? '', /^535 5\.7\.8 /);
  }
  // AUTH LOGIN (the other mechanism) answers the same way.
  const login = await sendError(transport('wrong', { authMethod: 'LOGIN' }).sendMail({ from: 'hello@sender.dev', to: 'a@example.net', subject: 's', text: 't' }));
  t.is(login.responseCode, 535);
});

test.serial('MAIL without AUTH gets 530 5.7.0', async (t) => {
  const err = await sendError(transport('', { auth: undefined }).sendMail({ from: 'hello@sender.dev', to: 'a@example.net', subject: 's', text: 't' }));
  t.is(err.responseCode, 530);
  t.regex(err.response ?? '', /^530 5\.7\.0 Authentication required/);
});

test.serial('the key\'s rules apply: SENDING may send, a domain-bound key only from its domain, only verified team domains', async (t) => {
  const sending = await w.t0.app.services.apiKeys.create(w.t0.teamId, { name: 'smtp sending', permission: 'SENDING' });
  const ok = await transport(sending.token).sendMail({ from: 'hello@sender.dev', to: 'a@example.net', subject: 's', text: 't' });
  t.regex(ok.response, /^250 2\.0\.0 Ok: queued as em_/);

  const other = await addVerifiedDomain(w.t0, 'second.dev');
  const bound = await w.t0.app.services.apiKeys.create(w.t0.teamId, { name: 'bound', permission: 'SENDING', domainId: other.id });
  const refused = await sendError(transport(bound.token).sendMail({ from: 'hello@sender.dev', to: 'a@example.net', subject: 's', text: 't' }));
  t.is(refused.responseCode, 550);
  t.regex(refused.response ?? '', /^550 5\.7\.1 this API key may only send from domain/);
  const own = await transport(bound.token).sendMail({ from: 'hello@second.dev', to: 'a@example.net', subject: 's', text: 't' });
  t.regex(own.response, /^250 /);

  const foreign = await sendError(transport(w.t0.key).sendMail({ from: 'ceo@bank.com', to: 'a@example.net', subject: 's', text: 't' }));
  t.is(foreign.responseCode, 550);
  t.regex(foreign.response ?? '', /^550 5\.7\.1 domain bank\.com is not a domain of this team/);
});

test.serial('invalid messages are refused with a 5xx that says why', async (t) => {
  const noSubject = await sendError(transport(w.t0.key).sendMail({ from: 'hello@sender.dev', to: 'a@example.net', text: 't' }));
  t.is(noSubject.responseCode, 550);
  t.regex(noSubject.response ?? '', /^550 5\.6\.0 Subject:/);
  const bccOnly = await sendError(transport(w.t0.key).sendMail({ from: 'hello@sender.dev', bcc: 'hidden@example.net', subject: 's', text: 't' }));
  t.regex(bccOnly.response ?? '', /^550 5\.6\.0 To:/);
  // RFC 5321 4.5.3.1.10: the recipient over the limit gets 452; the rest are taken.
  const many = await transport(w.t0.key).sendMail({ from: 'hello@sender.dev', to: Array.from({ length: 101 }, (_, i) => `r${i}@example.org`), subject: 's', text: 't' });
  t.is(many.accepted.length, 100);
  t.deepEqual(many.rejected, ['r100@example.org']);
  t.regex(many.response, /^250 2\.0\.0 Ok: queued as em_/);
});

test.serial('custom headers the API would refuse do not cost the message: past the first 50, or an unbroken run too long to fold, they are left out and the rest is sent', async (t) => {
  const before = w.sink.messages.length;
  const words = Array.from({ length: 900 }, (_, i) => `w${i}`);
  const lines = [
    'From: hello@sender.dev',
    'To: many-headers@example.net',
    'Subject: From a mail client',
    `X-Unbroken: ${'a'.repeat(950)}`,
    `X-Too-Long: ${words.map((word, i) => (i % 20 === 19 && i < words.length - 1 ? `${word}\r\n` : word)).join(' ')}`,
    ...Array.from({ length: 55 }, (_, i) => `X-H${i + 1}: v${i + 1}`),
    'X-H1: repeated, the first wins',
  ];
  const info = await transport(w.t0.key).sendMail({ envelope: { from: 'hello@sender.dev', to: ['many-headers@example.net'] }, raw: `${lines.join('\r\n')}\r\n\r\nbody\r\n` });
  const emailId = /queued as (em_\S+)$/.exec(info.response)?.[1];
  t.truthy(emailId, info.response);
  await waitForStatus(w, emailId!, 'DELIVERED');
  const parsed = await simpleParser(w.sink.messages.slice(before).find((m) => m.rcptTo.includes('many-headers@example.net'))!.raw);
  t.is(parsed.headers.get('x-h1'), 'v1');
  t.is(parsed.headers.get('x-h50'), 'v50');
  t.is(parsed.headers.get('x-h51'), undefined, 'past the first 50');
  t.is(parsed.headers.get('x-unbroken'), undefined);
  t.is(parsed.headers.get('x-too-long'), undefined);
  t.is(parsed.subject, 'From a mail client');
  // The API's own rules are unchanged: the same headers in a send are refused.
  const api = await w.t0.request('POST', '/v1/emails', { body: { from: 'hello@sender.dev', to: 'a@example.net', subject: 's', text: 't', headers: { 'X-Unbroken': 'a'.repeat(950) } } });
  t.is(api.status, 400);
  const many = await w.t0.request('POST', '/v1/emails', { body: { from: 'hello@sender.dev', to: 'a@example.net', subject: 's', text: 't', headers: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`X-H${i}`, 'v'])) } });
  t.is(many.status, 400);
});

test.serial('a NUL character or an unpaired surrogate in the subject, an address or a body of a submitted message is refused with 550 5.6.0 naming the field, as the API refuses it, on either store', async (t) => {
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ subject: 'a\0b', text: 't' }, /^550 5\.6\.0 subject: must not contain the NUL character/],
    [{ subject: 's', text: 'one\0two' }, /^550 5\.6\.0 text: must not contain the NUL character/],
    [{ subject: 's', html: '<p>x\0y</p>' }, /^550 5\.6\.0 html: must not contain the NUL character/],
  ];
  const before = (await w.t0.request('GET', '/v1/emails?limit=100')).body.data.length;
  for (const [fields, expected] of cases) {
    const err = await sendError(transport(w.t0.key).sendMail({ from: 'hello@sender.dev', to: 'a@example.net', ...fields }));
    t.regex(err.response ?? '', expected, JSON.stringify(fields));
  }
  // Half a character: a UTF-16 encoded word of a lone high surrogate, in the subject and a recipient's name.
  const lone = `=?UTF-16LE?B?${Buffer.from([0x00, 0xd8, 0x41, 0x00]).toString('base64')}?=`;
  for (const [raw, expected] of [
    [`From: hello@sender.dev\r\nTo: a@example.net\r\nSubject: ${lone}\r\n\r\nbody\r\n`, /^550 5\.6\.0 subject: must be Unicode text: an unpaired surrogate/],
    [`From: hello@sender.dev\r\nTo: ${lone} <a@example.net>\r\nSubject: s\r\n\r\nbody\r\n`, /^550 5\.6\.0 to\[0\]: must be Unicode text/],
  ] as const) {
    const err = await sendError(transport(w.t0.key).sendMail({ envelope: { from: 'hello@sender.dev', to: ['a@example.net'] }, raw }));
    t.regex(err.response ?? '', expected, raw);
  }
  t.is((await w.t0.request('GET', '/v1/emails?limit=100')).body.data.length, before, 'nothing was stored');
});

test.serial('a key deleted mid-session stops working at the next message', async (t) => {
  const key = await w.t0.app.services.apiKeys.create(w.t0.teamId, { name: 'short-lived', permission: 'FULL' });
  const conn = new SMTPConnection({ host: '127.0.0.1', port, requireTLS: true, tls: { ca, servername: 'mx.posthorn.test' } });
  await new Promise<void>((resolve, reject) => conn.connect((err) => (err ? reject(err) : resolve())));
  await new Promise<void>((resolve, reject) => conn.login({ user: 'apikey', pass: key.token }, (err) => (err ? reject(err) : resolve())));
  const raw = 'From: hello@sender.dev\r\nTo: a@example.net\r\nSubject: one\r\n\r\nbody\r\n';
  const send = () =>
    new Promise<{ err?: SMTPConnection.SMTPError; response?: string }>((resolve) =>
      conn.send({ from: 'hello@sender.dev', to: ['a@example.net'] }, raw, (err, info) => resolve(err ? { err } : { response: info.response })),
    );
  t.regex((await send()).response ?? '', /^250 /);
  await w.t0.app.services.apiKeys.revoke(key.id, w.t0.teamId);
  const second = await send();
  t.is(second.err?.responseCode, 535);
  conn.quit();
});

test('each submitted message counts one request against the team rate limit: 451 4.7.0 beyond it', async (t) => {
  const clock = new ManualClock();
  const app: TestApp = await startTestApp({ clock });
  t.teardown(() => app.close());
  await addVerifiedDomain(app, 'limited.dev');
  // The team's own limit (the API's per-team override) applies to submission too.
  await app.app.services.teams.setRateLimit(app.teamId, 2);
  const appCa = readFileSync(join(app.dataDir, 'tls', 'self-signed-cert.pem'), 'utf8');
  const tx = createTransport({
    host: '127.0.0.1',
    port: app.app.listeners.submission!.port,
    requireTLS: true,
    pool: true, // one connection for all messages
    maxConnections: 1,
    tls: { ca: appCa, servername: 'mx.posthorn.test' },
    auth: { user: 'apikey', pass: app.key },
  } as SMTPTransport.Options);
  t.teardown(() => tx.close());
  const mail = { from: 'hello@limited.dev', to: 'a@example.net', subject: 's', text: 't' };
  // Domain setup above used API requests in this same (frozen) second: start a fresh window.
  clock.advance(1000);
  t.regex((await tx.sendMail(mail)).response, /^250 /);
  t.regex((await tx.sendMail(mail)).response, /^250 /);
  const limited = await sendError(tx.sendMail(mail));
  t.is(limited.responseCode, 451);
  t.regex(limited.response ?? '', /^451 4\.7\.0 rate limit of 2 messages per second exceeded/);
  clock.advance(1000);
  t.regex((await tx.sendMail(mail)).response, /^250 /);
});
