import type BetterSqlite3 from 'better-sqlite3';
import type pg from 'pg';
import type { TestApp } from './test-app.js';

// The statements a piece of work really runs, recorded from the connection, then explained on
// the engine under test: SQLite's EXPLAIN QUERY PLAN, PostgreSQL's EXPLAIN with sequential scans
// priced out (on tables this small the planner would rightly prefer them), so a plan with a Seq
// Scan means no index fits.

export interface Ran {
  sql: string;
  params: unknown[];
}

/** Records the statements `fn` runs on the app's store. */
export async function recording(t0: TestApp, fn: () => Promise<unknown>): Promise<Ran[]> {
  const store = t0.app.store;
  const ran: Ran[] = [];
  if (store.kind === 'sqlite') {
    const sqlite = store.sqlite;
    const prepare = sqlite.prepare;
    sqlite.prepare = ((source: string) => {
      const stmt = prepare.call(sqlite, source);
      // Kysely passes the parameters as one array, the hot paths one by one.
      return new Proxy(stmt, {
        get(target, p) {
          const v = Reflect.get(target, p, target) as unknown;
          if (typeof v !== 'function') return v;
          if (p === 'all' || p === 'run' || p === 'get' || p === 'iterate') {
            return (...args: unknown[]) => {
              ran.push({ sql: source, params: Array.isArray(args[0]) ? (args[0] as unknown[]) : args });
              return (v as (...a: unknown[]) => unknown).apply(target, args);
            };
          }
          return (v as (...a: unknown[]) => unknown).bind(target);
        },
      });
    }) as BetterSqlite3.Database['prepare'];
    try {
      await fn();
    } finally {
      sqlite.prepare = prepare;
    }
    return ran;
  }
  const wrapped = new WeakSet<pg.PoolClient>();
  const originals = new Map<pg.PoolClient, pg.PoolClient['query']>();
  const wrap = (client: pg.PoolClient) => {
    if (wrapped.has(client)) return;
    wrapped.add(client);
    const query = client.query;
    originals.set(client, query);
    client.query = ((...args: unknown[]) => {
      // Kysely passes (text, values), the hot paths a config object ({ text, values, name }).
      const [first, second] = args as [unknown, unknown];
      if (typeof first === 'string') ran.push({ sql: first, params: (second as unknown[] | undefined) ?? [] });
      else if (first && typeof first === 'object' && 'text' in first) {
        const config = first as { text: string; values?: unknown[] };
        ran.push({ sql: config.text, params: config.values ?? [] });
      }
      return (query as (...a: unknown[]) => unknown).apply(client, args);
    }) as pg.PoolClient['query'];
  };
  store.pool.on('acquire', wrap);
  try {
    await fn();
  } finally {
    store.pool.off('acquire', wrap);
    for (const [client, query] of originals) client.query = query;
  }
  return ran;
}

const isDml = (sql: string) => /^\s*(select|update|delete|insert)\b/i.test(sql);

/** Each statement's plan, one line per node. */
export async function plans(t0: TestApp, ran: Ran[]): Promise<{ sql: string; plan: string[] }[]> {
  const store = t0.app.store;
  const out: { sql: string; plan: string[] }[] = [];
  const seen = new Set<string>();
  const unique = ran.filter((r) => isDml(r.sql) && !seen.has(r.sql) && seen.add(r.sql));
  if (store.kind === 'sqlite') {
    for (const r of unique) {
      const rows = store.sqlite.prepare(`explain query plan ${r.sql}`).all(...r.params) as { detail: string }[];
      out.push({ sql: r.sql, plan: rows.map((row) => row.detail) });
    }
    return out;
  }
  const client = await store.pool.connect();
  try {
    await client.query('begin');
    await client.query('set local enable_seqscan = off');
    for (const r of unique) {
      const res = await client.query<{ 'QUERY PLAN': string }>(`explain ${r.sql}`, r.params);
      out.push({ sql: r.sql, plan: res.rows.map((row) => row['QUERY PLAN']) });
    }
    await client.query('rollback');
  } finally {
    client.release();
  }
  return out;
}

/** The lines of a plan that read a whole table. */
export const scans = (plan: string[]) => plan.filter((line) => /^SCAN \w+/.test(line.trim()) || /Seq Scan on/.test(line));
