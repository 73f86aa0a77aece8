import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// A real PostgreSQL server started by the test run or the benchmark itself: a throwaway cluster
// (initdb) in a temp directory, listening on 127.0.0.1 on a free port, trust authentication.
// Never a system service. The tests' server skips fsync and full-page writes (a test cluster is
// never kept); the benchmark's is `durable`, like a production server, so its figures mean
// something, and adds its own settings (pg_stat_statements). Debian's PostgreSQL 15 by default;
// set POSTHORN_TEST_PG_BIN (or pass binDir) for another bin directory. initdb refuses to run as
// root, so as root the cluster belongs to the `postgres` user.

const DEFAULT_BIN_DIRS = ['/usr/lib/postgresql/17/bin', '/usr/lib/postgresql/16/bin', '/usr/lib/postgresql/15/bin'];
export const TEST_PG_USER = 'posthorn';

export interface PgServerOptions {
  /** Listen on this port instead of a free one. */
  port?: number;
  /** fsync, full-page writes and initdb's own syncing on, as in production (off for tests). */
  durable?: boolean;
  /** Server settings (`-c name=value`) over the defaults (max_connections 300, shared_buffers 128MB). */
  settings?: Record<string, string | number>;
  /** The PostgreSQL bin directory; default POSTHORN_TEST_PG_BIN, else the newest Debian one installed. */
  binDir?: string;
}

export interface PgServer {
  /** postgres://posthorn@127.0.0.1:<port>/postgres: the maintenance database. */
  adminUrl: string;
  port: number;
  /** The cluster's data directory. */
  dataDir: string;
  /** The bin directory of the server (initdb, pg_ctl, pg_waldump...). */
  binDir: string;
  /** `postgres --version`. */
  version: string;
  /** The postmaster's process id (it changes with resume()). */
  pid(): number;
  stop(): Promise<void>;
  /** Synchronous, for process exit: an immediate shutdown and the directory removed. */
  killNow(): void;
  /** Shuts the server down (fast: sessions are ended), keeping its data, as an outage would. */
  pause(): Promise<void>;
  /** Starts it again on the same port with the same data; resolves once it accepts connections. */
  resume(): Promise<void>;
}

function findBinDir(given?: string): string {
  const dir = given ?? process.env.POSTHORN_TEST_PG_BIN ?? DEFAULT_BIN_DIRS.find((d) => existsSync(join(d, 'initdb')));
  if (!dir) throw new Error('PostgreSQL is not installed (no initdb in /usr/lib/postgresql/*/bin): apt-get install postgresql, or set POSTHORN_TEST_PG_BIN');
  return dir;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

function ownerIds(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) => Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim());
  return { uid: id('-u'), gid: id('-g') };
}

/** Starts a fresh cluster; resolves once it accepts connections. */
export async function startPgServer(opts: PgServerOptions = {}): Promise<PgServer> {
  const bin = findBinDir(opts.binDir);
  const dir = mkdtempSync(join(tmpdir(), 'posthorn-pg-'));
  const owner = ownerIds();
  chmodSync(dir, 0o700);
  if (owner) chownSync(dir, owner.uid, owner.gid);
  const data = join(dir, 'data');
  // As root, the binaries run as postgres (they refuse root); otherwise as ourselves.
  const as = owner ? { uid: owner.uid, gid: owner.gid } : {};
  // UTF8 with the C locale: the locale our columns have anyway (text collate "C", pg-schema-plugin.ts);
  // case-ignoring matches name their own collation, ICU's root (store/unicode-lower.ts), so
  // they behave as under a production server's UTF-8 locale.
  const made = spawnSync(join(bin, 'initdb'), ['-D', data, '-U', TEST_PG_USER, '-A', 'trust', '-E', 'UTF8', '--locale=C', ...(opts.durable ? [] : ['--no-sync'])], { encoding: 'utf8', cwd: dir, ...as });
  if (made.status !== 0) throw new Error(`initdb failed: ${made.stderr || made.stdout}`);
  const version = spawnSync(join(bin, 'postgres'), ['--version'], { encoding: 'utf8' }).stdout.trim();
  const logFile = join(dir, 'server.log');
  const ctl = join(bin, 'pg_ctl');
  const settings: Record<string, string | number> = {
    ...(opts.durable ? {} : { fsync: 'off', full_page_writes: 'off' }),
    max_connections: 300,
    shared_buffers: '128MB',
    ...opts.settings,
  };
  const optionsFor = (port: number) =>
    [`-p ${port}`, '-c listen_addresses=127.0.0.1', `-c unix_socket_directories=${dir}`, ...Object.entries(settings).map(([k, v]) => `-c ${k}=${v}`)].join(' ');
  // pg_ctl -w returns once the server accepts connections (or failed to start); the server
  // runs detached, so it never holds this process open.
  const startOn = (port: number) => run(ctl, ['-D', data, '-l', logFile, '-o', optionsFor(port), '-w', '-t', '60', 'start'], { cwd: dir, ...as });
  let port = 0;
  for (let attempt = 0; attempt < 5 && !port; attempt++) {
    const candidate = opts.port ?? (await freePort());
    if ((await startOn(candidate)) === 0) port = candidate;
  }
  if (!port) {
    const log = existsSync(logFile) ? readFileSync(logFile, 'utf8').slice(-4000) : '';
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`PostgreSQL did not start: ${log}`);
  }
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      await run(ctl, ['-D', data, '-m', 'fast', '-w', 'stop'], { cwd: dir, ...as });
      rmSync(dir, { recursive: true, force: true });
    })());
  const killNow = () => {
    spawnSync(ctl, ['-D', data, '-m', 'immediate', 'stop'], { cwd: dir, ...as });
    rmSync(dir, { recursive: true, force: true });
  };
  const pause = async () => {
    const code = await run(ctl, ['-D', data, '-m', 'fast', '-w', 'stop'], { cwd: dir, ...as });
    if (code !== 0) throw new Error(`pg_ctl stop failed (${code})`);
  };
  const resume = async () => {
    const code = await startOn(port);
    if (code !== 0) throw new Error(`PostgreSQL did not start again (${code}): ${existsSync(logFile) ? readFileSync(logFile, 'utf8').slice(-2000) : ''}`);
  };
  const pid = () => Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
  return { adminUrl: `postgres://${TEST_PG_USER}@127.0.0.1:${port}/postgres`, port, dataDir: data, binDir: bin, version, pid, stop, killNow, pause, resume };
}

function run(cmd: string, args: string[], opts: { cwd: string; uid?: number; gid?: number }): Promise<number | null> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { ...opts, stdio: 'ignore' });
    child.once('error', () => resolve(-1));
    child.once('exit', (code) => resolve(code));
  });
}

/** Writes a file saying where a running server is (for child processes and later test runs). */
export function writeServerFile(path: string, server: PgServer): void {
  writeFileSync(path, JSON.stringify({ adminUrl: server.adminUrl, port: server.port }));
}
