import { readFileSync } from 'node:fs';
import pg from 'pg';
import type { SqliteStore } from '../src/store/db.js';
import type { BenchPostgres, WalDumpStats } from './bench-postgres.js';
import { METER_APPLICATION, type ClientCounts, type Counters, type RowChanges } from './store-counters.js';

// What a phase of the benchmark cost the store: rows written per table, bytes written, round
// trips and write transactions, and on PostgreSQL the server's CPU and WAL. `begin()` before a
// phase, `end()` after it (its work finished); `flushDirty()` at the very end writes what the
// store still holds in memory (PostgreSQL's dirty buffers wait for a checkpoint), so that the
// run's data-file writes are counted too. Create the meter before the warm-up: on PostgreSQL
// it starts with a checkpoint.
//
// Sources:
// - SQLite: statements and rows per table counted in the process (store-counters.ts); bytes
//   from /proc/self/io write_bytes (the WAL and the checkpoints into the database file: the
//   bytes the filesystem has to write); sizes from the dbstat table.
// - PostgreSQL: round trips and write transactions counted in each node process
//   (store-counters.ts); rows per table from pg_stat_user_tables; WAL bytes from the LSN, split
//   into records and full-page images by pg_waldump; bytes written and CPU of all the server's
//   processes from /proc; statements from pg_stat_statements; sizes from
//   pg_total_relation_size (tables with their indexes and TOAST).

export interface StoreCost {
  store: 'sqlite' | 'postgres';
  roundTrips: number;
  writeTransactions: number;
  rows: Record<string, RowChanges>;
  rowsWritten: number;
  /** Bytes the store's processes sent to the filesystem. */
  bytesWritten: number;
  /**
   * PostgreSQL: WAL generated; records and full-page images (FPI) from pg_waldump; the WAL
   * writes and fsyncs the server made (pg_stat_wal), and the data pages it wrote out
   * (pg_stat_bgwriter: checkpointer, background writer and backends).
   */
  wal?: { bytes: number; records?: number; recordBytes?: number; fpiBytes?: number; writes: number; syncs: number };
  dataPagesWritten?: number;
  /** Growth of the database (tables, indexes; SQLite: pages in use). */
  growthBytes: number;
  /** By table, its indexes (and PostgreSQL's TOAST) included. */
  tableGrowth: Record<string, number>;
  /** By table and by index. */
  relationGrowth: Record<string, number>;
  /** PostgreSQL: CPU time of all the server's processes, ms. */
  serverCpuMs?: number;
  /**
   * PostgreSQL: the statements run most often and those that took the most time
   * (pg_stat_statements: nested ones included, such as foreign-key checks), most calls first.
   */
  topStatements?: { query: string; calls: number; rows: number; walBytes: number; execMs: number }[];
}

export interface Phase {
  end(): Promise<StoreCost>;
}

export interface StoreMeter {
  begin(): Promise<Phase>;
  /** Writes what the store keeps in memory and returns the bytes that took. */
  flushDirty(): Promise<{ bytesWritten: number }>;
  close(): Promise<void>;
}

const sumRows = (rows: Record<string, RowChanges>) => Object.values(rows).reduce((n, r) => n + r.inserted + r.updated + r.deleted, 0);

function diffRows(a: Record<string, RowChanges>, b: Record<string, RowChanges>): Record<string, RowChanges> {
  const out: Record<string, RowChanges> = {};
  for (const [t, r] of Object.entries(b)) {
    const p = a[t] ?? { inserted: 0, updated: 0, deleted: 0 };
    const d = { inserted: r.inserted - p.inserted, updated: r.updated - p.updated, deleted: r.deleted - p.deleted };
    if (d.inserted || d.updated || d.deleted) out[t] = d;
  }
  return out;
}

function diffSizes(a: Record<string, number>, b: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [t, n] of Object.entries(b)) if (n !== (a[t] ?? 0)) out[t] = n - (a[t] ?? 0);
  return out;
}

function selfWriteBytes(): number {
  const io = readFileSync('/proc/self/io', 'utf8');
  return Number(/^write_bytes: (\d+)/m.exec(io)?.[1] ?? 0) - Number(/cancelled_write_bytes: (\d+)/.exec(io)?.[1] ?? 0);
}

/** SQLite, in this process (the counters must have been installed before the store opened). */
export function createSqliteMeter(store: SqliteStore, counters: Counters): StoreMeter {
  const sqlite = store.sqlite;
  const quiet = <T>(fn: () => T): T => {
    counters.paused = true;
    try {
      return fn();
    } finally {
      counters.paused = false;
    }
  };
  const tableSizes = () =>
    quiet(() => {
      const owner = new Map((sqlite.prepare("select name, tbl_name from sqlite_schema where type in ('table', 'index')").all() as { name: string; tbl_name: string }[]).map((r) => [r.name, r.tbl_name]));
      const sizes: Record<string, number> = {};
      const relations: Record<string, number> = {};
      for (const r of sqlite.prepare('select name, sum(pgsize) as size from dbstat group by name').all() as { name: string; size: number }[]) {
        const table = owner.get(r.name) ?? r.name;
        sizes[table] = (sizes[table] ?? 0) + r.size;
        relations[r.name] = r.size;
      }
      return { sizes, relations };
    });
  const snapshot = () => {
    // The WAL's pages copied into the database file now, so a phase's bytes include them.
    quiet(() => sqlite.pragma('wal_checkpoint(PASSIVE)'));
    const counts = counters.read();
    return { counts, writeBytes: selfWriteBytes(), ...tableSizes() };
  };
  return {
    async begin() {
      const a = snapshot();
      return {
        async end() {
          const b = snapshot();
          const rows = diffRows(a.counts.rows ?? {}, b.counts.rows ?? {});
          const tableGrowth = diffSizes(a.sizes, b.sizes);
          return {
            store: 'sqlite',
            relationGrowth: diffSizes(a.relations, b.relations),
            roundTrips: b.counts.roundTrips - a.counts.roundTrips,
            writeTransactions: b.counts.writeTransactions - a.counts.writeTransactions,
            rows,
            rowsWritten: sumRows(rows),
            bytesWritten: b.writeBytes - a.writeBytes,
            growthBytes: Object.values(tableGrowth).reduce((x, y) => x + y, 0),
            tableGrowth,
          };
        },
      };
    },
    async flushDirty() {
      const before = selfWriteBytes();
      quiet(() => sqlite.pragma('wal_checkpoint(TRUNCATE)'));
      return { bytesWritten: selfWriteBytes() - before };
    },
    async close() {},
  };
}

/** Tables the idle cluster writes to all the time (heartbeats): left out when waiting for the statistics to settle. */
const BACKGROUND_TABLES = ['cluster_nodes', 'connection_leases'];

/**
 * PostgreSQL. `clientCounts` sums the counters of every node process (this one, or the children
 * over IPC).
 */
export async function createPgMeter(server: BenchPostgres, url: string, clientCounts: () => Promise<ClientCounts>): Promise<StoreMeter> {
  const client = new pg.Client({ connectionString: url, application_name: METER_APPLICATION });
  await client.connect();
  await client.query("set pg_stat_statements.track = 'none'");
  // What setting up the database left dirty (creating it, the migrations) is written now, so
  // that flushDirty() writes only what the measured work dirtied (and the warm-up's).
  await client.query('checkpoint');
  const one = async <T>(sql: string): Promise<T> => (await client.query(sql)).rows[0] as T;

  const tableStats = async () => {
    const r = await client.query<{ relname: string; ins: string; upd: string; del: string; size: string }>(
      'select relname, n_tup_ins as ins, n_tup_upd as upd, n_tup_del as del, pg_total_relation_size(relid) as size from pg_stat_user_tables',
    );
    const rows: Record<string, RowChanges> = {};
    const sizes: Record<string, number> = {};
    for (const t of r.rows) {
      rows[t.relname] = { inserted: Number(t.ins), updated: Number(t.upd), deleted: Number(t.del) };
      sizes[t.relname] = Number(t.size);
    }
    const rel = await client.query<{ relname: string; size: string }>(
      "select c.relname, pg_relation_size(c.oid) as size from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'public' and c.relkind in ('r', 'i')",
    );
    const relations = Object.fromEntries(rel.rows.map((x) => [x.relname, Number(x.size)]));
    const io = await one<{ wal_write: string; wal_sync: string; pages: string }>(
      'select w.wal_write, w.wal_sync, b.buffers_checkpoint + b.buffers_clean + b.buffers_backend as pages from pg_stat_wal w, pg_stat_bgwriter b',
    );
    return { rows, sizes, relations, walWrites: Number(io.wal_write), walSyncs: Number(io.wal_sync), dataPages: Number(io.pages) };
  };
  /**
   * Backends report their counts at most once a second; one that goes idle within a second of
   * its last report waits up to 10 s (PGSTAT_IDLE_INTERVAL) before it reports. So the counts
   * are read once they have not moved for 11 s (at most 45 s).
   */
  const settle = async () => {
    const total = async () =>
      Number((await one<{ n: string }>(`select coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) as n from pg_stat_user_tables where relname not in (${BACKGROUND_TABLES.map((t) => `'${t}'`).join(', ')})`)).n);
    const deadline = Date.now() + 45_000;
    let last = await total();
    let since = Date.now();
    while (Date.now() - since < 11_000 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 1000));
      const now = await total();
      if (now !== last) {
        last = now;
        since = Date.now();
      }
    }
  };
  const statements = async () => {
    const r = await client.query<{ queryid: string; query: string; calls: string; rows: string; wal_bytes: string; ms: number }>(
      'select queryid, query, calls, rows, wal_bytes, total_exec_time as ms from pg_stat_statements where dbid = (select oid from pg_database where datname = current_database())',
    );
    return new Map(r.rows.map((s) => [s.queryid, { query: s.query, calls: Number(s.calls), rows: Number(s.rows), walBytes: Number(s.wal_bytes), execMs: Number(s.ms) }]));
  };
  /** Readings taken the moment a phase ends (before the idle cluster adds to them). */
  const instant = async () => {
    const proc = server.processStats();
    const counts = await clientCounts();
    const { lsn } = await one<{ lsn: string }>('select pg_current_wal_insert_lsn() as lsn');
    return { proc, counts, lsn, statements: await statements() };
  };
  const settled = async () => {
    await settle();
    return tableStats();
  };
  /** pg_waldump reads only what is on disk: wait for the WAL writer to flush up to lsn. */
  const walUpTo = async (from: string, to: string): Promise<WalDumpStats | undefined> => {
    for (let i = 0; i < 50; i++) {
      const { done } = await one<{ done: boolean }>(`select pg_current_wal_flush_lsn() >= '${to}'::pg_lsn as done`);
      if (done) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    return server.walDump(from, to);
  };
  return {
    async begin() {
      // BENCH_PG_CHECKPOINT_PHASES=1: each phase starts right after a checkpoint, so the first
      // change of every page that existed before it writes a full-page image (the worst case).
      if (process.env.BENCH_PG_CHECKPOINT_PHASES) await client.query('checkpoint');
      const aStats = await settled();
      const a = await instant();
      return {
        async end() {
          const b = await instant();
          const { bytes } = await one<{ bytes: string }>(`select pg_wal_lsn_diff('${b.lsn}', '${a.lsn}') as bytes`);
          const dump = await walUpTo(a.lsn, b.lsn);
          const bStats = await settled();
          const rows = diffRows(aStats.rows, bStats.rows);
          const tableGrowth = diffSizes(aStats.sizes, bStats.sizes);
          const relationGrowth = diffSizes(aStats.relations, bStats.relations);
          const ran = [...b.statements]
            .map(([id, s]) => {
              const p = a.statements.get(id) ?? { calls: 0, rows: 0, walBytes: 0, execMs: 0 };
              return { query: s.query.replace(/\s+/g, ' ').slice(0, 160), calls: s.calls - p.calls, rows: s.rows - p.rows, walBytes: s.walBytes - p.walBytes, execMs: Math.round(s.execMs - p.execMs) };
            })
            .filter((s) => s.calls > 0);
          const byTime = [...ran].sort((x, y) => y.execMs - x.execMs).slice(0, 8);
          const top = [...new Set([...ran.sort((x, y) => y.calls - x.calls).slice(0, 12), ...byTime])].sort((x, y) => y.calls - x.calls);
          return {
            store: 'postgres',
            roundTrips: b.counts.roundTrips - a.counts.roundTrips,
            writeTransactions: b.counts.writeTransactions - a.counts.writeTransactions,
            rows,
            rowsWritten: sumRows(rows),
            bytesWritten: b.proc.writeBytes - a.proc.writeBytes,
            wal: { bytes: Number(bytes), ...(dump ?? {}), writes: bStats.walWrites - aStats.walWrites, syncs: bStats.walSyncs - aStats.walSyncs },
            dataPagesWritten: bStats.dataPages - aStats.dataPages,
            growthBytes: Object.values(tableGrowth).reduce((x, y) => x + y, 0),
            tableGrowth,
            relationGrowth,
            serverCpuMs: Math.round(b.proc.cpuMs - a.proc.cpuMs),
            topStatements: top,
          };
        },
      };
    },
    async flushDirty() {
      const before = server.processStats().writeBytes;
      await client.query('checkpoint');
      return { bytesWritten: server.processStats().writeBytes - before };
    },
    async close() {
      await client.end();
    },
  };
}

/** The cost of one unit (an accepted send, a delivered message): every count divided by n. */
export function perUnit(c: StoreCost, n: number) {
  const d = (x: number, digits = 2) => Math.round((x / Math.max(1, n)) * 10 ** digits) / 10 ** digits;
  const rows: Record<string, string> = {};
  for (const [t, r] of Object.entries(c.rows).sort()) {
    const parts = [r.inserted && `+${d(r.inserted)}`, r.updated && `~${d(r.updated)}`, r.deleted && `-${d(r.deleted)}`].filter(Boolean);
    if (parts.some((p) => p !== '+0' && p !== '~0' && p !== '-0')) rows[t] = parts.join(' ');
  }
  return {
    roundTrips: d(c.roundTrips),
    writeTransactions: d(c.writeTransactions, 3),
    rowsWritten: d(c.rowsWritten),
    rows,
    bytesWritten: Math.round(c.bytesWritten / Math.max(1, n)),
    ...(c.wal ? { walBytes: d(c.wal.bytes, 0), walRecordBytes: c.wal.recordBytes === undefined ? undefined : d(c.wal.recordBytes, 0), walFpiBytes: c.wal.fpiBytes === undefined ? undefined : d(c.wal.fpiBytes, 0) } : {}),
    growthBytes: d(c.growthBytes, 0),
    ...(c.serverCpuMs !== undefined ? { serverCpuMs: d(c.serverCpuMs, 3) } : {}),
  };
}

/** The table's lines for what a phase cost the store, per unit. */
export function storeRows(what: string, cost: StoreCost, unit: ReturnType<typeof perUnit>): [string, string][] {
  const rows: [string, string][] = [];
  if (unit.serverCpuMs !== undefined) rows.push([`PostgreSQL CPU ${what}`, `${unit.serverCpuMs} ms`]);
  rows.push([`store ${what}`, `${unit.roundTrips} round trips, ${unit.writeTransactions} write transactions, ${unit.rowsWritten} rows written, ${unit.bytesWritten} B written`]);
  if (cost.wal) {
    rows.push([`  WAL ${what}`, `${unit.walBytes} B (records ${unit.walRecordBytes ?? '?'} B, full-page images ${unit.walFpiBytes ?? '?'} B)`]);
    rows.push([`  in the whole phase`, `${cost.wal.writes} WAL writes, ${cost.wal.syncs} WAL fsyncs, ${cost.dataPagesWritten ?? '?'} data pages written`]);
  }
  rows.push([`  rows ${what}`, Object.entries(unit.rows).map(([t, r]) => `${t} ${r}`).join(', ')]);
  rows.push([`  growth ${what}`, `${unit.growthBytes} B`]);
  return rows;
}
