import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import test from 'ava';
import { startTestApp, storeEnvOf } from '../helpers/test-app.js';
import { tempDir } from '../helpers/temp-dir.js';
import { runPosthornCli, type CliEnded } from '../helpers/cli-child.js';
import { startDnsZone } from '../helpers/dns-zone.js';
import { loopbackEnv, startPosthorn } from '../proof/helpers/posthorn-process.js';
import { ConsoleClient } from '../console/helpers/console-client.js';

// `posthorn users ...` as an operator types it, and what `posthorn serve` says on a first start.

const run = promisify(execFile);
const BIN = fileURLToPath(new URL('../../../bin/posthorn', import.meta.url));
/** The CLI's environment: the data dir's store (its PostgreSQL database when the tests run on PostgreSQL). */
const env = async (dataDir: string) => ({ PATH: process.env.PATH!, POSTHORN_DNS_SERVERS: '127.0.0.1:9', ...(await storeEnvOf(dataDir)) });

async function cli(dataDir: string, ...args: string[]) {
  return run(process.execPath, [BIN, ...args], { env: await env(dataDir) });
}

/** Runs the CLI with `input` on standard input. */
async function cliWithInput(dataDir: string, input: string, ...args: string[]): Promise<CliEnded> {
  return runPosthornCli(args, { env: await env(dataDir), input });
}

test('users create prints a generated password once; --password-stdin reads one; list, reset-password and delete work and say so', async (t) => {
  const dataDir = tempDir(t, 'posthorn-users-');
  const team = (await cli(dataDir, 'teams', 'create', '--name', 'Acme')).stdout.trim();
  const created = await cli(dataDir, 'users', 'create', '--email', 'Ops@Acme.example', '--team', team, '--operator');
  t.regex(created.stdout, /created console user 1 ops@acme\.example \(operator, team 1\)/);
  const password = /password \(shown only now\):\n(\S+)\n/.exec(created.stdout)![1]!;
  t.true(password.length >= 20);

  const piped = await cliWithInput(dataDir, 'a passphrase from a pipe\nignored second line\n', 'users', 'create', '--email', 'dev@acme.example', '--team', team, '--password-stdin');
  t.is(piped.code, 0, piped.stderr);
  t.notRegex(piped.stdout, /password/);

  const list = (await cli(dataDir, 'users', 'list')).stdout;
  t.regex(list, /ops@acme\.example\s+1\s+yes/);
  t.regex(list, /dev@acme\.example\s+1\s+no/);
  t.false(list.includes(password));

  // The passwords work against a running console.
  const app = await startTestApp({ dataDir });
  try {
    t.is((await new ConsoleClient(app.baseUrl).signIn('ops@acme.example', password)).status, 303);
    t.is((await new ConsoleClient(app.baseUrl).signIn('dev@acme.example', 'a passphrase from a pipe')).status, 303);
    // The CLI hashes at the product's cost (the test app's own cheaper one is for its users only).
    const stored = await app.app.store.db.selectFrom('console_users').select('password_hash').execute();
    t.is(stored.length, 2);
    for (const { password_hash } of stored) t.regex(password_hash, /^scrypt\$15\$8\$1\$/);
  } finally {
    await app.stop();
  }

  const reset = await cli(dataDir, 'users', 'reset-password', 'dev@acme.example');
  t.regex(reset.stdout, /new password set for dev@acme\.example; its sessions were ended/);
  t.regex(reset.stdout, /password \(shown only now\):\n\S{20,}\n/);
  t.regex((await cli(dataDir, 'users', 'delete', 'dev@acme.example')).stdout, /deleted console user 2 dev@acme\.example/);
  t.notRegex((await cli(dataDir, 'users', 'list')).stdout, /dev@acme/);
});

test('users commands refuse bad input with a message and a non-zero exit', async (t) => {
  const dataDir = tempDir(t, 'posthorn-users-');
  await cli(dataDir, 'teams', 'create', '--name', 'Acme');
  const badTeam = await t.throwsAsync(cli(dataDir, 'users', 'create', '--email', 'a@acme.example', '--team', '7'));
  t.regex((badTeam as any).stderr, /team 7 not found/);
  const short = await cliWithInput(dataDir, 'short\n', 'users', 'create', '--email', 'a@acme.example', '--team', '1', '--password-stdin');
  t.is(short.code, 1);
  t.regex(short.stderr, /at least 10 characters/);
  await cli(dataDir, 'users', 'create', '--email', 'a@acme.example', '--team', '1');
  const dup = await t.throwsAsync(cli(dataDir, 'users', 'create', '--email', 'A@acme.example', '--team', '1'));
  t.regex((dup as any).stderr, /already exists/);
  const missing = await t.throwsAsync(cli(dataDir, 'users', 'delete', 'who@acme.example'));
  t.regex((missing as any).stderr, /console user who@acme\.example not found/);
});

test('the first start prints the key and a command that creates the first console user from any directory; once one exists, it does not', async (t) => {
  const dataDir = tempDir(t, 'posthorn-serve-');
  const zone = await startDnsZone();
  t.teardown(() => zone.close());
  const configFile = join(tempDir(t, 'posthorn-serve-config-'), 'posthorn.toml');
  writeFileSync(configFile, '');
  const storeEnv = await storeEnvOf(dataDir);
  // The server's public URL comes from its environment (as from a systemd EnvironmentFile), which
  // the command below does not have.
  const processEnv = { ...loopbackEnv({ dataDir, dnsServer: zone.server, sinkPort: 9 }), ...storeEnv, POSTHORN_PUBLIC_URL: 'https://mail.example.test' };
  const first = await startPosthorn({ env: processEnv, configFile, expectKey: true });
  let command: string;
  try {
    await first.waitForOutput(/users create --email/);
    const hint = /No console user exists yet\. Create the first one[^\n]*\/console:\n\n {2}(.+ users create --email you@example\.com --team 1 --operator)\n/.exec(first.output());
    t.truthy(hint, first.output());
    command = hint![1]!;
  } finally {
    await first.kill();
  }
  t.true(command.includes(`--config ${configFile}`), command);
  // As printed, from another directory, without this data directory in the environment (the
  // CLI is not on PATH in a checkout; ./data would be another store). A PostgreSQL store's URL
  // is the operator's to give, as to the server.
  const elsewhere = tempDir(t, 'posthorn-elsewhere-');
  const { POSTHORN_DATA_DIR: _own, ...pgOnly } = storeEnv;
  const created = await run('sh', ['-c', command], { cwd: elsewhere, env: { PATH: process.env.PATH!, POSTHORN_DNS_SERVERS: '127.0.0.1:9', ...pgOnly } });
  t.regex(created.stdout, /created console user 1 you@example\.com \(operator, team 1\)/);
  t.regex(created.stdout, /^sign in at https:\/\/mail\.example\.test\/console$/m, 'the address the server gave, not one of its own');
  const second = await startPosthorn({ env: processEnv, configFile });
  try {
    t.notRegex(second.output(), /No console user exists yet/);
    t.notRegex(second.output(), /ph_[0-9a-z]{12}_/);
  } finally {
    await second.kill();
  }
});

test('on HTTP port 0 the first start says where to sign in with the port it listens on, and so does users create', async (t) => {
  const dataDir = tempDir(t, 'posthorn-serve-');
  const zone = await startDnsZone();
  t.teardown(() => zone.close());
  const storeEnv = await storeEnvOf(dataDir);
  // No POSTHORN_PUBLIC_URL: derived from the listener, whose port 0 is not where anyone can sign in.
  const server = await startPosthorn({ env: { ...loopbackEnv({ dataDir, dnsServer: zone.server, sinkPort: 9 }), ...storeEnv }, expectKey: true });
  try {
    await server.waitForOutput(/users create --email/);
    t.regex(server.output(), new RegExp(`sign in at http://127\\.0\\.0\\.1:${server.port}/console:`), server.output());
    const created = await cli(dataDir, 'users', 'create', '--email', 'ops@acme.example', '--team', '1', '--operator');
    t.regex(created.stdout, new RegExp(`^sign in at http://127\\.0\\.0\\.1:${server.port}/console$`, 'm'));
  } finally {
    await server.kill();
  }
});
