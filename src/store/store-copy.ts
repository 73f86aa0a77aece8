import { existsSync } from 'node:fs';
import { dirname } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import type pg from 'pg';
import { openStore } from './db.js';
import { acquireServeLock } from './serve-lock.js';
import { migrateToLatest } from './migrate.js';
import { databaseUrlTarget, PgStoreUnsupportedError, redactDatabaseUrl } from './pg/pg-url.js';

/*
 * `posthorn store copy --to postgres://...`: moves a SQLite installation to PostgreSQL, every
 * table, keeping ids, so a user grows without losing history (docs/operations.md).
 *
 * - Both stores are migrated to the same schema first (the same migrations run on both).
 * - The target must hold no data: a copy never merges into an installation.
 * - The source is read in one read transaction (a consistent snapshot, even if a server still
 *   writes; writes after it are not copied, so the server is stopped first).
 * - Tables go parents first (foreign keys), in batches of multi-row INSERTs, all in one
 *   PostgreSQL transaction: a failed copy leaves the target as empty as it was.
 * - Columns are copied by name; the rowid column PostgreSQL has for the tables whose order
 *   relies on SQLite's rowid (pg-schema-plugin.ts) gets the source's rowid. Sequences are set
 *   past the largest id copied and the largest SQLite ever gave (sqlite_sequence: a deleted
 *   row's id is never given again there), so new rows neither collide nor reuse an id.
 * - At the end every table is counted on both sides.
 */

/** Parameters in one statement stay well under PostgreSQL's 65,535. */
const MAX_PARAMS = 30_000;
const MAX_BATCH_ROWS = 1000;
/** Kysely's own bookkeeping: each store has its own (the target was migrated itself). */
const SKIPPED = /^(sqlite_|kysely_migration)/;

export interface CopyProgress {
  table: string;
  /** Rows copied so far, and the table's rows in the source snapshot. */
  copied: number;
  total: number;
}

export interface CopyCount {
  table: string;
  source: number;
  target: number;
}

export interface CopyReport {
  /** Rows per table, in copy order. */
  counts: CopyCount[];
  /** Every table has as many rows in the target as in the source. */
  ok: boolean;
  /** The target URL with its password hidden. */
  target: string;
}

export class CopyRefused extends Error {}

/** The tables of a SQLite store, each after the tables its foreign keys point to. */
function tablesInCopyOrder(sqlite: BetterSqlite3.Database): string[] {
  const names = (sqlite.prepare("select name from sqlite_master where type = 'table' order by name").all() as { name: string }[]).map((r) => r.name).filter((n) => !SKIPPED.test(n));
  const parents = new Map(names.map((n) => [n, (sqlite.prepare(`pragma foreign_key_list(${quote(n)})`).all() as { table: string }[]).map((f) => f.table).filter((p) => p !== n)]));
  const ordered: string[] = [];
  const placed = new Set<string>();
  const visiting = new Set<string>();
  const visit = (n: string) => {
    if (placed.has(n) || visiting.has(n) || !parents.has(n)) return;
    visiting.add(n);
    for (const p of parents.get(n)!) visit(p);
    visiting.delete(n);
    placed.add(n);
    ordered.push(n);
  };
  for (const n of names) visit(n);
  return ordered;
}

function quote(identifier: string): string {
  return `"${identifier.replace(/"/g, '""')}"`;
}

interface TargetColumn {
  name: string;
  serial: string | null;
  integer: boolean;
}

async function targetColumns(client: pg.PoolClient, table: string): Promise<TargetColumn[]> {
  const res = await client.query<{ column_name: string; seq: string | null; data_type: string }>(
    `select column_name, data_type, case when column_default like 'nextval(%' then pg_get_serial_sequence($1, column_name) end as seq
     from information_schema.columns where table_schema = current_schema() and table_name = $1 order by ordinal_position`,
    [table],
  );
  return res.rows.map((r) => ({ name: r.column_name, serial: r.seq, integer: ['bigint', 'integer', 'smallint'].includes(r.data_type) }));
}

/**
 * A value as PostgreSQL can store it. SQLite keeps a fraction in an integer column (its type is
 * an affinity): the shaper's times for a rate such as 3/s are 333.3 ms apart. PostgreSQL's
 * shaper rounds them to the millisecond; so does the copy, where bigint would refuse the row.
 * A text value PostgreSQL cannot store is named, so the operator can find the row.
 */
function checkValue(table: string, column: TargetColumn, rowid: number, value: unknown): unknown {
  if (column.integer && typeof value === 'number' && !Number.isInteger(value) && Number.isFinite(value)) return Math.round(value);
  if (typeof value === 'string' && value.includes('\u0000')) {
    throw new CopyRefused(`table ${table}, row ${rowid}, column ${column.name} contains the NUL character, which PostgreSQL cannot store in text; remove it from the row and copy again`);
  }
  return value;
}

/** Copies the SQLite store in `sqliteFile` into the empty PostgreSQL database at `targetUrl`. */
export async function copySqliteToPostgres(opts: { sqliteFile: string; targetUrl: string; onProgress?: (p: CopyProgress) => void; connectTimeoutMs?: number }): Promise<CopyReport> {
  if (!existsSync(opts.sqliteFile)) throw new CopyRefused(`there is no SQLite store at ${opts.sqliteFile}: point dataDir (POSTHORN_DATA_DIR) at the installation to copy`);
  // Not beside a running server, and no server starts while the copy runs.
  const lock = acquireServeLock(dirname(opts.sqliteFile), 'store copy');
  let source: ReturnType<typeof openStore>;
  try {
    source = openStore(opts.sqliteFile, { durability: 'normal' });
  } catch (err) {
    lock.release();
    throw err;
  }
  try {
    await migrateToLatest(source.db);
    const { openPgStore } = await import('./pg/pg-store.js');
    const target = await openPgStore({ url: opts.targetUrl, poolMax: 2, connectTimeoutMs: opts.connectTimeoutMs ?? 10_000, durability: 'full', applicationName: 'posthorn store copy' }).catch((err: unknown) => {
      if (err instanceof PgStoreUnsupportedError) throw err;
      // pg says only "connect ECONNREFUSED 127.0.0.1:9": name it as the copy's target (never its password).
      const reason = (err as Error).message || String((err as { code?: unknown }).code ?? err);
      throw new CopyRefused(`the target PostgreSQL database at ${databaseUrlTarget(opts.targetUrl)} cannot be reached: ${reason}`);
    });
    try {
      await migrateToLatest(target.db);
      return await copyTables(source.sqlite, target.pool, opts);
    } finally {
      await target.close();
    }
  } finally {
    await source.close();
    lock.release();
  }
}

async function copyTables(sqlite: BetterSqlite3.Database, pool: pg.Pool, opts: { targetUrl: string; onProgress?: (p: CopyProgress) => void }): Promise<CopyReport> {
  const client = await pool.connect();
  // One snapshot of the source for the whole copy and its counts.
  sqlite.exec('begin');
  try {
    const tables = tablesInCopyOrder(sqlite);
    for (const table of tables) {
      const r = await client.query(`select exists (select 1 from ${quote(table)}) as used`);
      if (r.rows[0].used) throw new CopyRefused(`the target database already holds data (table ${table} has rows): copy into an empty database`);
    }
    const sourceCounts = new Map(tables.map((t) => [t, (sqlite.prepare(`select count(*) as n from ${quote(t)}`).get() as { n: number }).n]));
    await client.query('begin');
    try {
      for (const table of tables) await copyTable(sqlite, client, table, sourceCounts.get(table)!, opts.onProgress);
      await client.query('commit');
    } catch (err) {
      await client.query('rollback').catch(() => undefined);
      throw err;
    }
    const counts: CopyCount[] = [];
    for (const table of tables) {
      const r = await client.query<{ n: number }>(`select count(*) as n from ${quote(table)}`);
      counts.push({ table, source: sourceCounts.get(table)!, target: Number(r.rows[0]!.n) });
    }
    return { counts, ok: counts.every((c) => c.source === c.target), target: redactDatabaseUrl(opts.targetUrl) };
  } finally {
    sqlite.exec('commit');
    client.release();
  }
}

/** The AUTOINCREMENT column of `table` and the largest id SQLite gave it (sqlite_sequence), if it has one. */
function autoincrementGiven(sqlite: BetterSqlite3.Database, table: string): { column: string; seq: number } | null {
  if (!sqlite.prepare("select 1 from sqlite_master where type = 'table' and name = 'sqlite_sequence'").get()) return null;
  const row = sqlite.prepare('select seq from sqlite_sequence where name = ?').get(table) as { seq: number } | undefined;
  const pk = (sqlite.prepare(`pragma table_info(${quote(table)})`).all() as { name: string; pk: number }[]).filter((c) => c.pk > 0);
  return row && pk.length === 1 ? { column: pk[0]!.name, seq: Number(row.seq) } : null;
}

async function copyTable(sqlite: BetterSqlite3.Database, client: pg.PoolClient, table: string, total: number, onProgress?: (p: CopyProgress) => void): Promise<void> {
  const columns = await targetColumns(client, table);
  const sourceColumns = new Set((sqlite.prepare(`pragma table_info(${quote(table)})`).all() as { name: string }[]).map((c) => c.name));
  // PostgreSQL's explicit rowid (for the tables that order by it) takes SQLite's implicit one.
  const copied = columns.filter((c) => sourceColumns.has(c.name) || c.name === 'rowid');
  const missing = [...sourceColumns].filter((c) => !columns.some((t) => t.name === c));
  if (missing.length) throw new CopyRefused(`table ${table}: the target has no column ${missing.join(', ')} (the two stores are not on the same schema)`);
  const select = sqlite.prepare(
    `select rowid as "__rowid", ${copied.map((c) => (c.name === 'rowid' && !sourceColumns.has('rowid') ? 'rowid as "rowid"' : quote(c.name))).join(', ')} from ${quote(table)} where rowid > ? order by rowid limit ?`,
  );
  const perBatch = Math.max(1, Math.min(MAX_BATCH_ROWS, Math.floor(MAX_PARAMS / copied.length)));
  const columnList = copied.map((c) => quote(c.name)).join(', ');
  let after = Number.MIN_SAFE_INTEGER;
  let done = 0;
  onProgress?.({ table, copied: 0, total });
  for (;;) {
    const rows = select.all(after, perBatch) as Record<string, unknown>[];
    if (!rows.length) break;
    const params: unknown[] = [];
    const tuples = rows.map((row) => {
      const marks = copied.map((c) => {
        params.push(checkValue(table, c, row.__rowid as number, row[c.name]));
        return `$${params.length}`;
      });
      return `(${marks.join(', ')})`;
    });
    await client.query(`insert into ${quote(table)} (${columnList}) values ${tuples.join(', ')}`, params);
    after = rows.at(-1)!.__rowid as number;
    done += rows.length;
    onProgress?.({ table, copied: done, total });
  }
  // New rows take ids after the copied ones, and after every id SQLite ever gave: AUTOINCREMENT
  // never gives a deleted row's id again (a revoked API key's id stays on the emails it sent).
  const given = autoincrementGiven(sqlite, table);
  for (const c of columns) {
    if (!c.serial) continue;
    const floor = given && c.name === given.column ? given.seq : 0;
    await client.query(`select setval($1, greatest(coalesce((select max(${quote(c.name)}) from ${quote(table)}), 0), $2::bigint) + 1, false)`, [c.serial, floor]);
  }
}
