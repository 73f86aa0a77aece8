import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

// The benchmark's PostgreSQL: a throwaway cluster (initdb) in a temp directory on 127.0.0.1, like
// test/helpers/pg-server.ts, but configured like a production server so that the figures mean
// something: fsync and full-page writes on (the test server turns both off), and
// pg_stat_statements loaded to count statements. Never a system service. As root, the cluster
// belongs to the `postgres` user (initdb refuses root). BENCH_PG_BIN picks another bin directory.

const BIN_DIRS = ['/usr/lib/postgresql/17/bin', '/usr/lib/postgresql/16/bin', '/usr/lib/postgresql/15/bin'];
const USER = 'posthorn';

export interface BenchPostgres {
  /** postgres://posthorn@127.0.0.1:<port>/postgres */
  adminUrl: string;
  dataDir: string;
  binDir: string;
  version: string;
  /** A new, empty database; returns its URL. */
  createDatabase(name: string): Promise<string>;
  /** CPU time (user + system, ms) and bytes sent to the filesystem by the whole server so far. */
  processStats(): ServerProcessStats;
  /** Record and full-page-image bytes of the WAL between two LSNs (pg_waldump --stats). */
  walDump(fromLsn: string, toLsn: string): WalDumpStats | undefined;
  stop(): Promise<void>;
}

export interface ServerProcessStats {
  cpuMs: number;
  writeBytes: number;
}

export interface WalDumpStats {
  records: number;
  recordBytes: number;
  fpiBytes: number;
}

function binDir(): string {
  const dir = process.env.BENCH_PG_BIN ?? BIN_DIRS.find((d) => existsSync(join(d, 'initdb')));
  if (!dir) throw new Error('PostgreSQL is not installed (no initdb in /usr/lib/postgresql/*/bin): apt-get install postgresql, or set BENCH_PG_BIN');
  return dir;
}

function freePort(): Promise<number> {
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

function run(cmd: string, args: string[], opts: { cwd: string; uid?: number; gid?: number }): Promise<number | null> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { ...opts, stdio: 'ignore' });
    child.once('error', () => resolve(-1));
    child.once('exit', (code) => resolve(code));
  });
}

const CLOCK_TICK_MS = 1000 / Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim() || 100);

/** utime+stime (and, for the postmaster, its reaped children's) in ms, and write_bytes of one process. */
function procStats(pid: number, withChildren: boolean): ServerProcessStats | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces) start at field 3.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(f[11]) + Number(f[12]) + (withChildren ? Number(f[13]) + Number(f[14]) : 0);
    // A reaped child's I/O is added to its parent's, like its CPU time.
    const io = readFileSync(`/proc/${pid}/io`, 'utf8');
    const writeBytes = Number(/write_bytes: (\d+)/.exec(io)?.[1] ?? 0) - Number(/cancelled_write_bytes: (\d+)/.exec(io)?.[1] ?? 0);
    return { cpuMs: ticks * CLOCK_TICK_MS, writeBytes };
  } catch {
    return undefined; // the process exited between listing and reading
  }
}

function parentOf(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return -1;
  }
}

export async function startBenchPostgres(): Promise<BenchPostgres> {
  const bin = binDir();
  const dir = mkdtempSync(join(tmpdir(), 'posthorn-bench-pg-'));
  const owner = ownerIds();
  chmodSync(dir, 0o700);
  if (owner) chownSync(dir, owner.uid, owner.gid);
  const data = join(dir, 'data');
  const as = owner ? { uid: owner.uid, gid: owner.gid } : {};
  const made = spawnSync(join(bin, 'initdb'), ['-D', data, '-U', USER, '-A', 'trust', '-E', 'UTF8', '--locale=C'], { encoding: 'utf8', cwd: dir, ...as });
  if (made.status !== 0) throw new Error(`initdb failed: ${made.stderr || made.stdout}`);
  const version = spawnSync(join(bin, 'postgres'), ['--version'], { encoding: 'utf8' }).stdout.trim();
  const logFile = join(dir, 'server.log');
  const ctl = join(bin, 'pg_ctl');
  let port = 0;
  for (let attempt = 0; attempt < 5 && !port; attempt++) {
    const candidate = await freePort();
    const options = [
      `-p ${candidate}`,
      '-c listen_addresses=127.0.0.1',
      `-c unix_socket_directories=${dir}`,
      '-c max_connections=200',
      '-c shared_buffers=256MB',
      '-c shared_preload_libraries=pg_stat_statements',
      '-c pg_stat_statements.track=all',
      '-c pg_stat_statements.max=5000',
      // The WAL of a whole run stays readable by pg_waldump (a checkpoint would recycle it).
      '-c wal_keep_size=4096',
      // Kept WAL means new segment files; a server in its steady state recycles old ones
      // instead of writing 16 MB of zeros into each new one, so neither does this one.
      '-c wal_init_zero=off',
      '-c max_wal_size=4GB',
    ].join(' ');
    if ((await run(ctl, ['-D', data, '-l', logFile, '-o', options, '-w', '-t', '60', 'start'], { cwd: dir, ...as })) === 0) port = candidate;
  }
  if (!port) {
    const log = existsSync(logFile) ? readFileSync(logFile, 'utf8').slice(-4000) : '';
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`PostgreSQL did not start: ${log}`);
  }
  const adminUrl = `postgres://${USER}@127.0.0.1:${port}/postgres`;
  const killNow = () => {
    spawnSync(ctl, ['-D', data, '-m', 'immediate', 'stop'], { cwd: dir, ...as });
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', killNow);
  const postmaster = Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
  let stopping: Promise<void> | undefined;
  return {
    adminUrl,
    dataDir: data,
    binDir: bin,
    version,
    async createDatabase(name) {
      if (!/^[a-z][a-z0-9_]*$/.test(name)) throw new Error(`bad database name ${name}`);
      const c = new pg.Client({ connectionString: adminUrl });
      await c.connect();
      try {
        await c.query(`create database ${name}`);
      } finally {
        await c.end();
      }
      const u = new URL(adminUrl);
      u.pathname = `/${name}`;
      const db = new pg.Client({ connectionString: u.toString() });
      await db.connect();
      try {
        await db.query('create extension if not exists pg_stat_statements');
      } finally {
        await db.end();
      }
      return u.toString();
    },
    processStats() {
      const total: ServerProcessStats = procStats(postmaster, true) ?? { cpuMs: 0, writeBytes: 0 };
      for (const entry of readdirSync('/proc')) {
        const pid = Number(entry);
        if (!pid || parentOf(pid) !== postmaster) continue;
        const s = procStats(pid, false);
        if (!s) continue;
        total.cpuMs += s.cpuMs;
        total.writeBytes += s.writeBytes;
      }
      return total;
    },
    walDump(fromLsn, toLsn) {
      if (fromLsn === toLsn) return { records: 0, recordBytes: 0, fpiBytes: 0 };
      const out = spawnSync(join(bin, 'pg_waldump'), ['--stats', '-p', join(data, 'pg_wal'), '-s', fromLsn, '-e', toLsn], { encoding: 'utf8', maxBuffer: 1 << 24 });
      // Total   <records>   <record bytes> [..%]   <FPI bytes> [..%]   <combined> [100%]
      const m = /^Total\s+(\d+)\s+(\d+)\s+\[[^\]]*\]\s+(\d+)/m.exec(out.stdout);
      if (!m) {
        process.stderr.write(`pg_waldump gave no totals: ${out.stderr.slice(0, 500)}\n`);
        return undefined;
      }
      return { records: Number(m[1]), recordBytes: Number(m[2]), fpiBytes: Number(m[3]) };
    },
    stop() {
      return (stopping ??= (async () => {
        await run(ctl, ['-D', data, '-m', 'fast', '-w', 'stop'], { cwd: dir, ...as });
        rmSync(dir, { recursive: true, force: true });
        process.removeListener('exit', killNow);
      })());
    },
  };
}
