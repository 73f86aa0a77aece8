import type pg from 'pg';

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
