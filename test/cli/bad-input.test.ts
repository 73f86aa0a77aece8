import test, { type ExecutionContext } from 'ava';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { storeEnvOf } from '../helpers/test-app.js';
import { tempDir } from '../helpers/temp-dir.js';

// Bad input on the command line: a one-line `posthorn: ...` naming what is wrong and a non-zero
// exit, never a stack trace, a database's own error or a silent wrong result, and nothing changed.

const BIN = fileURLToPath(new URL('../../../bin/posthorn', import.meta.url));

interface Ended {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The CLI on the data dir's store (its PostgreSQL database when the tests run on PostgreSQL). */
async function cli(dataDir: string, args: string[], env: Record<string, string> = {}, cwd?: string): Promise<Ended> {
  const childEnv = { PATH: process.env.PATH!, POSTHORN_DNS_SERVERS: '127.0.0.1:9', ...(await storeEnvOf(dataDir)), ...env };
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: childEnv, cwd });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end();
  });
}

async function ok(t: ExecutionContext, dataDir: string, args: string[], env: Record<string, string> = {}): Promise<string> {
  const r = await cli(dataDir, args, env);
  t.is(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

/** Refused: exit `code`, stderr one line `posthorn: ...` matching `pattern`, nothing on stdout. */
async function refused(t: ExecutionContext, dataDir: string, args: string[], pattern: RegExp, opts: { env?: Record<string, string>; code?: number; cwd?: string } = {}): Promise<void> {
  const r = await cli(dataDir, args, opts.env, opts.cwd);
  const what = `posthorn ${args.map((a) => JSON.stringify(a)).join(' ')}`;
  t.is(r.code, opts.code ?? 1, `${what} exits ${opts.code ?? 1}; stderr: ${r.stderr}`);
  t.is(r.stdout, '', `${what} prints no result`);
  const lines = r.stderr.trimEnd().split('\n');
  t.is(lines.length, 1, `${what} says one line: ${r.stderr}`);
  t.regex(lines[0]!, /^posthorn: /, what);
  t.regex(lines[0]!, pattern, what);
}

test('an empty option value is refused, never taken for the option left out', async (t) => {
  const dataDir = tempDir(t, 'posthorn-bad-input-');
  await ok(t, dataDir, ['teams', 'create', '--name', 'Acme']);
  await refused(t, dataDir, ['keys', 'create', '--name', 'k', '--domain', ''], /--domain must be/);
  await refused(t, dataDir, ['keys', 'create', '--name', 'k', '--team', ''], /--team must be/);
  await refused(t, dataDir, ['teams', 'create', '--name', 'Beta', '--rate-limit', ''], /--rate-limit must be/);
  await refused(t, dataDir, ['domains', 'add', 'bad-input.dev', '--team', ''], /--team must be/);
  await refused(t, dataDir, ['domains', 'list', '--team', ''], /--team must be/);
  await refused(t, dataDir, ['send', '--from', 'a@bad-input.dev', '--to', 'b@example.com', '--subject', 's', '--text', 't', '--team', ''], /--team must be/);
  await refused(t, dataDir, ['--config', '', 'teams', 'list'], /--config/, { code: 78 });
  // Nothing was made by the refused commands.
  t.notRegex(await ok(t, dataDir, ['keys', 'list']), /\bk\b/);
  t.notRegex(await ok(t, dataDir, ['teams', 'list']), /Beta/);
  t.notRegex(await ok(t, dataDir, ['domains', 'list']), /bad-input\.dev/);
});

test('a number out of range is refused before it reaches the store: 0, negative, huge', async (t) => {
  const dataDir = tempDir(t, 'posthorn-bad-input-');
  await ok(t, dataDir, ['teams', 'create', '--name', 'Acme']);
  const range = /must be a whole number from 1 to 2147483647/;
  await refused(t, dataDir, ['queue', 'messages', '--limit', '0'], /--limit must be/);
  await refused(t, dataDir, ['queue', 'messages', '--limit', '99999999999999999999999'], /--limit must be/);
  await refused(t, dataDir, ['keys', 'revoke', '99999999999999999999999'], range);
  await refused(t, dataDir, ['keys', 'revoke', '0'], range);
  await refused(t, dataDir, ['queue', 'purge', '99999999999999999999999'], range);
  await refused(t, dataDir, ['queue', 'retry', '-3'], range);
  await refused(t, dataDir, ['teams', 'set-rate-limit', '99999999999999999999999', '5'], range);
  await refused(t, dataDir, ['domains', 'list', '--team', '3000000000'], range);
});

test('a --team that does not exist is named, and nothing is held or sent for it', async (t) => {
  const dataDir = tempDir(t, 'posthorn-bad-input-');
  await ok(t, dataDir, ['teams', 'create', '--name', 'Acme']);
  await refused(t, dataDir, ['domains', 'list', '--team', '9'], /team 9 not found/);
  await refused(t, dataDir, ['send', '--from', 'a@bad-input.dev', '--to', 'b@example.com', '--subject', 's', '--text', 't', '--team', '9'], /team 9 not found/);
  await refused(t, dataDir, ['queue', 'messages', '--team', '9'], /team 9 not found/);
  await refused(t, dataDir, ['queue', 'retry', '--team', '9'], /team 9 not found/);
  await refused(t, dataDir, ['queue', 'bounce', '--reason', 'r', '--team', '9'], /team 9 not found/);
  // A suspension of team 9 would hold the mail of a team made later with that id.
  await refused(t, dataDir, ['queue', 'suspend', '--minutes', '5', '--reason', 'r', '--team', '9'], /team 9 not found/);
  t.deepEqual(JSON.parse(await ok(t, dataDir, ['queue', '--json'])).suspensions, []);
});

test('queue: a delivery id with a selector is refused and nothing is made due; selectors and minutes are named as options', async (t) => {
  const dataDir = tempDir(t, 'posthorn-bad-input-');
  await ok(t, dataDir, ['teams', 'create', '--name', 'Acme']);
  await ok(t, dataDir, ['teams', 'create', '--name', 'Other']);
  await ok(t, dataDir, ['domains', 'add', 'bad-input.dev', '--team', '1']);
  const sandbox = { POSTHORN_SANDBOX: 'true' };
  await ok(t, dataDir, ['send', '--from', 'a@bad-input.dev', '--to', 'b@example.com', '--subject', 's', '--text', 't', '--scheduled-at', 'in 3 days'], sandbox);
  const before = JSON.parse(await ok(t, dataDir, ['queue', 'messages', '--json']));
  t.is(before.messages.length, 1);
  const delivery = before.messages[0];
  t.is(delivery.state, 'scheduled');
  // Team 2's id with team 1's delivery: the selector must not be dropped in silence.
  await refused(t, dataDir, ['queue', 'retry', String(delivery.deliveryId), '--team', '2'], /a delivery id or --destination, --team, --campaign, --email/);
  t.deepEqual(JSON.parse(await ok(t, dataDir, ['queue', 'messages', '--json'])).messages, before.messages);
  await refused(t, dataDir, ['queue', 'retry'], /give at least one of --destination, --team, --campaign or --email/);
  await refused(t, dataDir, ['queue', 'suspend', '--minutes', '5', '--reason', 'r'], /give at least one of --destination, --team or --campaign/);
  await refused(t, dataDir, ['queue', 'suspend', '--minutes', '0x10', '--reason', 'r', '--destination', 'example.com'], /--minutes must be a number of minutes, got "0x10"/);
  t.deepEqual(JSON.parse(await ok(t, dataDir, ['queue', '--json'])).suspensions, []);
});

test('init refuses a missing directory, a directory, one path for both files, and a bad user or config path; it writes nothing then', async (t) => {
  const dir = tempDir(t, 'posthorn-init-');
  const missing = join(dir, 'missing');
  const config = join(dir, 'posthorn.toml');
  const unit = join(dir, 'posthorn.service');
  const init = (...args: string[]) => ['init', ...args];
  await refused(t, dir, init('--config-file', config, '--unit-file', join(missing, 'posthorn.service')), new RegExp(`the directory ${missing} does not exist`));
  await refused(t, dir, init('--config-file', join(missing, 'posthorn.toml'), '--unit-file', unit), new RegExp(`the directory ${missing} does not exist`));
  mkdirSync(join(dir, 'adir'));
  await refused(t, dir, init('--config-file', join(dir, 'adir'), '--unit-file', unit, '--force'), /adir is a directory/);
  await refused(t, dir, init('--config-file', config, '--unit-file', config), /one file/);
  await refused(t, dir, init('--config-file', config, '--unit-file', unit, '--user', ''), /--user must be/);
  await refused(t, dir, init('--config-file', config, '--unit-file', unit, '--user', 'bad user; rm -rf /'), /--user must be/);
  await refused(t, dir, init('--config-file', config, '--unit-file', unit, '--etc-config', ''), /--etc-config must be/);
  await refused(t, dir, init('--config-file', config, '--unit-file', unit, '--etc-config', 'posthorn.toml'), /--etc-config must be/);
  t.false(existsSync(config), 'no config file was written');
  t.false(existsSync(unit), 'no unit was written');
  await ok(t, dir, init('--config-file', config, '--unit-file', unit, '--user', 'mail-out', '--etc-config', '/etc/posthorn/main.toml'));
  t.regex(readFileSync(unit, 'utf8'), /^User=mail-out$/m);
});

test('a usage error is one line naming the problem, with exit 1', async (t) => {
  const dataDir = tempDir(t, 'posthorn-bad-input-');
  await refused(t, dataDir, ['teams', 'create', '--name', 'Acme', '--bogus'], /unknown option '--bogus'.*--help/);
  await refused(t, dataDir, ['teams', 'create'], /required option '--name <name>' not specified/);
  await refused(t, dataDir, ['keys', 'create', '--name', 'x', '--permision', 'FULL'], /unknown option '--permision' \(did you mean --permission\?\)/);
  await refused(t, dataDir, ['teams', 'frob'], /unknown command 'frob'/);
  await refused(t, dataDir, ['queue', 'purge', '1', '2'], /too many arguments for 'purge'/);
  t.false(existsSync(join(dataDir, 'posthorn.db')), 'no store was made');
});

test('a config file with a TOML syntax error is named in one line, with where', async (t) => {
  const dir = tempDir(t, 'posthorn-bad-input-');
  const file = join(dir, 'posthorn.toml');
  writeFileSync(file, 'hostname = "mail.example.com"\n[http\nport = 3000\n');
  await refused(t, dir, ['--config', file, 'config', 'print'], new RegExp(`config file ${file} is not valid TOML: .* at line 2, column 6`), { code: 78 });
});
