import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { startPgServer } from '../test/helpers/pg-server.js';

// The benchmark's PostgreSQL: the throwaway cluster of test/helpers/pg-server.ts, but durable
// like a production server so that the figures mean something (fsync and full-page writes on;
// the tests' server turns both off), with pg_stat_statements loaded to count statements and
// the whole run's WAL kept for pg_waldump. BENCH_PG_BIN picks another bin directory.

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
  const server = await startPgServer({
    durable: true,
    binDir: process.env.BENCH_PG_BIN,
    settings: {
      max_connections: 200,
      shared_buffers: '256MB',
      shared_preload_libraries: 'pg_stat_statements',
      'pg_stat_statements.track': 'all',
      'pg_stat_statements.max': 5000,
      // The WAL of a whole run stays readable by pg_waldump (a checkpoint would recycle it).
      wal_keep_size: 4096,
      // Kept WAL means new segment files; a server in its steady state recycles old ones
      // instead of writing 16 MB of zeros into each new one, so neither does this one.
      wal_init_zero: 'off',
      max_wal_size: '4GB',
    },
  });
  process.once('exit', server.killNow);
  const { adminUrl, binDir: bin, dataDir: data } = server;
  const postmaster = server.pid();
  return {
    adminUrl,
    dataDir: data,
    binDir: bin,
    version: server.version,
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
    async stop() {
      await server.stop();
      process.removeListener('exit', server.killNow);
    },
  };
}
