import test, { type ExecutionContext } from 'ava';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempDir } from '../helpers/temp-dir.js';
import { LOOPBACK_LISTENERS_ENV, refused } from '../helpers/port-probe.js';

// A command that cannot start says why in one line and exits non-zero: never a process left
// running with part of it up (an HTTP API answering /health with no engine behind it), deaf to
// SIGTERM, nor an admin command that printed its error and never returned.

const BIN = fileURLToPath(new URL('../../../bin/posthorn', import.meta.url));
const MODULE_HOOKS = fileURLToPath(new URL('./fixtures/module-hooks.js', import.meta.url));

interface Ended {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

function runPosthorn(t: ExecutionContext, env: Record<string, string>, ...args: string[]): Promise<Ended> {
  return runNode(t, [], env, ...args);
}

function runNode(t: ExecutionContext, nodeArgs: string[], env: Record<string, string>, ...args: string[]): Promise<Ended> {
  const child = spawn(process.execPath, [...nodeArgs, BIN, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      PATH: process.env.PATH!,
      POSTHORN_DNS_SERVERS: '127.0.0.1:9',
      ...LOOPBACK_LISTENERS_ENV,
      ...env,
    },
  });
  // A process that hangs is not left behind by its failed test.
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr })));
}

/** One `posthorn: ...` line on stderr and no stack trace. */
function oneErrorLine(t: ExecutionContext, stderr: string, pattern: RegExp): void {
  const lines = stderr.split('\n').filter((l) => l.startsWith('posthorn: '));
  t.true(lines.length === 1 && pattern.test(lines[0]!), stderr);
  t.false(/\n\s+at /.test(stderr), stderr);
}

test('serve on an HTTP port that is taken exits 1 with the reason', async (t) => {
  t.timeout(30_000); // a bound on the hang this test exists for, never a wait
  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  t.teardown(() => taken.close());
  const port = (taken.address() as AddressInfo).port;
  const ended = await runPosthorn(t, { POSTHORN_DATA_DIR: tempDir(t, 'posthorn-start-'), POSTHORN_HTTP_PORT: String(port) }, 'serve');
  t.is(ended.code, 1, ended.stderr);
  oneErrorLine(t, ended.stderr, new RegExp(`the HTTP API cannot listen on 127\\.0\\.0\\.1:${port} \\(EADDRINUSE\\): another process .*POSTHORN_HTTP_PORT`));
});

test('serve whose TLS file is missing puts down the HTTP API it had started and exits 1', async (t) => {
  t.timeout(30_000);
  const ended = await runPosthorn(
    t,
    { POSTHORN_DATA_DIR: tempDir(t, 'posthorn-start-'), POSTHORN_INBOUND_CERT_FILE: '/nonexistent/cert.pem', POSTHORN_INBOUND_KEY_FILE: '/nonexistent/key.pem' },
    'serve',
  );
  t.is(ended.code, 1, ended.stderr);
  oneErrorLine(t, ended.stderr, /\/nonexistent\/(cert|key)\.pem/);
  // It had listened for HTTP before it read the certificate: that port is closed again.
  const port = Number(/HTTP API listening on 127\.0\.0\.1:(\d+)/.exec(ended.stdout)?.[1]);
  t.true(port > 0, ended.stdout);
  t.true(await refused(port));
  t.regex(ended.stdout, /"msg":"stopped"/);
});

test('an admin command whose configuration names a missing CA file exits 1 with the reason', async (t) => {
  t.timeout(30_000);
  const ended = await runPosthorn(t, { POSTHORN_DATA_DIR: tempDir(t, 'posthorn-start-'), POSTHORN_OUTBOUND_CA_FILE: '/nonexistent/ca.pem' }, 'teams', 'create', '--name', 'Acme');
  t.is(ended.code, 1, ended.stderr);
  oneErrorLine(t, ended.stderr, /\/nonexistent\/ca\.pem/);
});

test('serve with the same missing CA file exits 1 too', async (t) => {
  t.timeout(30_000);
  const ended = await runPosthorn(t, { POSTHORN_DATA_DIR: tempDir(t, 'posthorn-start-'), POSTHORN_OUTBOUND_CA_FILE: '/nonexistent/ca.pem' }, 'serve');
  t.is(ended.code, 1, ended.stderr);
  oneErrorLine(t, ended.stderr, /\/nonexistent\/ca\.pem/);
});

// A package missing from the installation (a partial copy, an interrupted npm ci) fails serve
// before it opens the store: not when the first request or message needs it, and with no store
// made in a data directory it may never have run in. Admin commands never load these (admin-modules.test.ts).
for (const missing of ['koa', 'prom-client']) {
  test(`serve with ${missing} missing from the installation exits 1 before it opens the store`, async (t) => {
    t.timeout(30_000);
    const dataDir = tempDir(t, 'posthorn-start-');
    const ended = await runNode(t, ['--import', MODULE_HOOKS], { POSTHORN_DATA_DIR: dataDir, MODULE_MISSING: missing }, 'serve');
    t.is(ended.code, 1, ended.stderr);
    oneErrorLine(t, ended.stderr, new RegExp(`Cannot find package '${missing}'`));
    t.false(existsSync(join(dataDir, 'posthorn.db')), 'no store was made');
  });
}

// An http.host that is no address (a URL pasted in) stops serve before anything opens, with the
// key named and exit 78 (EX_CONFIG): not "posthorn: Invalid URL" from the public URL derived from it.
test('serve with an http.host that is no address exits 78 naming the setting', async (t) => {
  t.timeout(30_000);
  const ended = await runPosthorn(t, { POSTHORN_DATA_DIR: tempDir(t, 'posthorn-start-'), POSTHORN_HTTP_HOST: 'http://0.0.0.0' }, 'serve');
  t.is(ended.code, 78, ended.stderr);
  oneErrorLine(t, ended.stderr, /http\.host \(POSTHORN_HTTP_HOST\): "http:\/\/0\.0\.0\.0" is a URL/);
});

// An address this machine does not have (192.0.2.0/24 is TEST-NET-1: never assigned): the bind
// fails, and the line says which listener's settings to change.
test('serve on an HTTP address this machine does not have names http.host', async (t) => {
  t.timeout(30_000);
  const ended = await runPosthorn(t, { POSTHORN_DATA_DIR: tempDir(t, 'posthorn-start-'), POSTHORN_HTTP_HOST: '192.0.2.77' }, 'serve');
  t.is(ended.code, 1, ended.stderr);
  oneErrorLine(t, ended.stderr, /cannot listen on 192\.0\.2\.77:0 .*EADDRNOTAVAIL.*http\.host \(POSTHORN_HTTP_HOST\)/);
});
