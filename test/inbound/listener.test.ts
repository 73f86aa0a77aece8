import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { X509Certificate } from 'node:crypto';
import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { rawSession, smtpSend } from './helpers/smtp-client.js';

// The inbound listener as a remote MTA (or an attacker) sees it: greeting, STARTTLS, limits,
// relay refusal, and malformed SMTP and MIME that must never take it down.

let t0: TestApp;
let port: number;
const MAX_BYTES = 64 * 1024;

test.before(async () => {
  t0 = await startTestApp({ makeListenerCert: true, overrides: { inbound: { maxMessageBytes: MAX_BYTES, maxRecipients: 3, maxConnections: 4 } } });
  port = t0.app.listeners.inbound!.port;
  await addVerifiedDomain(t0, 'sender.dev');
  const inbox = await addVerifiedDomain(t0, 'inbox.dev');
  const patched = await t0.request('PATCH', `/v1/domains/${inbox.id}`, { body: { receiving: true } });
  if (patched.status !== 200) throw new Error(JSON.stringify(patched.body));
});
test.after.always(async () => {
  await t0?.close();
});

const MESSAGE = 'From: a@remote.example\r\nTo: b@inbox.dev\r\nSubject: hi\r\n\r\nhello\r\n';

test.serial('greets and answers EHLO as the configured hostname, offering STARTTLS and SIZE, never AUTH', async (t) => {
  const s = await rawSession(port);
  t.regex(await s.reply(), /^220 mx\.posthorn\.test /);
  const ehlo = await s.command('EHLO mta.remote.test');
  t.regex(ehlo, /^250-mx\.posthorn\.test/);
  t.regex(ehlo, /STARTTLS/);
  t.regex(ehlo, new RegExp(`SIZE ${MAX_BYTES}`));
  t.notRegex(ehlo, /AUTH/);
  await s.command('QUIT');
  s.close();
});

test.serial('the listener is on /health and its generated certificate is kept in <dataDir>/tls', async (t) => {
  const health = await t0.request('GET', '/health', { key: null });
  t.is(health.body.listeners.inbound.port, port);
  t.is(health.body.listeners.submission.port, t0.app.listeners.submission!.port);
  const certPath = join(t0.dataDir, 'tls', 'self-signed-cert.pem');
  t.true(existsSync(certPath));
  t.is(statSync(join(t0.dataDir, 'tls', 'self-signed-key.pem')).mode & 0o077, 0, 'the private key is readable by its owner only');
  t.is(new X509Certificate(readFileSync(certPath)).checkHost('mx.posthorn.test'), 'mx.posthorn.test');
});

test.serial('relay attempts are refused at RCPT with 550 5.7.1: foreign domains, our domains without receiving, our own hostname', async (t) => {
  for (const to of ['victim@gmail.com', 'someone@sender.dev', 'root@mx.posthorn.test', 'x@bounces.inbox.dev.evil.com', 'user@[127.0.0.1]']) {
    const res = await smtpSend({ port, from: 'spammer@evil.example', to: [to], raw: MESSAGE });
    t.false(res.ok, to);
    t.regex(res.rcptErrors[0] ?? res.response, /^550 5\.7\.1 /, to);
  }
  // Mixed: the relay recipient is refused, the receiving domain's is taken.
  const mixed = await smtpSend({ port, from: 'a@remote.example', to: ['victim@gmail.com', 'b@inbox.dev'], raw: MESSAGE });
  t.true(mixed.ok);
  t.deepEqual(mixed.accepted, ['b@inbox.dev']);
  t.deepEqual(mixed.rejected, ['victim@gmail.com']);
});

test.serial('the complaint address is accepted, over plaintext too', async (t) => {
  const res = await smtpSend({ port, from: 'fbl@isp.example', to: ['complaints@mx.posthorn.test'], raw: MESSAGE, plaintext: true });
  t.true(res.ok, res.response);
  t.false(res.secure);
});

test.serial('a message over the size limit is refused with 552 and nothing is stored', async (t) => {
  const before = (await t0.request('GET', '/v1/receivedEmails')).body.total;
  const big = `From: a@remote.example\r\nTo: b@inbox.dev\r\nSubject: big\r\n\r\n${'x'.repeat(998)}\r\n`.repeat(1).concat(`${'y'.repeat(76)}\r\n`.repeat(1200));
  const res = await smtpSend({ port, from: 'a@remote.example', to: ['b@inbox.dev'], raw: big });
  t.false(res.ok);
  t.is(res.responseCode, 552);
  t.is((await t0.request('GET', '/v1/receivedEmails')).body.total, before);
});

test.serial('more recipients than allowed get 452 (RFC 5321 4.5.3.1.10)', async (t) => {
  const to = ['r1@inbox.dev', 'r2@inbox.dev', 'r3@inbox.dev', 'r4@inbox.dev'];
  const res = await smtpSend({ port, from: 'a@remote.example', to, raw: MESSAGE });
  t.true(res.ok);
  t.deepEqual(res.accepted, to.slice(0, 3));
  t.regex(res.rcptErrors[0]!, /^452 /);
});

test.serial('connections beyond the limit are told 421 and closed', async (t) => {
  const held = await Promise.all([rawSession(port), rawSession(port), rawSession(port), rawSession(port)]);
  for (const s of held) t.regex(await s.reply(), /^220 /);
  const extra = await rawSession(port);
  t.regex(await extra.reply(), /^421 /);
  for (const s of [...held, extra]) s.close();
  // Once they are gone the listener takes connections again.
  for (let i = 0; i < 50; i++) {
    const s = await rawSession(port);
    const greeting = await s.reply();
    s.close();
    if (greeting.startsWith('220')) return t.pass();
    await new Promise((r) => setTimeout(r, 20));
  }
  t.fail('the listener never recovered');
});

test.serial('malformed SMTP never crashes the listener', async (t) => {
  const s = await rawSession(port);
  await s.reply();
  t.regex(await s.command('HELLO?'), /^5\d\d /);
  t.regex(await s.command('MAIL FROM:<a@b>'), /^503 /, 'MAIL before EHLO');
  await s.command('EHLO x');
  t.regex(await s.command('RCPT TO:<b@inbox.dev>'), /^503 /, 'RCPT before MAIL');
  t.regex(await s.command('MAIL FROM:<<<>>>'), /^5\d\d /);
  t.regex(await s.command('DATA'), /^503 /, 'DATA without recipients');
  s.write(Buffer.from([0, 1, 2, 0xff, 0xfe, 0x0d, 0x0a]));
  t.regex(await s.reply(), /^5\d\d /);
  s.write(`${'A'.repeat(70_000)}\r\n`); // far over the command line limit
  await s.reply().catch(() => '');
  s.close();

  // Binary garbage before the greeting, then a half-open STARTTLS with no handshake.
  const early = await rawSession(port);
  early.write('EHLO too-soon\r\nMAIL FROM:<x@y>\r\n');
  await early.reply().catch(() => '');
  early.close();
  const tlsHalf = await rawSession(port);
  await tlsHalf.reply();
  await tlsHalf.command('EHLO x');
  t.regex(await tlsHalf.command('STARTTLS'), /^220 /);
  tlsHalf.write('this is not a TLS ClientHello\r\n\r\n');
  tlsHalf.close();

  const after = await smtpSend({ port, from: 'a@remote.example', to: ['b@inbox.dev'], raw: MESSAGE });
  t.true(after.ok, 'still serving mail');
});

test.serial('garbage MIME is accepted, stored and readable through the API without a 5xx', async (t) => {
  const garbage = [
    Buffer.from([0x00, 0xff, 0x13, 0x37, 0x0d, 0x0a, 0x2e, 0x2e, 0x0d, 0x0a]),
    Buffer.from('Content-Type: multipart/mixed; boundary="never-closed"\r\nSubject: =?utf-8?B?!!!notbase64?=\r\n\r\n--never-closed\r\nContent-Type: text/plain; charset=x-unknown-charset\r\nContent-Transfer-Encoding: base64\r\n\r\n@@@@not base64@@@@\r\n'),
    Buffer.from('no headers at all, just a line\r\n'),
    Buffer.from('Content-Type: multipart/report; report-type=delivery-status; boundary=b\r\n\r\n--b\r\nContent-Type: message/delivery-status\r\n\r\nFinal-Recipient: ;;;\r\nAction\r\n: \r\n--b--\r\n'),
  ];
  for (const raw of garbage) {
    const res = await smtpSend({ port, from: '', to: ['b@inbox.dev', 'complaints@mx.posthorn.test'], raw });
    t.true(res.ok, res.response);
    const queued = /queued as (.*)$/.exec(res.response)![1]!.split(' ').find((id) => id.startsWith('re_'))!;
    const got = await t0.request('GET', `/v1/receivedEmails/${queued}`);
    t.is(got.status, 200);
    const rawRes = await t0.request('GET', `/v1/receivedEmails/${queued}/raw`);
    t.is(rawRes.status, 200);
    t.is(rawRes.headers.get('content-type'), 'message/rfc822');
  }
});

test.serial('a port that cannot be bound leaves that listener off and logged, and the API still runs', async (t) => {
  const second = await startTestApp({ overrides: { inbound: { port } } });
  t.teardown(() => second.close());
  t.is(second.app.listeners.inbound, undefined);
  t.truthy(second.app.listeners.submission);
  const health = await second.request('GET', '/health', { key: null });
  t.is(health.status, 200);
  t.is(health.body.listeners.inbound, undefined);
  // The first app's listener is unaffected.
  t.true((await smtpSend({ port, from: 'a@remote.example', to: ['b@inbox.dev'], raw: MESSAGE })).ok);
});
