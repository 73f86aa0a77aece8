import { spawn } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { dkimSign } from 'mailauth/lib/dkim/sign.js';
import { createDkimSigner, defaultSigningWorkers, MAX_BYTES_PER_WORKER, MAX_JOBS_PER_WORKER, type DkimSigner } from '../../../src/smtp/outbound/dkim-signer.js';
import { PrivateKeyCache, signMessage, SIGNED_HEADER_FIELDS } from '../../../src/smtp/outbound/dkim-sign-worker.js';
import { composeMessage } from '../../../src/smtp/outbound/mime-builder.js';
import { DOMAIN, generateRsaKey, plainMessage, SELECTOR, signatureTags, verifyDkim, type TestKey } from './fixtures/dkim-test-kit.js';

/** Deadline for the exit-check child; hitting it means a worker kept the process alive. */
const CHILD_EXIT_DEADLINE_MS = 15_000;
const CONCURRENT_SIGNS = 200;

// One key for the whole file: RSA-2048 generation costs tens of milliseconds.
const KEY = generateRsaKey();

function signerFor(t: ExecutionContext, workers: number, extra: { workerScript?: URL } = {}): DkimSigner {
  const signer = createDkimSigner({ workers, ...extra });
  t.teardown(() => signer.close());
  return signer;
}

async function assertVerdict(t: ExecutionContext, message: Buffer, expected: 'pass' | 'fail', keys: TestKey[] = [KEY]): Promise<void> {
  const results = await verifyDkim(message, keys);
  t.is(results.length, 1, 'one signature');
  t.is(results[0]!.status.result, expected, `${results[0]!.status.comment ?? ''} ${results[0]!.info}`);
}

for (const workers of [0, 1, 2]) {
  test(`workers: ${workers} - a signature that mailauth verifies as pass`, async (t) => {
    const signer = signerFor(t, workers);
    const message = plainMessage();
    const signed = await signer.sign(message, KEY);
    t.true(signed.toString('latin1').startsWith('DKIM-Signature: '));
    t.true(signed.subarray(signed.length - message.length).equals(message), 'the message follows the header unchanged');
    await assertVerdict(t, signed, 'pass');
  });
}

test('signature tags: rsa-sha256, relaxed/relaxed, d=, s=, t=, and From oversigned', async (t) => {
  const signer = signerFor(t, 0);
  const before = Math.floor(Date.now() / 1000);
  const tags = signatureTags(await signer.sign(plainMessage(), KEY));
  t.is(tags.get('v'), '1');
  t.is(tags.get('a'), 'rsa-sha256');
  t.is(tags.get('c'), 'relaxed/relaxed');
  t.is(tags.get('d'), DOMAIN);
  t.is(tags.get('s'), SELECTOR);
  const time = Number(tags.get('t'));
  t.true(time >= before && time <= before + 5);
  const h = tags.get('h')!.toLowerCase().split(':');
  // every present field of the list, bottom-up, then one From more than there are From fields
  t.deepEqual(h, ['content-type', 'mime-version', 'message-id', 'date', 'subject', 'to', 'from', 'from']);
});

test('h= covers every listed field present, each instance', async (t) => {
  const signer = signerFor(t, 0);
  const message = Buffer.from(
    [
      'From: hi@acme.test',
      'To: a@example.com',
      'To: b@example.com',
      'Cc: c@example.com',
      'Reply-To: r@acme.test',
      'Subject: s',
      'Date: Tue, 02 Jan 2024 03:04:05 +0000',
      'Message-ID: <x@acme.test>',
      'In-Reply-To: <p@example.com>',
      'References: <p@example.com>',
      'List-Unsubscribe: <https://acme.test/u>',
      'List-Unsubscribe-Post: List-Unsubscribe=One-Click',
      'TLS-Report-Domain: acme.test',
      'TLS-Report-Submitter: mx.acme.test',
      'X-Not-Signed: 1',
      'MIME-Version: 1.0',
      'Content-Type: text/plain',
      'Content-Transfer-Encoding: 7bit',
      '',
      'body',
      '',
    ].join('\r\n'),
  );
  const signed = await signer.sign(message, KEY);
  const h = signatureTags(signed).get('h')!.toLowerCase().split(':');
  for (const field of SIGNED_HEADER_FIELDS) t.true(h.includes(field), field);
  t.is(h.filter((f) => f === 'to').length, 2);
  t.is(h.filter((f) => f === 'from').length, 2);
  t.false(h.includes('x-not-signed'));
  await assertVerdict(t, signed, 'pass');
});

test('tampering: changed body, changed subject and an added From all fail', async (t) => {
  const signer = signerFor(t, 1);
  const signed = (await signer.sign(plainMessage({ body: 'Pay 10 EUR' }), KEY)).toString('latin1');
  // mailauth 4.13 reports a body hash mismatch as "neutral" (comment "body hash did not
  // verify"), not "fail"; either way the signature does not pass
  const bodyTampered = await verifyDkim(Buffer.from(signed.replace('Pay 10 EUR', 'Pay 99 EUR'), 'latin1'), [KEY]);
  t.is(bodyTampered[0]!.status.result, 'neutral');
  t.is(bodyTampered[0]!.status.comment, 'body hash did not verify');
  await assertVerdict(t, Buffer.from(signed.replace('Subject: Hello', 'Subject: Hellp'), 'latin1'), 'fail');
  // the oversigned From: a second From above the signed one breaks the signature (RFC 6376 8.15)
  const headerEnd = signed.indexOf('\r\nFrom: ');
  const withSecondFrom = signed.slice(0, headerEnd) + '\r\nFrom: ceo@acme.test' + signed.slice(headerEnd);
  await assertVerdict(t, Buffer.from(withSecondFrom, 'latin1'), 'fail');
  // unchanged, it still passes
  await assertVerdict(t, Buffer.from(signed, 'latin1'), 'pass');
});

test('without oversigning, a prepended From would have passed: this is what oversigning buys', async (t) => {
  const { signatureHeader, message } = signMessage(plainMessage(), KEY, new PrivateKeyCache(), { oversign: false });
  const signed = `${signatureHeader}\r\nFrom: ceo@acme.test\r\n${message.toString('latin1')}`;
  await assertVerdict(t, Buffer.from(signed, 'latin1'), 'pass');
});

test('without oversigning, the signature is byte-identical to mailauth dkimSign()', async (t) => {
  const signTime = new Date('2024-06-01T12:00:00Z');
  const message = await composeMessage({
    from: 'Acme <hi@acme.test>',
    to: ['bob@example.com'],
    cc: ['carol@example.com'],
    replyTo: ['help@acme.test'],
    subject: 'Parity',
    text: 'text body',
    html: '<p>html body</p>',
    headers: { 'List-Unsubscribe': '<https://acme.test/u>', 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' },
    attachments: [{ filename: 'a.txt', content: Buffer.from('attachment').toString('base64') }],
    messageId: '<parity@acme.test>',
    date: signTime,
    inReplyTo: '<p@example.com>',
    references: ['<p@example.com>'],
  });
  const ours = signMessage(message, KEY, new PrivateKeyCache(), { oversign: false, signTime }).signatureHeader;
  const theirs = await dkimSign(message, {
    // mailauth reads headerList only as a colon-separated string; an array (as its typings
    // suggest) is silently replaced by its default list
    headerList: SIGNED_HEADER_FIELDS.join(':') as unknown as string[],
    signTime,
    signatureData: [{ signingDomain: KEY.domain, selector: KEY.selector, privateKey: KEY.privateKey }],
  } as Parameters<typeof dkimSign>[1]);
  t.deepEqual(theirs.errors, []);
  t.is(ours + '\r\n', theirs.signatures);
});

for (const workers of [0, 1]) {
  test(`workers: ${workers} - composeAndSign makes an HTML-only message's text from textFromHtml, and goes HTML-only when the converter fails`, async (t) => {
    const signer = signerFor(t, workers);
    const input = (html: string) => ({ from: 'hi@acme.test', to: ['bob@example.com'], cc: [], replyTo: [], subject: 's', html, textFromHtml: html, headers: {}, attachments: [], messageId: `<t${workers}@acme.test>`, date: new Date() });
    const ordinary = await signer.composeAndSign(input('<p>Hello <b>there</b></p>'), KEY);
    await assertVerdict(t, ordinary, 'pass');
    t.regex(ordinary.toString('latin1'), /Content-Type: text\/plain[\s\S]*Hello there/);
    const deep = await signer.composeAndSign(input(`${'<div>'.repeat(20_000)}deep${'</div>'.repeat(20_000)}`), KEY);
    await assertVerdict(t, deep, 'pass');
    t.false(deep.toString('latin1').includes('text/plain'));
  });
}

test('composed message (attachments, non-ASCII headers) signs and verifies end to end', async (t) => {
  const signer = signerFor(t, 1);
  const message = await composeMessage({
    from: 'Acmé <hi@acme.test>',
    to: ['bob@example.com'],
    cc: [],
    replyTo: [],
    subject: 'Grüße',
    text: 'hello\n',
    html: '<p>hello</p>',
    headers: { 'X-Campaign': 'Été' },
    attachments: [{ filename: 'x.bin', content: Buffer.alloc(10_000, 7).toString('base64') }],
    messageId: '<e2e@acme.test>',
    date: new Date(),
  });
  await assertVerdict(t, await signer.sign(message, KEY), 'pass');
});

test('a PKCS#1 ("BEGIN RSA PRIVATE KEY") key works too', async (t) => {
  const pkcs1 = generateRsaKey({ format: 'pkcs1', selector: 'legacy' });
  t.true(pkcs1.privateKey.startsWith('-----BEGIN RSA PRIVATE KEY-----'));
  const signer = signerFor(t, 1);
  await assertVerdict(t, await signer.sign(plainMessage(), pkcs1), 'pass', [pkcs1]);
});

test('bare-LF input is signed as CRLF and returned as CRLF', async (t) => {
  const signer = signerFor(t, 1);
  const lf = Buffer.from(plainMessage().toString('latin1').replace(/\r\n/g, '\n'), 'latin1');
  const signed = await signer.sign(lf, KEY);
  t.false(/(^|[^\r])\n/.test(signed.toString('latin1')));
  await assertVerdict(t, signed, 'pass');
});

for (const workers of [0, 1]) {
  test(`workers: ${workers} - bad keys reject with a clear Error, and the signer keeps working`, async (t) => {
    const signer = signerFor(t, workers);
    const garbage = await t.throwsAsync(signer.sign(plainMessage(), { ...KEY, privateKey: '-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n' }));
    t.true(garbage instanceof Error);
    t.regex(garbage!.message, /^Invalid DKIM private key for ph2024\._domainkey\.acme\.test: /);

    await t.throwsAsync(signer.sign(plainMessage(), { ...KEY, privateKey: '' }), { message: /Invalid DKIM private key .*: empty/ });
    const short = generateRsaKey({ bits: 512 });
    await t.throwsAsync(signer.sign(plainMessage(), short), { message: /512-bit RSA, at least 1024 bits required/ });
    const ed = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    await t.throwsAsync(signer.sign(plainMessage(), { ...KEY, privateKey: ed }), { message: /ed25519 key, rsa-sha256 needs an RSA key/ });
    await t.throwsAsync(signer.sign(plainMessage(), { ...KEY, selector: 'a; h=from' }), { message: /Invalid DKIM selector/ });
    await t.throwsAsync(signer.sign(Buffer.from('To: x@y.z\r\n\r\nno from\r\n'), KEY), { message: /no From header/ });

    await assertVerdict(t, await signer.sign(plainMessage(), KEY), 'pass');
  });
}

test(`workers: 2 - ${CONCURRENT_SIGNS} concurrent sign() calls all verify, each with its own message`, async (t) => {
  const signer = signerFor(t, 2);
  const messages = Array.from({ length: CONCURRENT_SIGNS }, (_, i) => plainMessage({ subject: `Message ${i}`, body: `Body of message ${i}\r\n${'lorem ipsum '.repeat(200)}` }));
  const signed = await Promise.all(messages.map((m) => signer.sign(m, KEY)));
  const verdicts = await Promise.all(signed.map((s) => verifyDkim(s, [KEY])));
  t.is(verdicts.filter((r) => r[0]?.status.result === 'pass').length, CONCURRENT_SIGNS);
  signed.forEach((s, i) => t.true(s.subarray(s.length - messages[i]!.length).equals(messages[i]!), `message ${i} unchanged`));
});

test('workers: 1 - results come back in submission (FIFO) order', async (t) => {
  const signer = signerFor(t, 1);
  const order: number[] = [];
  await Promise.all(Array.from({ length: 20 }, (_, i) => signer.sign(plainMessage({ subject: `n${i}` }), KEY).then(() => order.push(i))));
  t.deepEqual(order, Array.from({ length: 20 }, (_, i) => i));
});

test('messages bigger than a worker may hold at once are still signed, one after the other', async (t) => {
  const signer = signerFor(t, 1);
  // each over half of MAX_BYTES_PER_WORKER: the worker takes the next only when it has none
  const body = 'x'.repeat(76) + '\r\n';
  const big = (i: number) => plainMessage({ subject: `big ${i}`, body: body.repeat(Math.ceil((MAX_BYTES_PER_WORKER * 0.6) / body.length)) });
  const signed = await Promise.all([0, 1, 2].map((i) => signer.sign(big(i), KEY)));
  for (const s of signed) await assertVerdict(t, s, 'pass');
});

test('the caller keeps its buffer: pooled and sliced inputs are copied, never detached', async (t) => {
  const signer = signerFor(t, 1);
  const pooled = Buffer.from(plainMessage().toString('latin1'), 'latin1'); // small: from the shared pool
  const big = Buffer.concat([Buffer.from('garbage before'), plainMessage(), Buffer.from('garbage after')]);
  const sliced = big.subarray(14, 14 + plainMessage().length);
  for (const input of [pooled, sliced]) {
    const copy = Buffer.from(input);
    const signed = await signer.sign(input, KEY);
    t.true(input.equals(copy), 'input intact');
    await assertVerdict(t, signed, 'pass');
  }
});

test('a crashing worker: its in-flight jobs reject, the worker is replaced, queued jobs still succeed', async (t) => {
  const signer = signerFor(t, 1, { workerScript: new URL('./fixtures/crashing-dkim-sign-worker.js', import.meta.url) });
  await assertVerdict(t, await signer.sign(plainMessage(), KEY), 'pass');
  const crash = signer.sign(plainMessage(), { ...KEY, domain: 'crash.test' });
  // more than one worker holds at once, so some of them wait in the queue for the replacement
  const after = Array.from({ length: MAX_JOBS_PER_WORKER + 5 }, (_, i) => signer.sign(plainMessage({ subject: `after ${i}` }), KEY));
  const err = await t.throwsAsync(crash);
  t.regex(err!.message, /DKIM sign worker exited unexpectedly \(exit code 1\): simulated worker crash/);
  // up to MAX_JOBS_PER_WORKER jobs (the crashing one included) share the crashed worker; the rest were queued and must pass
  const settled = await Promise.allSettled(after);
  const passed = settled.filter((s) => s.status === 'fulfilled');
  t.true(passed.length >= after.length - (MAX_JOBS_PER_WORKER - 1), `${passed.length} of ${after.length} signed after the crash`);
  for (const s of settled) if (s.status === 'rejected') t.regex((s.reason as Error).message, /exited unexpectedly/);
  await assertVerdict(t, await signer.sign(plainMessage(), KEY), 'pass');
});

test('a worker script that can not start fails the job with an Error, no respawn loop', async (t) => {
  const signer = signerFor(t, 1, { workerScript: new URL('./fixtures/does-not-exist.js', import.meta.url) });
  const err = await t.throwsAsync(signer.sign(plainMessage(), KEY));
  t.true(err instanceof Error);
  t.regex(err!.message, /could not start a worker|exited unexpectedly/);
});

test('close(): queued and in-flight jobs reject, later sign() rejects, close() is idempotent', async (t) => {
  const signer = createDkimSigner({ workers: 1 });
  const pending = Array.from({ length: 10 }, () => signer.sign(plainMessage(), KEY));
  await signer.close();
  const settled = await Promise.allSettled(pending);
  for (const s of settled) if (s.status === 'rejected') t.regex((s.reason as Error).message, /DKIM signer is closed/);
  t.true(settled.some((s) => s.status === 'rejected'));
  await t.throwsAsync(signer.sign(plainMessage(), KEY), { message: 'DKIM signer is closed' });
  await t.notThrowsAsync(signer.close());
});

test('workers must be a non-negative integer', (t) => {
  t.throws(() => createDkimSigner({ workers: -1 }), { instanceOf: RangeError });
  t.throws(() => createDkimSigner({ workers: 1.5 }), { instanceOf: RangeError });
});

test('close() lets the process exit', async (t) => {
  const signerUrl = new URL('../../../src/smtp/outbound/dkim-signer.js', import.meta.url).href;
  // Keep the process busy after close() with nothing but a sign that must still reject:
  // the exit shows that no worker thread is left holding the event loop.
  const script = `
    import { createDkimSigner } from ${JSON.stringify(signerUrl)};
    import { generateKeyPairSync } from 'node:crypto';
    const privateKey = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' });
    const key = { domain: 'acme.test', selector: 's', privateKey };
    const msg = Buffer.from('From: a@acme.test\\r\\nTo: b@example.com\\r\\nSubject: x\\r\\n\\r\\nbody\\r\\n');
    const signer = createDkimSigner({ workers: 2 });
    await Promise.all([signer.sign(msg, key), signer.sign(msg, key), signer.sign(msg, key)]);
    const inFlight = signer.sign(msg, key).catch((err) => err.message);
    await signer.close();
    console.log('closed', await inFlight);
  `;
  const started = Date.now();
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const code = await new Promise<number | null>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`child did not exit within ${CHILD_EXIT_DEADLINE_MS} ms: ${out}`));
    }, CHILD_EXIT_DEADLINE_MS);
    child.on('exit', (c) => {
      clearTimeout(timer);
      resolve(c);
    });
  });
  t.is(code, 0, out);
  t.regex(out, /^closed /);
  t.true(Date.now() - started < CHILD_EXIT_DEADLINE_MS);
});

test('the default pool leaves the main thread a core: one less worker than cores, at least 1, at most 8', (t) => {
  t.deepEqual([1, 2, 3, 4, 9, 64].map((cores) => defaultSigningWorkers(cores)), [1, 1, 2, 3, 8, 8]);
});
