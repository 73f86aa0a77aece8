import test from 'ava';
import type BetterSqlite3 from 'better-sqlite3';
import type pg from 'pg';
import { ManualClock } from '../../src/lib/clock.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

// The daily retention jobs read only what their indexes lead them to: no statement they run
// scans a whole table (a store of years of mail would be read every day). The statements are
// the ones the jobs really ran, recorded from the connection, then explained on the engine
// under test: SQLite's EXPLAIN QUERY PLAN, PostgreSQL's EXPLAIN with sequential scans priced
// out (on tables this small the planner would rightly prefer them), so a plan with a Seq Scan
// means no index fits.

interface Ran {
  sql: string;
  params: unknown[];
}

const clock = new ManualClock(Date.UTC(2026, 10, 27, 9, 0, 0));
let t0: TestApp;

test.before(async () => {
  t0 = await startTestApp({ clock, overrides: { retention: { contentDays: 1 } } });
});
test.after.always(async () => {
  await t0?.close();
});

/** Records the statements `fn` runs on the app's store. */
async function recording(fn: () => Promise<unknown>): Promise<Ran[]> {
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
async function plans(ran: Ran[]): Promise<{ sql: string; plan: string[] }[]> {
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

const scans = (plan: string[]) => plan.filter((line) => /^SCAN \w+/.test(line.trim()) || /Seq Scan on/.test(line));
const reading = (table: string) => (p: { sql: string }) => new RegExp(`^select .* from "${table}"`, 'i').test(p.sql);

test.serial('the content retention job scans no table: received mail and sandbox captures are found by their age through an index', async (t) => {
  const ran = await recording(async () => {
    if (!(await t0.app.runCronJob('purge-old-content', clock.now()))) throw new Error('no purge-old-content job');
  });
  const explained = await plans(ran);
  t.true(explained.length > 5, 'the job ran its statements');
  for (const p of explained) t.deepEqual(scans(p.plan), [], `${p.sql}\n${p.plan.join('\n')}`);

  const received = explained.filter(reading('received_emails'));
  t.is(received.length, 1, 'one statement finds the received mail to empty');
  t.regex(received[0]!.plan.join('\n'), /received_emails_created/);
  const sandbox = explained.filter(reading('sandbox_messages'));
  t.is(sandbox.length, 1, 'one statement finds the sandbox captures to delete');
  t.regex(sandbox[0]!.plan.join('\n'), /sandbox_messages_created/);
});

test.serial('the queue records job scans no table either', async (t) => {
  const ran = await recording(async () => {
    if (!(await t0.app.runCronJob('prune-queue-records', clock.now()))) throw new Error('no prune-queue-records job');
  });
  const explained = await plans(ran);
  t.true(explained.some((p) => /delivery_attempts/.test(p.sql)), 'the job ran its statements');
  // Small by construction, so read whole: shaping_rates holds a row per (source, rollup),
  // warmup_usage one per (source, rollup, day) for 90 days.
  for (const p of explained.filter((p) => !/shaping_rates|warmup_usage/.test(p.sql))) t.deepEqual(scans(p.plan), [], `${p.sql}\n${p.plan.join('\n')}`);
});
