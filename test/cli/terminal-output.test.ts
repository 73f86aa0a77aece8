import test from 'ava';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { startMailWorld, sendBody } from '../helpers/mail-world.js';
import { storeEnvOf } from '../helpers/test-app.js';

// What the CLI prints for people comes partly from others: a remote MX's replies (queue, queue
// trace) and the names team users give their keys through the API (keys list). Control
// characters in them reach the operator's terminal as visible escapes, never as commands to it
// (ESC sequences that rewrite the screen, set the title, or write the clipboard).

const run = promisify(execFile);
const BIN = fileURLToPath(new URL('../../../bin/posthorn', import.meta.url));
const HOSTILE = '\x1b]0;owned\x07\x1b[2J\x1b[1;1Hall good\x9b2J';
const CONTROL = /[\x00-\x08\x0b-\x1f\x7f\x9b]/;

test('keys list prints control characters in a key name a team user chose as visible escapes; queue and its trace stay clean', async (t) => {
  const w = await startMailWorld({ sink: { onRcpt: (a) => (a.startsWith('evil@') ? { code: 451, message: `4.7.1 ${HOSTILE}try later` } : undefined) } });
  t.teardown(() => w.close());
  const sent = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'evil@example.net' }) });
  t.is(sent.status, 200);
  await w.settle();
  const key = await w.t0.request('POST', '/v1/apiKeys', { body: { name: `ci ${HOSTILE}`, permission: 'SENDING' } });
  t.is(key.status, 200);

  const env = { PATH: process.env.PATH!, POSTHORN_DNS_SERVERS: '127.0.0.1:9', ...(await storeEnvOf(w.t0.dataDir)) };
  const cli = async (...args: string[]) => (await run(process.execPath, [BIN, ...args], { env })).stdout;
  // (The SMTP side already turns a reply's control characters into spaces.)
  const trace = await cli('queue', 'trace', sent.body.emailId);
  t.regex(trace, /4\.7\.1 /, 'the reply is shown');
  t.false(CONTROL.test(trace), JSON.stringify(trace));
  for (const args of [['queue'], ['queue', 'messages'], ['keys', 'list']]) {
    const out = await cli(...args);
    t.false(CONTROL.test(out), `${args.join(' ')}: ${JSON.stringify(out)}`);
  }
  t.regex(await cli('keys', 'list'), /ci \\x1b\]0;owned/);
});

test('a remote reply is printed with its code once: queue, queue messages and queue trace', async (t) => {
  const w = await startMailWorld({ sink: { onRcpt: () => ({ code: 451, message: '4.2.0 try again later' }) } });
  t.teardown(() => w.close());
  const sent = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'later@example.net' }) });
  t.is(sent.status, 200);
  await w.settle();
  const env = { PATH: process.env.PATH!, POSTHORN_DNS_SERVERS: '127.0.0.1:9', ...(await storeEnvOf(w.t0.dataDir)) };
  const cli = async (...args: string[]) => (await run(process.execPath, [BIN, ...args], { env })).stdout;
  for (const args of [['queue'], ['queue', 'messages'], ['queue', 'trace', sent.body.emailId]]) {
    const out = await cli(...args);
    t.regex(out, /451 4\.2\.0 try again later/, args.join(' '));
    t.false(out.includes('451 451'), `${args.join(' ')}: ${out}`);
  }
});
