import test from 'ava';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { startTestApp, storeEnvOf } from '../helpers/test-app.js';
import { tempDir } from '../helpers/temp-dir.js';

const run = promisify(execFile);
const BIN = fileURLToPath(new URL('../../../bin/posthorn', import.meta.url));

/** The CLI on the store a test app on this data dir uses (its PostgreSQL database when the tests run on PostgreSQL). */
async function cliOnAppStore(dataDir: string, ...args: string[]) {
  return run(process.execPath, [BIN, ...args], {
    env: { PATH: process.env.PATH, POSTHORN_DNS_SERVERS: '127.0.0.1:9', ...(await storeEnvOf(dataDir)) },
  });
}

test('keys create on an empty data dir makes team 1 and prints the key last; the key works against the API', async (t) => {
  const dataDir = tempDir(t, 'posthorn-cli-');
  const { stdout } = await cliOnAppStore(dataDir, 'keys', 'create', '--name', 'ci');
  const key = stdout.trim().split('\n').pop()!;
  t.regex(key, /^ph_[0-9a-z]{12}_/);
  const app = await startTestApp({ dataDir });
  try {
    const res = await app.request('GET', '/v1/apiKeys', { key });
    t.is(res.status, 200);
    t.true(res.body.some((k: any) => k.name === 'ci'));
  } finally {
    await app.stop();
  }
});
