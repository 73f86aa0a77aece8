import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import test from 'ava';
import { createTransport } from 'nodemailer';
import type SMTPTransport from 'nodemailer/lib/smtp-transport';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { smtpSend } from '../inbound/helpers/smtp-client.js';
import { until } from '../helpers/until.js';

// intakeMemoryMb, through each door a body comes in by: an API request, a submitted message and
// an inbound one are read, then wait for room in the shared budget before they are parsed and
// stored (that part takes a few times their size in memory), and go on once there is room; while
// they wait, those past the memory for received bodies wait in spool files.

let t0: TestApp;
test.before(async () => {
  t0 = await startTestApp({ overrides: { intakeMemoryMb: 1 } });
  await addVerifiedDomain(t0, 'sender.dev');
  const inbox = await addVerifiedDomain(t0, 'inbox.dev');
  const res = await t0.request('PATCH', `/v1/domains/${inbox.id}`, { body: { receiving: true } });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
});
test.after.always(async () => {
  await t0?.close();
});

/** Holds the whole budget while `arrive` starts; the work waits until it is let go, then completes. */
async function whileFull<T>(t: { is: (a: unknown, b: unknown, m?: string) => void }, arrive: () => Promise<T>): Promise<T> {
  const intake = t0.app.intake.budget;
  await intake.acquire(intake.limitBytes);
  let settled = false;
  const work = arrive().finally(() => (settled = true));
  await until(() => intake.queued === 1);
  t.is(settled, false, 'it waits for room');
  intake.release(intake.limitBytes);
  const result = await work;
  t.is(intake.inUse, 0);
  return result;
}

const text = 'A long newsletter line, repeated. '.repeat(3000);

test.serial('an API request waits for room, then is answered', async (t) => {
  const res = await whileFull(t, () => t0.request('POST', '/v1/emails', { body: { from: 'hello@sender.dev', to: 'a@example.net', subject: 'Waited', text } }));
  t.is(res.status, 200, JSON.stringify(res.body));
});

test.serial('a body larger than the whole budget is taken alone', async (t) => {
  const big = 'x'.repeat(1_200_000);
  const res = await t0.request('POST', '/v1/emails', { body: { from: 'hello@sender.dev', to: 'a@example.net', subject: 'Big', text: big } });
  t.is(res.status, 200, JSON.stringify(res.body).slice(0, 200));
  t.is(t0.app.intake.budget.inUse, 0);
});

test.serial('a submitted message waits for room, then gets its 250', async (t) => {
  const ca = readFileSync(join(t0.dataDir, 'tls', 'self-signed-cert.pem'), 'utf8');
  const tx = createTransport({
    host: '127.0.0.1',
    port: t0.app.listeners.submission!.port,
    secure: false,
    requireTLS: true,
    tls: { ca, servername: 'mx.posthorn.test' },
    auth: { user: 'apikey', pass: t0.key },
  } as SMTPTransport.Options);
  const info = await whileFull(t, () => tx.sendMail({ from: 'hello@sender.dev', to: 'a@example.net', subject: 'Submitted', text }));
  t.regex(info.response, /^250 .*queued as em_/);
});

test.serial('an inbound message waits for room, then gets its 250', async (t) => {
  const raw = `From: someone@partner.test\r\nTo: desk@inbox.dev\r\nSubject: Hello\r\nMessage-ID: <1@partner.test>\r\n\r\n${text}\r\n`;
  const res = await whileFull(t, () => smtpSend({ port: t0.app.listeners.inbound!.port, from: 'someone@partner.test', to: ['desk@inbox.dev'], raw }));
  t.true(res.ok, res.response);
  t.regex(res.response, /^250 /);
});

test.serial('bodies past the memory for waiting ones wait in spool files, then arrive whole', async (t) => {
  const { budget, spool } = t0.app.intake;
  await budget.acquire(budget.limitBytes);
  // Four bodies of ~450 KB where the memory for them is 1 MB: some must go to files.
  const texts = ['a', 'b', 'c'].map((c, i) => `${c}${i} `.repeat(150_000));
  const sends = texts.map((text) => t0.request('POST', '/v1/emails', { body: { from: 'hello@sender.dev', to: 'a@example.net', subject: 'Spooled', text } }));
  const line = 'An inbound line of a long message, to be kept intact.\r\n';
  const raw = `From: someone@partner.test\r\nTo: desk@inbox.dev\r\nSubject: Spooled\r\nMessage-ID: <2@partner.test>\r\n\r\n${line.repeat(8000)}`;
  const inbound = smtpSend({ port: t0.app.listeners.inbound!.port, from: 'someone@partner.test', to: ['desk@inbox.dev'], raw });
  await until(() => budget.queued === 4);
  t.true(spool.filesOpen >= 1, `${spool.filesOpen} bodies in files`);
  t.true(spool.memoryBytes <= spool.memoryLimitBytes);
  t.is(readdirSync(join(t0.dataDir, 'spool')).length, spool.filesOpen);
  budget.release(budget.limitBytes);
  const answers = await Promise.all(sends);
  for (const [i, res] of answers.entries()) {
    t.is(res.status, 200, JSON.stringify(res.body).slice(0, 200));
    const stored = await t0.request('GET', `/v1/emails/${(res.body as { emailId: string }).emailId}`);
    t.is((stored.body as { text: string }).text, texts[i]);
  }
  const received = await inbound;
  t.true(received.ok, received.response);
  t.is(spool.memoryBytes, 0);
  t.is(spool.filesOpen, 0);
  await until(() => readdirSync(join(t0.dataDir, 'spool')).length === 0);
});
