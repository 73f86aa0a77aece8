import test, { type ExecutionContext } from 'ava';
import { spawn } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { tempDir } from '../helpers/temp-dir.js';
import { LOOPBACK_LISTENERS_ENV } from '../helpers/port-probe.js';

// The data directory a newcomer gets wrong: one this user cannot write (a database made by an
// admin command run with sudo, a directory owned by someone else), a path that is a file, and
// two `posthorn serve` on one SQLite data directory. Each is one line naming the cause and what
// to do, exit 1, and never a second server that takes the first one's work away.

const BIN = fileURLToPath(new URL('../../../bin/posthorn', import.meta.url));
/** Root ignores file modes: as root, the command runs as nobody (65534) to meet them. */
const OTHER_USER = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : {};

interface Ended {
  code: number | null;
  stdout: string;
  stderr: string;
}

function start(t: ExecutionContext, env: Record<string, string>, args: string[], user: { uid?: number; gid?: number } = {}) {
  const child = spawn(process.execPath, [BIN, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env.PATH!, POSTHORN_DNS_SERVERS: '127.0.0.1:9', ...LOOPBACK_LISTENERS_ENV, ...env },
    ...user,
  });
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  const out = { stdout: '', stderr: '' };
  child.stdout.on('data', (d: Buffer) => (out.stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out.stderr += d.toString()));
  const ended = new Promise<Ended>((resolve) => child.once('close', (code) => resolve({ code, ...out })));
  /** Resolves once stdout has a line matching `pattern`. */
  const printed = (pattern: RegExp) =>
    new Promise<void>((resolve, reject) => {
      const look = () => {
        if (pattern.test(out.stdout)) resolve();
      };
      child.stdout.on('data', look);
      child.once('close', () => reject(new Error(`exited before ${pattern}: ${out.stderr}`)));
      look();
    });
  return { child, ended, printed };
}

function run(t: ExecutionContext, env: Record<string, string>, args: string[], user: { uid?: number; gid?: number } = {}): Promise<Ended> {
  return start(t, env, args, user).ended;
}

/** One `posthorn: ...` line on stderr matching `pattern`, and no stack trace. */
function oneErrorLine(t: ExecutionContext, stderr: string, pattern: RegExp): void {
  const lines = stderr.split('\n').filter((l) => l.startsWith('posthorn: '));
  t.true(lines.length === 1 && pattern.test(lines[0]!), stderr);
  t.false(/\n\s+at /.test(stderr), stderr);
}

test('a database file this user cannot write (made with sudo) is named, with what to do', async (t) => {
  t.timeout(120_000);
  const dataDir = tempDir(t, 'posthorn-datadir-');
  const made = await run(t, { POSTHORN_DATA_DIR: dataDir }, ['migrate']);
  t.is(made.code, 0, made.stderr);
  // The directory is open to all; only the database file is not this user's to write.
  chmodSync(dataDir, 0o777);
  chmodSync(join(dataDir, 'posthorn.db'), 0o644);
  if (!OTHER_USER.uid) chmodSync(join(dataDir, 'posthorn.db'), 0o444);
  for (const args of [['keys', 'list'], ['serve']]) {
    const ended = await run(t, { POSTHORN_DATA_DIR: dataDir }, args, OTHER_USER);
    t.is(ended.code, 1, ended.stderr);
    oneErrorLine(t, ended.stderr, new RegExp(`${dataDir}/posthorn\\.db is not writable by this user.*POSTHORN_DATA_DIR`));
    t.false(ended.stdout.includes('listening'), ended.stdout);
  }
});

test('a data directory or store file of this very user, without write permission, is named with its mode and chmod, not chown to its owner', async (t) => {
  t.timeout(120_000);
  const parent = tempDir(t, 'posthorn-datadir-');
  chmodSync(parent, 0o755);
  const dataDir = join(parent, 'data');
  const made = await run(t, { POSTHORN_DATA_DIR: dataDir }, ['migrate']);
  t.is(made.code, 0, made.stderr);
  if (OTHER_USER.uid) chownSync(dataDir, OTHER_USER.uid, OTHER_USER.gid!);
  if (OTHER_USER.uid) chownSync(join(dataDir, 'posthorn.db'), OTHER_USER.uid, OTHER_USER.gid!);
  chmodSync(join(dataDir, 'posthorn.db'), 0o444);
  const file = await run(t, { POSTHORN_DATA_DIR: dataDir }, ['keys', 'list'], OTHER_USER);
  t.is(file.code, 1, file.stderr);
  oneErrorLine(t, file.stderr, new RegExp(`${dataDir}/posthorn\\.db belongs to this user .* but its mode 0444 does not let it write: chmod u\\+rw ${dataDir}/posthorn\\.db`));
  t.notRegex(file.stderr, /chown/);
  chmodSync(join(dataDir, 'posthorn.db'), 0o600);
  chmodSync(dataDir, 0o555);
  const dir = await run(t, { POSTHORN_DATA_DIR: dataDir }, ['serve'], OTHER_USER);
  t.is(dir.code, 1, dir.stderr);
  oneErrorLine(t, dir.stderr, new RegExp(`the data directory ${dataDir} belongs to this user .* but its mode 0555 does not let it write: chmod u\\+rwx ${dataDir}`));
  t.notRegex(dir.stderr, /chown/);
});

test('a data directory that cannot be created, or is a file, is named, with what to do', async (t) => {
  t.timeout(120_000);
  const parent = tempDir(t, 'posthorn-datadir-');
  chmodSync(parent, 0o555); // root's own 0555 directory is not writable for nobody either
  const missing = await run(t, { POSTHORN_DATA_DIR: join(parent, 'data') }, ['teams', 'create', '--name', 'Acme'], OTHER_USER);
  t.is(missing.code, 1, missing.stderr);
  oneErrorLine(t, missing.stderr, new RegExp(`the data directory ${parent}/data cannot be created \\(EACCES\\).*POSTHORN_DATA_DIR`));
  chmodSync(parent, 0o755);
  const file = join(parent, 'not-a-dir');
  writeFileSync(file, 'x');
  const notDir = await run(t, { POSTHORN_DATA_DIR: file }, ['serve']);
  t.is(notDir.code, 1, notDir.stderr);
  oneErrorLine(t, notDir.stderr, new RegExp(`the data directory ${file} is not a directory: set dataDir \\(POSTHORN_DATA_DIR\\) to a directory`));
});

test('a posthorn.db that is not a SQLite database, or is a directory, is named, and left as it was', async (t) => {
  t.timeout(120_000);
  const notDb = tempDir(t, 'posthorn-datadir-');
  writeFileSync(join(notDb, 'posthorn.db'), 'these are my notes, not a database\n'.repeat(200));
  for (const args of [['keys', 'list'], ['serve']]) {
    const ended = await run(t, { POSTHORN_DATA_DIR: notDb }, args);
    t.is(ended.code, 1, ended.stderr);
    oneErrorLine(t, ended.stderr, new RegExp(`the store file ${notDb}/posthorn\\.db is not a SQLite database.*POSTHORN_DATA_DIR`));
  }
  t.is(readFileSync(join(notDb, 'posthorn.db'), 'utf8'), 'these are my notes, not a database\n'.repeat(200));
  const dirInPlace = tempDir(t, 'posthorn-datadir-');
  mkdirSync(join(dirInPlace, 'posthorn.db'));
  const ended = await run(t, { POSTHORN_DATA_DIR: dirInPlace }, ['keys', 'list']);
  t.is(ended.code, 1, ended.stderr);
  oneErrorLine(t, ended.stderr, new RegExp(`the store file ${dirInPlace}/posthorn\\.db is not a file.*POSTHORN_DATA_DIR`));
});

test('a second serve on the same SQLite data directory exits 1 naming the first; admin commands still run beside it', async (t) => {
  // Three servers and an admin command start one after another, each ~1 s of CPU alone: on a
  // shared 2-core host under heavy load (CI beside other work) that took over a minute.
  t.timeout(180_000);
  const dataDir = tempDir(t, 'posthorn-datadir-');
  const first = start(t, { POSTHORN_DATA_DIR: dataDir }, ['serve']);
  await first.printed(/SMTP listeners started/);

  const starting = start(t, { POSTHORN_DATA_DIR: dataDir }, ['serve']);
  const outcome = await Promise.race([starting.ended, starting.printed(/listening/).then(() => 'listening' as const)]);
  t.not(outcome, 'listening', 'a second server came up beside the first');
  const second = await starting.ended;
  t.is(second.code, 1, second.stderr);
  oneErrorLine(t, second.stderr, new RegExp(`another posthorn serve \\(pid ${first.child.pid}\\) is running on the data directory ${dataDir}`));
  t.false(second.stdout.includes('listening'), 'the second one started nothing');
  t.false(second.stdout.includes('released'), 'nor freed the leases of the first');

  const beside = await run(t, { POSTHORN_DATA_DIR: dataDir }, ['keys', 'list']);
  t.is(beside.code, 0, beside.stderr);

  // A server killed outright leaves no lock behind: the next one starts.
  first.child.kill('SIGKILL');
  await first.ended;
  const next = start(t, { POSTHORN_DATA_DIR: dataDir }, ['serve']);
  await next.printed(/SMTP listeners started/);
  next.child.kill('SIGTERM');
  t.is((await next.ended).code, 0);
});

test('a new data directory and store are their owner\'s alone; a server on a store every user can read says so', async (t) => {
  t.timeout(120_000);
  const dataDir = join(tempDir(t, 'posthorn-datadir-'), 'data');
  const first = start(t, { POSTHORN_DATA_DIR: dataDir }, ['serve']);
  await first.printed(/SMTP listeners started/);
  const mode = (name: string) => statSync(join(dataDir, name)).mode & 0o777;
  t.is(mode(''), 0o700);
  // SQLite gives the log and its index the database file's mode.
  for (const name of ['posthorn.db', 'posthorn.db-wal', 'posthorn.db-shm']) t.is(mode(name), 0o600, name);
  t.is(mode('spool'), 0o700);
  first.child.kill('SIGTERM');
  const ended = await first.ended;
  t.is(ended.code, 0, ended.stderr);
  t.false(ended.stdout.includes('can be read by every user'), ended.stdout);

  // A store made before, or copied in under a loose umask: named, with what to do.
  chmodSync(dataDir, 0o755);
  chmodSync(join(dataDir, 'posthorn.db'), 0o644);
  const open = start(t, { POSTHORN_DATA_DIR: dataDir }, ['serve']);
  await open.printed(new RegExp(`${dataDir}/posthorn\\.db can be read by every user of this machine \\(mode 0644 in a directory of mode 0755\\).*chmod 700 ${dataDir}`));
  await open.printed(/SMTP listeners started/);
  open.child.kill('SIGTERM');
  t.is((await open.ended).code, 0);
});

test('a store written by a newer release (a migration this one does not know) is named as such, with what to do, by migrate and by serve', async (t) => {
  t.timeout(120_000);
  const dataDir = tempDir(t, 'posthorn-datadir-');
  t.is((await run(t, { POSTHORN_DATA_DIR: dataDir }, ['migrate'])).code, 0);
  const db = new Database(join(dataDir, 'posthorn.db'));
  db.prepare('insert into kysely_migration (name, timestamp) values (?, ?)').run('29991231000000-from-the-future', new Date().toISOString());
  db.close();
  for (const args of [['migrate'], ['serve']]) {
    const ended = await run(t, { POSTHORN_DATA_DIR: dataDir }, args);
    t.is(ended.code, 1, ended.stderr);
    oneErrorLine(t, ended.stderr, /this store was written by a newer Posthorn release: it has migration 29991231000000-from-the-future, which this release \(newest: \d{14}-[a-z0-9-]+\) does not know; run that release or a newer one, or restore a backup made by this release \(posthorn store restore\)/);
    t.false(ended.stdout.includes('listening'), ended.stdout);
  }
});
