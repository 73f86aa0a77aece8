import test from 'ava';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '../helpers/temp-dir.js';
import { literal, ok, refused } from './bad-input-cli.js';

// Bad input on the command line that is refused before any store is opened (arguments, usage,
// the config file, init's files): the same on SQLite and PostgreSQL, so run once, on SQLite
// (run-suites.ts). Those that reach the store are in bad-input.test.ts.

test('a command refused for its arguments changes nothing on disk: it makes no data directory and no store', async (t) => {
  // The data directory does not exist: a command that opened the store before it checked its
  // arguments would make it and a new, empty posthorn.db there (and say so on a second line).
  // No store is reached, so this is the same test on SQLite and PostgreSQL.
  const dataDir = join(tempDir(t, 'posthorn-bad-input-'), 'data');
  const env = { POSTHORN_DATA_DIR: dataDir };
  const range = /must be a whole number from 1 to 2147483647/;
  const cases: [string[], RegExp, string?][] = [
    [['keys', 'create', '--name', 'k', '--domain', '0'], /^posthorn: --domain must be/],
    [['keys', 'create', '--name', ' '], /^posthorn: name: must not be empty$/],
    [['keys', 'revoke', 'abc'], range],
    [['teams', 'create', '--name', 'Acme', '--rate-limit', '2000000'], /^posthorn: rateLimit: must be a positive integer/],
    [['teams', 'set-rate-limit', '1', 'fast'], /^posthorn: limit must be/],
    [['teams', 'set-pool', '1', 'nopool'], /^posthorn: pool: no egress pool named "nopool" is configured/],
    [['domains', 'add', 'not_a_domain'], /^posthorn: name: "not_a_domain" is not a valid domain name$/],
    [['domains', 'list', '--team', 'x'], /^posthorn: --team must be/],
    [['domains', 'set-pool', 'example.com', 'nopool'], /^posthorn: pool: no egress pool named "nopool" is configured/],
    [['domains', 'verify', 'example.com', '--team', '0'], /^posthorn: --team must be/],
    [['send', '--from', 'a@example.com', '--to', 'b@example.com', '--subject', 's', '--text', 't', '--scheduled-at', 'whenever'], /^posthorn: scheduledAt: "whenever" is not an ISO 8601 date-time/],
    [['send', '--from', 'a@example.com', '--to', 'not an address', '--subject', 's', '--text', 't'], /^posthorn: to\[0\]: "not an address" is not a single valid email address$/],
    [['send', '--from', 'a@example.com', '--to', 'b@example.com', '--subject', 's'], /^posthorn: --text or --html is required$/],
    [['send', '--from', 'a@example.com', '--to', 'b@example.com', '--subject', 's', '--text', 't', '--team', '0'], /^posthorn: --team must be/],
    [['queue', 'messages', '--cursor', 'bogus'], /^posthorn: cursor: not a cursor/],
    [['queue', 'messages', '--limit', '0'], /^posthorn: --limit must be/],
    [['queue', 'messages', '--limit', '100000'], /^posthorn: --limit must be a whole number from 1 to 500, got "100000"$/],
    [['queue', 'suspend', '--minutes', '99999', '--reason', 'r', '--destination', 'example.com'], /^posthorn: minutes: must be more than 0 and at most 43200/],
    [['queue', 'suspend', '--minutes', '5', '--reason', 'r', '--team', 'x'], /^posthorn: --team must be/],
    [['queue', 'retry', '--destination', 'not a domain!'], /^posthorn: destination: must be a domain name$/],
    [['queue', 'retry', 'x'], range],
    // A destination where the delivery id goes: the option that takes it is named.
    [['queue', 'retry', 'example.org'], /^posthorn: deliveryId must be a whole number from 1 to 2147483647, got "example\.org"; a destination is --destination example\.org$/],
    [['queue', 'bounce', '--destination', 'example.com', '--reason', ' '], /^posthorn: reason: must not be empty$/],
    [['queue', 'purge', 'x'], range],
    [['users', 'create', '--email', 'nope', '--team', '1'], /^posthorn: email: "nope" is not a valid email address$/],
    [['users', 'create', '--email', 'a@example.com', '--team', 'x'], /^posthorn: --team must be/],
    [['users', 'create', '--email', 'a@example.com', '--team', '1', '--password-stdin'], /^posthorn: password: must be at least 10 characters$/, 'short\n'],
    [['users', 'reset-password', 'a@example.com', '--password-stdin'], /^posthorn: password: must be at least 10 characters$/, 'short\n'],
  ];
  for (const [args, pattern, input] of cases) {
    await refused(t, null, args, pattern, { env, ...(input ? { input } : {}) });
    t.false(existsSync(dataDir), `posthorn ${args.join(' ')} made no data directory`);
  }
});

test('a command that works on existing data refuses a data directory with no store, and makes none', async (t) => {
  // queue resume and trace, users delete and reset-password take any text as the id: only the
  // store could refuse them, so without one they must be refused before a new, empty one is made.
  // No store is reached, so this is the same test on SQLite and PostgreSQL.
  const parent = tempDir(t, 'posthorn-bad-input-');
  const missing = join(parent, 'data');
  const empty = join(parent, 'empty');
  mkdirSync(empty);
  const commands: [string[], string?][] = [
    [['queue', 'resume', 'su_nothing']],
    [['queue', 'resume', 'sh_nothing']],
    [['queue', 'trace', 'em_nothing']],
    [['users', 'delete', 'a@example.com']],
    [['users', 'reset-password', 'a@example.com']],
    [['users', 'reset-password', 'a@example.com', '--password-stdin'], 'long enough password\n'],
    [['users', 'create', '--email', 'a@example.com', '--team', '1']],
    [['users', 'list']],
    [['keys', 'list']],
    [['keys', 'revoke', '1']],
    [['teams', 'list']],
    [['teams', 'set-rate-limit', '1', '5']],
    [['teams', 'set-pool', '1', 'default']],
    [['domains', 'list']],
    [['domains', 'verify', 'example.com']],
    [['domains', 'set-pool', 'example.com', 'default']],
    [['send', '--from', 'a@example.com', '--to', 'b@example.com', '--subject', 's', '--text', 't']],
    [['queue']],
    [['queue', 'messages']],
    [['queue', 'suspend', '--minutes', '5', '--reason', 'r', '--destination', 'example.com']],
    [['queue', 'retry', '1']],
    [['queue', 'retry', '--destination', 'example.com']],
    [['queue', 'bounce', '--reason', 'r', '--destination', 'example.com']],
    [['queue', 'purge', '1']],
    [['server-dns']],
  ];
  // Every command on a missing directory; an existing, empty one (made for the server, not yet
  // started) goes the same way, shown with the three named above.
  for (const [dataDir, some] of [[missing, commands], [empty, commands.slice(0, 4)]] as const) {
    const file = join(dataDir, 'posthorn.db');
    const noStore = new RegExp(`^posthorn: there is no store at ${literal(file)}: .*POSTHORN_DATA_DIR.* migrate`);
    for (const [args, input] of some) {
      await refused(t, null, args, noStore, { env: { POSTHORN_DATA_DIR: dataDir }, ...(input ? { input } : {}) });
      t.false(existsSync(file), `posthorn ${args.join(' ')} made no store in ${dataDir}`);
    }
  }
  t.false(existsSync(missing), 'no data directory was made');
  t.deepEqual(readdirSync(empty), [], 'nothing was written to the empty data directory');
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
