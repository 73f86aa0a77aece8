import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';

// Client-side counters of what a process asks of its store, installed before the store opens:
// - round trips: every statement sent (PostgreSQL: each client.query is one round trip, a
//   prepared one included; SQLite: each statement stepped, there is no wire);
// - write transactions: COMMITs, plus writing statements that ran outside a transaction (each
//   its own commit). On PostgreSQL with durability full, each is a WAL flush to wait for.
// - SQLite only, rows written per table (PostgreSQL's come from its statistics, which also see
//   the rows a data-modifying CTE writes).
// Counting costs a regex test per statement; the meter pauses it around its own queries.

export interface RowChanges {
  inserted: number;
  updated: number;
  deleted: number;
}

export interface ClientCounts {
  roundTrips: number;
  writeTransactions: number;
  /** SQLite only. */
  rows?: Record<string, RowChanges>;
}

export interface Counters {
  read(): ClientCounts;
  /** While paused, nothing is counted (the meter's own queries). */
  paused: boolean;
}

const WRITE_RE = /^\s*(?:insert|update|delete|replace|with\b[\s\S]*\b(?:insert|update|delete)\b)/i;
const TARGET_RE = /^\s*(?:(insert|replace)(?:\s+or\s+\w+)?\s+into|(update)(?:\s+or\s+\w+)?|(delete)\s+from)\s+(?:"?main"?\.)?"?([A-Za-z_][A-Za-z0-9_]*)"?/i;
const BEGIN_RE = /^\s*begin\b/i;
const COMMIT_RE = /^\s*(?:commit|end)\b/i;
const ROLLBACK_RE = /^\s*rollback\b(?!\s+to)/i;

interface Classified {
  write: boolean;
  table?: string;
  kind?: keyof RowChanges;
  begin: boolean;
  commit: boolean;
  rollback: boolean;
}
const classified = new Map<string, Classified>();
function classify(sql: string): Classified {
  let c = classified.get(sql);
  if (!c) {
    const t = TARGET_RE.exec(sql);
    // An upsert (the rollups, the rate-limit windows) nearly always finds its row: counted as
    // an update (SQLite does not say which it did; PostgreSQL's statistics do).
    const upsert = /\bon\s+conflict\b[\s\S]*\bdo\s+update\b/i.test(sql);
    c = {
      write: WRITE_RE.test(sql),
      table: t?.[4],
      kind: t ? (t[1] ? (upsert ? 'updated' : 'inserted') : t[2] ? 'updated' : 'deleted') : undefined,
      begin: BEGIN_RE.test(sql),
      commit: COMMIT_RE.test(sql),
      rollback: ROLLBACK_RE.test(sql),
    };
    if (classified.size < 10_000) classified.set(sql, c);
  }
  return c;
}

let sqliteCounters: Counters | undefined;

/** Patches better-sqlite3's Statement and Database.transaction in this process (once). */
export function installSqliteCounters(): Counters {
  if (sqliteCounters) return sqliteCounters;
  const counts = { roundTrips: 0, writeTransactions: 0 };
  const rows = new Map<string, RowChanges>();
  const counters: Counters = {
    paused: false,
    read: () => ({ ...counts, rows: Object.fromEntries([...rows].map(([k, v]) => [k, { ...v }])) }),
  };
  const addRows = (c: Classified, n: number) => {
    if (!c.table || !c.kind || !n) return;
    let r = rows.get(c.table);
    if (!r) rows.set(c.table, (r = { inserted: 0, updated: 0, deleted: 0 }));
    r[c.kind] += n;
  };
  const probe = new BetterSqlite3(':memory:');
  const proto = Object.getPrototypeOf(probe.prepare('select 1')) as Record<string, (...a: unknown[]) => unknown>;
  probe.close();
  type Stmt = { source: string; database: BetterSqlite3.Database };
  const before = (stmt: Stmt): Classified | undefined => {
    if (counters.paused) return undefined;
    const c = classify(stmt.source);
    counts.roundTrips++;
    if (c.begin) counts.writeTransactions++; // Kysely's transactions (they all write)
    else if (c.write && !stmt.database.inTransaction) counts.writeTransactions++;
    return c;
  };
  const run = proto.run!;
  proto.run = function (this: Stmt, ...args: unknown[]) {
    const c = before(this);
    const result = run.apply(this, args) as { changes: number };
    if (c?.write) addRows(c, result.changes);
    return result;
  };
  const all = proto.all!;
  proto.all = function (this: Stmt, ...args: unknown[]) {
    const c = before(this);
    const result = all.apply(this, args) as unknown[];
    if (c?.write) addRows(c, result.length); // ... returning
    return result;
  };
  const get = proto.get!;
  proto.get = function (this: Stmt, ...args: unknown[]) {
    const c = before(this);
    const result = get.apply(this, args);
    if (c?.write) addRows(c, result === undefined ? 0 : 1);
    return result;
  };
  const iterate = proto.iterate!;
  proto.iterate = function (this: Stmt, ...args: unknown[]) {
    before(this);
    return iterate.apply(this, args);
  };
  // better-sqlite3's own transactions (the group commit) run BEGIN/COMMIT natively: count the
  // outermost one when its function is entered (nested calls are savepoints).
  const dbProto = BetterSqlite3.prototype as unknown as { transaction: (fn: (...a: unknown[]) => unknown) => unknown };
  const transaction = dbProto.transaction;
  dbProto.transaction = function (this: BetterSqlite3.Database, fn: (...a: unknown[]) => unknown) {
    const db = this;
    return transaction.call(this, function (this: unknown, ...args: unknown[]) {
      const depth = depthOf.get(db) ?? 0;
      if (depth === 0 && !counters.paused) counts.writeTransactions++;
      depthOf.set(db, depth + 1);
      try {
        return fn.apply(this, args);
      } finally {
        depthOf.set(db, depth);
      }
    });
  };
  const depthOf = new Map<BetterSqlite3.Database, number>();
  sqliteCounters = counters;
  return counters;
}

let pgCounters: Counters | undefined;

/** The meter's own connection is left out of the counts by its application name. */
export const METER_APPLICATION = 'posthorn-bench-meter';

/** Patches pg's Client.query in this process (once): every query is one round trip. */
export function installPgCounters(): Counters {
  if (pgCounters) return pgCounters;
  const counts = { roundTrips: 0, writeTransactions: 0 };
  const counters: Counters = { paused: false, read: () => ({ ...counts }) };
  const inTx = new WeakSet<object>();
  const proto = pg.Client.prototype as unknown as { query: (...a: unknown[]) => unknown };
  const query = proto.query;
  proto.query = function (this: object, ...args: unknown[]) {
    const first = args[0];
    const text = typeof first === 'string' ? first : (first as { text?: string } | undefined)?.text;
    const application = (this as { connectionParameters?: { application_name?: string } }).connectionParameters?.application_name;
    if (!counters.paused && typeof text === 'string' && application !== METER_APPLICATION) {
      counts.roundTrips++;
      const c = classify(text);
      if (c.begin) inTx.add(this);
      else if (c.commit) {
        inTx.delete(this);
        counts.writeTransactions++;
      } else if (c.rollback) inTx.delete(this);
      else if (c.write && !inTx.has(this)) counts.writeTransactions++;
    }
    return query.apply(this, args);
  };
  pgCounters = counters;
  return counters;
}
