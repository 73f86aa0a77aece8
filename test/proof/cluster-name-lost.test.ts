import test from 'ava';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { startDnsZone } from '../helpers/dns-zone.js';
import { createTestDatabase, dropTestDatabase } from '../helpers/pg-databases.js';
import { loopbackEnv, startPosthorn, type PosthornProcess } from './helpers/posthorn-process.js';

// A real `posthorn serve` node whose cluster.nodeName another process took over while it was
// frozen (here: the name's row rewritten as another host's, as that process's join leaves it)
// finds the row not its own at its next beat: it logs cluster.name_lost, stops and exits 1 with
// the reason on stderr, as a start refused its name would, and leaves the row to its owner.

test('a serve node whose name was taken over while it was silent stops and exits 1', async (t) => {
  t.timeout(120_000);
  const url = await createTestDatabase();
  const zone = await startDnsZone();
  const dir = mkdtempSync(join(tmpdir(), 'posthorn-name-lost-'));
  let node: PosthornProcess | undefined;
  const client = new pg.Client({ connectionString: url });
  t.teardown(async () => {
    await node?.kill();
    await client.end().catch(() => undefined);
    await zone.close();
    rmSync(dir, { recursive: true, force: true });
    await dropTestDatabase(url);
  });
  node = await startPosthorn({ env: loopbackEnv({ dataDir: dir, dnsServer: zone.server, sinkPort: 9 }, { POSTHORN_DATABASE_URL: url, POSTHORN_NODE_NAME: 'node-taken' }) });
  await client.connect();
  await client.query("update cluster_nodes set hostname = 'other-host', pid = 4242, started_at = '2026-11-29T12:00:00.000Z' where id = 'node-taken'");
  t.is(await node.exited, 1);
  t.regex(node.output(), /"event":"cluster\.name_lost"/);
  t.regex(node.output(), /posthorn: cluster\.nodeName node-taken was taken over by other-host, pid 4242/);
  const row = (await client.query<{ hostname: string; pid: number }>("select hostname, pid from cluster_nodes where id = 'node-taken'")).rows[0];
  t.deepEqual(row && { hostname: row.hostname, pid: Number(row.pid) }, { hostname: 'other-host', pid: 4242 });
});
