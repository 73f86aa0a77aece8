import test from 'ava';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { tempDir } from '../helpers/temp-dir.js';

// The operator's commands for egress pools and the shaping part of `posthorn queue`, run as the
// real binary on a data directory of its own.

const run = promisify(execFile);
const BIN = fileURLToPath(new URL('../../../bin/posthorn', import.meta.url));

const ENV = {
  POSTHORN_DNS_SERVERS: '127.0.0.1:9',
  POSTHORN_OUTBOUND_SOURCES: JSON.stringify([
    { name: 'ip2', localAddress: '127.0.0.2', ehloName: 'ip2.sender.test', warmup: { start: '2026-01-01', schedule: 'standard' } },
    { name: 'ip3', localAddress: '127.0.0.3' },
  ]),
  POSTHORN_OUTBOUND_POOLS: JSON.stringify([{ name: 'bulk', sources: ['ip2', 'ip3'] }, { name: 'solo', sources: ['ip3'] }]),
  POSTHORN_OUTBOUND_SHAPING: JSON.stringify([{ mx: 'google.com', messageRate: '20/s' }]),
};

function cli(dataDir: string, ...args: string[]) {
  return run(process.execPath, [BIN, ...args], { env: { PATH: process.env.PATH, POSTHORN_DATA_DIR: dataDir, ...ENV } });
}

test('teams set-pool and domains set-pool; queue summary shows sources, warm-up, holds and rates; queue resume lifts a hold', async (t) => {
  const dataDir = tempDir(t, 'posthorn-shaping-cli-');
  const team = (await cli(dataDir, 'teams', 'create', '--name', 'Acme')).stdout.trim();
  t.regex((await cli(dataDir, 'teams', 'set-pool', team, 'bulk')).stdout, new RegExp(`team ${team} sends through pool bulk`));
  t.regex((await cli(dataDir, 'teams', 'list')).stdout, /bulk/);
  const bad = await t.throwsAsync(cli(dataDir, 'teams', 'set-pool', team, 'nope'));
  t.regex((bad as any).stderr, /pool: no egress pool named "nope"/);
  await cli(dataDir, 'domains', 'add', 'news.example.com', '--team', team);
  t.regex((await cli(dataDir, 'domains', 'set-pool', 'news.example.com', 'solo')).stdout, /news\.example\.com sends through pool solo/);
  t.regex((await cli(dataDir, 'domains', 'set-pool', 'news.example.com', 'default')).stdout, /its team's pool/);

  // A hold as a remote reply leaves it (the engine writes the same row).
  const db = new Database(join(dataDir, 'posthorn.db'));
  db.prepare('insert into shaping_holds (id, source, rollup, kind, message_rate, reason, until_ms, created_at) values (?, ?, ?, ?, ?, ?, ?, ?)').run(
    'sh_clitest00000000000000',
    'ip2',
    'google.com',
    'suspend',
    null,
    'Gmail: unusual rate of unsolicited mail from this address (4.7.28): 421 4.7.28 ...',
    Date.now() + 3_600_000,
    new Date().toISOString(),
  );
  db.close();

  const summary = (await cli(dataDir, 'queue', 'summary')).stdout;
  t.regex(summary, /Egress sources/);
  t.regex(summary, /ip2\s+127\.0\.0\.2\s+ip2\.sender\.test\s+bulk, default\s+day \d+/);
  t.regex(summary, /Holds from remote replies/);
  t.regex(summary, /sh_clitest00000000000000\s+ip2\s+google\.com\s+suspend/);
  t.regex(summary, /Message rates[\s\S]*every\s+google\.com\s+20\/s\s+configured/);
  const json = JSON.parse((await cli(dataDir, 'queue', '--json')).stdout);
  t.is(json.shaping.holds[0].id, 'sh_clitest00000000000000');
  t.deepEqual(json.shaping.pools.map((p: any) => p.name), ['bulk', 'solo', 'default']);

  t.regex((await cli(dataDir, 'queue', 'resume', 'sh_clitest00000000000000')).stdout, /lifted/);
  t.deepEqual(JSON.parse((await cli(dataDir, 'queue', '--json')).stdout).shaping.holds, []);
  const gone = await t.throwsAsync(cli(dataDir, 'queue', 'resume', 'sh_clitest00000000000000'));
  t.regex((gone as any).stderr, /not found/);
});
