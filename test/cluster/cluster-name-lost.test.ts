import test from 'ava';
import { createTestDatabase, dropTestDatabase } from '../helpers/pg-databases.js';
import { startTestApp } from '../helpers/test-app.js';

// A node frozen for longer than the dead-node timeout (a suspended VM) whose name another
// process took meanwhile: at its next beat it finds the name's row is not its own. It must not
// beat over it (the two would share a name, its leases and session counts, undetected): it stops
// and reports the condition, which `posthorn serve` turns into exit 1.

test('a node whose name another process took over while it was frozen stops, leaves the row to the new owner, and reports it', async (t) => {
  const url = await createTestDatabase();
  t.teardown(() => dropTestDatabase(url));
  let fatal!: (err: Error) => void;
  const reported = new Promise<Error>((resolve) => (fatal = resolve));
  const node = await startTestApp({ overrides: { store: { url }, cluster: { nodeName: 'node-frozen' } }, onFatal: fatal });
  t.teardown(() => node.close());
  const db = node.app.store.db;
  // Meanwhile another host started under the same name (the row is its own now).
  await db.updateTable('cluster_nodes').set({ hostname: 'other-host', pid: 4242, started_at: '2026-11-29T12:00:30.000Z' }).where('id', '=', 'node-frozen').execute();
  await node.app.cluster!.sweepNow();
  const err = await reported;
  t.regex(err.message, /cluster\.nodeName node-frozen was taken over by other-host, pid 4242/);
  t.deepEqual(await nameRow(url), { hostname: 'other-host', pid: 4242 });
  // The app has stopped: no more work is taken (its HTTP API is closed).
  await t.throwsAsync(fetch(`${node.baseUrl}/health`));
});

/** The name's row, read on a connection of the test's own (the node's store is closed). */
async function nameRow(url: string) {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const r = await client.query<{ hostname: string; pid: number }>("select hostname, pid from cluster_nodes where id = 'node-frozen'");
    return r.rows[0] && { hostname: r.rows[0].hostname, pid: Number(r.rows[0].pid) };
  } finally {
    await client.end();
  }
}
