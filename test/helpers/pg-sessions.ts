import pg from 'pg';
import type { Config } from '../../src/config/defaults.js';
import type { Clock } from '../../src/lib/clock.js';
import { createTestDatabase, dropTestDatabase, pgAdminUrl } from './pg-databases.js';
import { startMailWorld, type MailWorld } from './mail-world.js';
import type { DeepPartial } from '../../src/config/load.js';

/**
 * The pid of a session of this database (not `client`'s own) that waits for a lock, in a
 * statement on `table` when given: the app's write under test, held by a lock the test took.
 * Polls pg_stat_activity until there is one.
 */
export async function lockWaiter(client: pg.Client, table?: string): Promise<number> {
  for (;;) {
    const r = await client.query<{ pid: number }>(
      `select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and wait_event_type = 'Lock' and ($1::text is null or position($1 in query) > 0)`,
      [table ?? null],
    );
    if (r.rows[0]) return r.rows[0].pid;
  }
}

/**
 * A mail world on a fresh PostgreSQL database, with a plain session of that database (to watch
 * and lock) and a superuser session (to end the app's sessions).
 */
export async function startPgCutWorld(clock: Clock, overrides: DeepPartial<Config> = {}): Promise<PgCutWorld> {
  const url = await createTestDatabase();
  const w = await startMailWorld({ clock, overrides: { ...overrides, store: { url } } });
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const admin = new pg.Client({ connectionString: await pgAdminUrl() });
  await admin.connect();
  return {
    url,
    w,
    client,
    admin,
    async close() {
      await admin.end();
      await client.end();
      await w.close();
      await dropTestDatabase(url);
    },
  };
}

export interface PgCutWorld {
  url: string;
  w: MailWorld;
  client: pg.Client;
  admin: pg.Client;
  close(): Promise<void>;
}
