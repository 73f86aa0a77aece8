import { createHash, randomBytes } from 'node:crypto';
import type pg from 'pg';
import { MIGRATIONS } from '../../src/store/migrations/index.js';
import { migrateToLatest } from '../../src/store/migrate.js';
import { startPgServer, type PgServer } from './pg-server.js';

/*
 * PostgreSQL databases for tests. `POSTHORN_TEST_STORE=postgres` makes every test app (and every
 * test that asks for a store) run on PostgreSQL instead of SQLite. The server is the one the run
 * started (test/helpers/with-postgres.ts sets POSTHORN_TEST_PG_ADMIN_URL), or one this test
 * process starts for itself when run alone. Each test app gets a database of its own, copied
 * from a migrated template, so tests never see each other's rows and start in milliseconds.
 */

export const TEST_STORE_ENV = 'POSTHORN_TEST_STORE';
export const ADMIN_URL_ENV = 'POSTHORN_TEST_PG_ADMIN_URL';

export function testStoreKind(): 'sqlite' | 'postgres' {
  return process.env[TEST_STORE_ENV] === 'postgres' ? 'postgres' : 'sqlite';
}

let ownServer: Promise<PgServer> | undefined;

/** The admin URL of the run's server, or of one started for this process. */
export async function pgAdminUrl(): Promise<string> {
  const shared = process.env[ADMIN_URL_ENV];
  if (shared) return shared;
  ownServer ??= startPgServer().then((server) => {
    process.once('exit', () => server.killNow());
    return server;
  });
  return (await ownServer).adminUrl;
}

/** Stops the server this process started for itself, if any (it is killed at exit otherwise). */
export async function stopOwnPgServer(): Promise<void> {
  if (ownServer) await (await ownServer).stop();
  ownServer = undefined;
}

function withDatabase(adminUrl: string, name: string): string {
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  return u.toString();
}

/** node-postgres, loaded only by processes that use PostgreSQL (most SQLite-run tests never do). */
const pgDriver = async () => (await import('pg')).default;

async function admin<T>(adminUrl: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new (await pgDriver()).Client({ connectionString: adminUrl });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** The template is named after the migrations it has, so a server kept across code changes never serves a stale one. */
const TEMPLATE = `posthorn_tpl_${createHash('sha256').update(Object.keys(MIGRATIONS).join(',')).digest('hex').slice(0, 12)}`;
const templates = new Map<string, Promise<void>>();

/** Creates and migrates the template once per server (test processes take turns with an advisory lock). */
function ensureTemplate(adminUrl: string): Promise<void> {
  let made = templates.get(adminUrl);
  if (!made) {
    made = admin(adminUrl, async (c) => {
      await c.query('select pg_advisory_lock(7411)');
      try {
        const exists = await c.query('select 1 from pg_database where datname = $1', [TEMPLATE]);
        if (exists.rowCount) return;
        const building = `${TEMPLATE}_build_${randomBytes(3).toString('hex')}`;
        await c.query(`create database ${building}`);
        const { openPgStore } = await import('../../src/store/pg/pg-store.js');
        const store = await openPgStore({ url: withDatabase(adminUrl, building), poolMax: 2, connectTimeoutMs: 10_000, durability: 'normal' });
        try {
          await migrateToLatest(store.db);
        } finally {
          await store.close();
        }
        await c.query(`alter database ${building} rename to ${TEMPLATE}`);
      } finally {
        await c.query('select pg_advisory_unlock(7411)');
      }
    });
    templates.set(adminUrl, made);
  }
  return made;
}

/** A fresh, migrated database; returns its URL. */
export async function createTestDatabase(): Promise<string> {
  const adminUrl = await pgAdminUrl();
  await ensureTemplate(adminUrl);
  const name = `posthorn_t_${randomBytes(6).toString('hex')}`;
  await admin(adminUrl, (c) => c.query(`create database ${name} template ${TEMPLATE}`));
  return withDatabase(adminUrl, name);
}

/** An empty database (no migrations), for tests of migrating and copying. */
export async function createEmptyDatabase(): Promise<string> {
  const adminUrl = await pgAdminUrl();
  const name = `posthorn_e_${randomBytes(6).toString('hex')}`;
  await admin(adminUrl, (c) => c.query(`create database ${name}`));
  return withDatabase(adminUrl, name);
}

/**
 * An empty database whose default collation is ICU's en-US, as a production server's UTF-8 locale
 * would give ("a" < "B" there, "B" < "a" by bytes), where the test server's C locale hides how
 * text orders. An app migrates it when it opens it; drop it with dropTestDatabase.
 */
export async function createIcuTestDatabase(): Promise<string> {
  const adminUrl = await pgAdminUrl();
  const name = `posthorn_icu_${randomBytes(6).toString('hex')}`;
  await admin(adminUrl, (c) => c.query(`create database ${name} template template0 encoding 'UTF8' locale_provider icu icu_locale 'en-US' locale 'C'`));
  return withDatabase(adminUrl, name);
}

/** Drops a test database, ending whatever still connects to it. */
export async function dropTestDatabase(url: string): Promise<void> {
  const name = new URL(url).pathname.slice(1);
  if (!/^posthorn_[a-z0-9_]+$/.test(name)) throw new Error(`not a test database: ${name}`);
  await admin(await pgAdminUrl(), (c) => c.query(`drop database if exists ${name} with (force)`));
}

/**
 * Resolves once another session of `client`'s database waits for a lock: the request under
 * test has reached the row a test's own open transaction holds (races made exact).
 */
export async function untilSomeoneWaitsForALock(client: pg.Client): Promise<void> {
  for (;;) {
    const r = await client.query(`select count(*)::int as n from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and wait_event_type = 'Lock'`);
    if (r.rows[0].n > 0) return;
  }
}
