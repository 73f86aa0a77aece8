import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import test from 'ava';
import fc from 'fast-check';
import { createTransport } from 'nodemailer';
import MailComposer from 'nodemailer/lib/mail-composer';
import type SMTPTransport from 'nodemailer/lib/smtp-transport';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { sendAndDeliver, quotedHeaders, waitForStatus, type DeliveredEmail } from '../inbound/helpers/inbound-world.js';
import { fixture, smtpSend } from '../inbound/helpers/smtp-client.js';
import { baseSeed, fcParams } from './helpers/fuzz-config.js';
import { watchProcess } from './helpers/http-probe.js';
import { smtpSession, type Step } from './helpers/smtp-arbitraries.js';
import { SmtpScript } from './helpers/smtp-script.js';

// Raw garbage to both SMTP listeners (fast-check generates the sessions): random bytes,
// commands out of order with hostile arguments, NUL and 8-bit, over-long lines, pipelined
// nonsense, AUTH with garbage, STARTTLS then garbage, MAIL/RCPT floods, broken, deeply nested
// and oversized DATA, and connections dropped mid-command and mid-DATA. Every line the server
// sends is a well-formed reply, none is a local error (4.3.0, the SMTP face of a 5xx), every
// session ends in a clean close, nothing escapes as an unhandled error, and afterwards real
// mail still goes through both listeners.

const MAX_MESSAGE_BYTES = 256 * 1024; // lowered from 30 MiB so "over the limit" stays cheap
const BATCHES = 50;
const CONCURRENCY = 3; // sessions per batch on average

let w: MailWorld;
let watch: ReturnType<typeof watchProcess>;
let delivered: DeliveredEmail;
let ca: string;

test.before(async () => {
  watch = watchProcess();
  // Every hostile session comes from 127.0.0.1 and many fail AUTH with wrong keys: the address
  // lockout (client-ip-limits.test.ts) would refuse the sessions after them and the real mail at
  // the end, so it is off here.
  w = await startMailWorld({ overrides: { inbound: { maxMessageBytes: MAX_MESSAGE_BYTES }, submission: { maxMessageBytes: MAX_MESSAGE_BYTES, authFailureLimit: 0 } } });
  const res = await w.t0.request('PATCH', `/v1/domains/${w.domain.id}`, { body: { receiving: true } });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  delivered = await sendAndDeliver(w, { to: 'alice@example.net' });
  ca = readFileSync(join(w.t0.dataDir, 'tls', 'self-signed-cert.pem'), 'utf8');
});
test.after.always(async () => {
  watch?.stop();
  await w?.close();
});

function compose(opts: Record<string, unknown>): Promise<Buffer> {
  return new Promise((resolve, reject) => new MailComposer(opts).compile().build((err, msg) => (err ? reject(err) : resolve(msg))));
}

const b64 = (s: string) => Buffer.from(s, 'latin1').toString('base64');

/** Submission takes AUTH only over TLS (RFC 4954 4): STARTTLS first, then a new EHLO (RFC 3207 4.2). */
async function secureForAuth(s: SmtpScript, submission: boolean): Promise<void> {
  if (!submission || s.secure || s.inData) return;
  await s.commands(Buffer.from('STARTTLS'));
  if (s.secure) await s.commands(Buffer.from('EHLO fuzz.remote.test'));
}

async function runStep(s: SmtpScript, step: Step, key: string, submission: boolean): Promise<void> {
  switch (step.kind) {
    case 'lines':
      await s.commands(step.text);
      return;
    case 'pipeline':
      await s.pipeline(step.text);
      return;
    case 'bytes':
      s.write(step.bytes);
      return;
    case 'envelope':
      await s.commands(Buffer.from(`MAIL FROM:${step.from}${step.params ? ' ' + step.params : ''}`, 'latin1'));
      for (const r of step.rcpt) {
        if (s.closed || s.inData) return;
        await s.commands(Buffer.from(`RCPT TO:${r}`, 'latin1'));
      }
      return;
    case 'data':
      if (!s.inData) await s.commands(Buffer.from('DATA'));
      if (!s.inData) return;
      s.write(step.body);
      if (step.end === 'dot') await s.endData();
      else s.abort();
      return;
    case 'starttls':
      await s.commands(Buffer.from('STARTTLS'));
      return;
    case 'starttls-garbage': {
      if (s.secure || s.inData) return s.commands(Buffer.from('STARTTLS')).then(() => undefined);
      s.write('STARTTLS\r\n');
      const r = await s.reply();
      if (r && /^220/.test(r[r.length - 1]!)) {
        // not a TLS ClientHello, then end of input: the handshake fails and the server must hang up
        // (a few bytes alone are a partial record it rightly waits on, up to its idle timeout)
        s.write(step.bytes);
        await s.drainTls();
      }
      return;
    }
    case 'auth-garbage':
      await secureForAuth(s, submission);
      await s.commands(step.lines);
      return;
    case 'auth-valid':
      await secureForAuth(s, submission);
      if (step.method === 'PLAIN') await s.commands(Buffer.from(`AUTH PLAIN ${b64(`\0apikey\0${key}`)}`));
      else await s.commands(Buffer.from(`AUTH LOGIN\r\n${b64('apikey')}\r\n${b64(key)}`));
      return;
    case 'abort':
      s.write(step.partial);
      s.abort();
      return;
  }
}

/** What is wrong with a finished session, or null. */
function sessionProblem(s: SmtpScript): string | null {
  if (s.malformed.length) return `lines that are not SMTP replies: ${JSON.stringify(s.malformed.slice(0, 3))}`;
  // 4.3.0 is what a local failure (an exception, the SMTP face of a 500) is answered with;
  // 454 4.7.0 the same during AUTH.
  const local = s.lines.filter((l) => /^\d{3}[ -]4\.3\.0/.test(l) || /^454[ -]4\.7\.0/.test(l));
  if (local.length) return `local-error replies: ${JSON.stringify(local.slice(0, 3))}`;
  return null;
}

function describeSteps(steps: Step[]): string {
  return JSON.stringify(
    steps.map((st) => {
      const shown: Record<string, unknown> = { ...st };
      for (const k of ['text', 'bytes', 'body', 'partial'] as const) {
        const v = (st as Record<string, unknown>)[k];
        if (Buffer.isBuffer(v)) shown[k] = v.length > 300 ? `${v.length} bytes: ${v.subarray(0, 200).toString('latin1')}...` : v.toString('latin1');
      }
      if (st.kind === 'envelope' && st.rcpt.length > 6) shown.rcpt = `${st.rcpt.length} recipients, first ${st.rcpt[0]}`;
      return shown;
    }),
  );
}

async function fuzzListener(t: import('ava').ExecutionContext, name: 'inbound' | 'submission', recipients: string[], templates: Buffer[]) {
  const port = w.t0.app.listeners[name]!.port;
  const stats = { sessions: 0, steps: 0, replies: 0, tls: 0, queued: 0 };
  // smtp-server holds every greeting back 100 ms (it refuses early talkers), so sessions run
  // a few at a time: each fast-check run is a batch of concurrent sessions.
  const session = smtpSession({ recipients, templates, maxMessageBytes: MAX_MESSAGE_BYTES, submission: name === 'submission' });
  const batch = fc.array(session, { minLength: 1, maxLength: 2 * CONCURRENCY - 1 }).map((sessions) => Object.assign(sessions, { [fc.toStringMethod]: () => sessions.map(describeSteps).join('\n') }));
  const property = fc.asyncProperty(batch, async (sessions) => {
    const problems = await Promise.all(
      sessions.map(async (steps) => {
        const s = await SmtpScript.connect(port);
        for (const step of steps) {
          if (s.closed) break;
          await runStep(s, step, w.t0.key, name === 'submission');
          stats.steps++;
        }
        await s.finish();
        stats.sessions++;
        stats.replies += s.lines.length;
        if (s.secure) stats.tls++;
        stats.queued += s.lines.filter((l) => /^250 .*queued as/.test(l)).length;
        const problem = sessionProblem(s);
        return problem && `${problem}\n  last lines: ${JSON.stringify(s.lines.slice(-6))}\n  session: ${describeSteps(steps).slice(0, 2000)}`;
      }),
    );
    const bad = problems.filter(Boolean);
    if (bad.length) throw new Error(bad.join('\n'));
  });
  const details = await fc.check(property, fcParams(`smtp ${name}`, BATCHES));
  const error = (details.errorInstance as Error | undefined)?.message ?? '';
  t.false(details.failed, `seed ${details.seed}, path "${details.counterexamplePath}": ${error.slice(0, 4000)}`);
  t.log(`base seed ${baseSeed()}: ${stats.sessions} ${name} sessions, ${stats.steps} steps, ${stats.replies} reply lines, ${stats.tls} went TLS, ${stats.queued} messages accepted`);
}

test.serial('the inbound listener survives hostile sessions: well-formed replies only, no local errors, clean closes', async (t) => {
  const label = /@([^.]+)\./.exec(delivered.returnPath)![1]!;
  const values = {
    RETURN_PATH: delivered.returnPath,
    RECIPIENT: 'alice@example.net',
    ORIGINAL: delivered.raw.toString(),
    ORIGINAL_HEADERS: quotedHeaders(delivered.raw),
    ORIGINAL_REDACTED: quotedHeaders(delivered.raw, ['To']),
    MESSAGE_ID: delivered.messageId,
    REPORT_TO: 'complaints@mx.posthorn.test',
    SUBJECT: delivered.subject,
  };
  const templates = [
    fixture('postfix-dsn-user-unknown.eml', values),
    fixture('gmail-dsn-no-such-user.eml', values),
    fixture('yahoo-arf-abuse.eml', values),
    await compose({ from: 'Partner <p@partner.test>', to: 'inbox@sender.dev', subject: 'Hello', text: 'Body', html: '<p>Body</p>', attachments: [{ filename: 'a.txt', content: 'x' }] }),
  ];
  const recipients = ['inbox@sender.dev', delivered.returnPath, `bounces@${label}.sender.dev`, 'complaints@mx.posthorn.test', 'unsubscribe+garbage@mx.posthorn.test', 'nobody@elsewhere.test'];
  await fuzzListener(t, 'inbound', recipients, templates);
});

test.serial('the submission listener survives hostile sessions: well-formed replies only, no local errors, clean closes', async (t) => {
  const templates = [
    await compose({ from: 'Sender <hello@sender.dev>', to: 'Alice <alice@example.net>', cc: 'carol@example.org', subject: 'Submitted', text: 'Body', headers: { 'X-Campaign': 'fuzz' }, attachments: [{ filename: 'a.csv', content: 'a,b\n' }] }),
    Buffer.from('From: hello@sender.dev\r\nTo: alice@example.net\r\nSubject: plain\r\n\r\nhi\r\n'),
  ];
  await fuzzListener(t, 'submission', ['alice@example.net', 'carol@example.org', 'hello@sender.dev'], templates);
});

test.serial('afterwards real mail still goes through: inbound stores a received mail and a bounce, submission delivers to the MX', async (t) => {
  const nonce = Math.random().toString(36).slice(2);
  // inbound: mail for the receiving domain is stored
  const inbound = await smtpSend({ port: w.t0.app.listeners.inbound!.port, from: 'p@partner.test', to: ['inbox@sender.dev'], raw: `From: p@partner.test\r\nTo: inbox@sender.dev\r\nSubject: after the fuzz ${nonce}\r\n\r\nstill here\r\n` });
  t.true(inbound.ok, inbound.response);
  const list = await w.t0.request('GET', '/v1/receivedEmails?limit=100');
  t.true(list.body.receivedEmails.some((e: { subject?: string }) => e.subject === `after the fuzz ${nonce}`), 'the received mail is listed');

  // inbound: a bounce for a fresh email marks it bounced
  const fresh = await sendAndDeliver(w, { to: `fresh-${nonce}@example.net` });
  const dsn = fixture('postfix-dsn-user-unknown.eml', { RETURN_PATH: fresh.returnPath, RECIPIENT: `fresh-${nonce}@example.net`, ORIGINAL: fresh.raw.toString() });
  const bounce = await smtpSend({ port: w.t0.app.listeners.inbound!.port, from: '', to: [fresh.returnPath], raw: dsn });
  t.true(bounce.ok, bounce.response);
  await waitForStatus(w, fresh.id, 'BOUNCED');

  // submission: accepted, then delivered to the sink
  const before = w.sink.messages.length;
  const tx = createTransport({ host: '127.0.0.1', port: w.t0.app.listeners.submission!.port, secure: false, requireTLS: true, tls: { ca, servername: 'mx.posthorn.test' }, auth: { user: 'apikey', pass: w.t0.key } } as SMTPTransport.Options);
  const info = await tx.sendMail({ from: 'hello@sender.dev', to: `after-${nonce}@example.org`, subject: `submitted after the fuzz ${nonce}`, text: 'ok' });
  tx.close();
  const id = /queued as (em_\w+)/.exec(info.response)?.[1];
  t.truthy(id, info.response);
  await waitForStatus(w, id!, 'DELIVERED');
  t.true(w.sink.messages.slice(before).some((m) => m.rcptTo.includes(`after-${nonce}@example.org`)));

  const health = await w.t0.request('GET', '/health');
  t.is(health.status, 200);
  t.deepEqual(watch.problems, []);
});
