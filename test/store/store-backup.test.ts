import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import test from 'ava';
import { BackupRefused, giveName } from '../../src/store/store-backup.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

// `posthorn store backup --to <file>` copies a SQLite installation while its server runs and
// keeps accepting mail. The copy, put in place as posthorn.db of a new data directory, is the
// same installation: every email accepted before the backup began, the same API key.

const run = promisify(execFile);
const BIN = fileURLToPath(new URL('../../../bin/posthorn', import.meta.url));

function storeBackup(dataDir: string, to: string, extraEnv: Record<string, string> = {}) {
  return run(process.execPath, [BIN, 'store', 'backup', '--to', to], { env: { PATH: process.env.PATH!, POSTHORN_DATA_DIR: dataDir, ...extraEnv } });
}

const nextYear = () => new Date(Date.now() + 365 * 86_400_000).toISOString();

async function send(t0: TestApp, from: string, i: number, key?: string): Promise<string> {
  // Scheduled a year ahead: only acceptance matters here, nothing is delivered.
  const res = await t0.request('POST', '/v1/emails', { key, body: { from, to: `reader${i}@example.net`, subject: `Issue ${i}`, text: `Body ${i}`, scheduledAt: nextYear() } });
  if (res.status !== 200) throw new Error(`send ${i}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.emailId as string;
}

test('a backup taken while the server accepts mail restores the installation as of its start', async (t) => {
  t.timeout(120_000);
  const t0 = await startTestApp({ overrides: { store: { url: '' } } });
  let restored: TestApp | undefined;
  t.teardown(async () => {
    await t0.stop();
    await restored?.stop();
  });
  const domain = await addVerifiedDomain(t0, 'backup.dev');
  const from = `News <news@${domain.name}>`;
  const before: string[] = [];
  for (let i = 0; i < 40; i++) before.push(await send(t0, from, i));

  // Sends go on while the backup runs: the server is not stopped, nor slowed into errors.
  const target = join(mkdtempSync(join(tmpdir(), 'posthorn-backup-')), 'posthorn-backup.db');
  let backingUp = true;
  let during = 0;
  const load = (async () => {
    for (let i = 1000; backingUp; i++) {
      await send(t0, from, i);
      during++;
    }
  })();
  const out = await storeBackup(t0.dataDir, target).finally(() => {
    backingUp = false;
  });
  await load;
  t.regex(out.stdout, /^backed up to .*posthorn-backup\.db: [\d.]+ MB, \d+ tables, checked, in [\d.]+ s \(schema \d{14}-[\w-]+\)$/m);
  t.regex(out.stdout, /^To restore: stop the server, then .*posthorn store restore --from .*posthorn-backup\.db$/m);
  t.true(existsSync(target));
  // It holds the DKIM private keys and the key hashes: readable by its owner only, whatever the umask.
  t.is(statSync(target).mode & 0o777, 0o600);
  t.deepEqual(readdirSync(join(target, '..')), ['posthorn-backup.db'], 'no temporary file left beside it');
  t.log(`${during} sends accepted while the backup ran`);
  t.is((await t0.request('GET', '/health')).status, 200);

  // Restore: the copy as posthorn.db of a new data directory.
  const dataDir = mkdtempSync(join(tmpdir(), 'posthorn-restored-'));
  copyFileSync(target, join(dataDir, 'posthorn.db'));
  restored = await startTestApp({ dataDir, overrides: { store: { url: '' } } });
  for (const id of before) {
    const res = await restored.request('GET', `/v1/emails/${id}`, { key: t0.key });
    t.is(res.status, 200, id);
    t.is(res.body.subject, `Issue ${before.indexOf(id)}`);
  }
  t.is((await restored.request('GET', `/v1/domains/${domain.id}`, { key: t0.key })).body.status, 'SUCCESS', 'the domain and its DKIM key came along');
  // The restored installation takes new mail.
  t.truthy(await send(restored, from, 9999, t0.key));
});

test('store backup refuses what it cannot do, with a clear message and exit code 1', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'posthorn-backup-refusals-'));
  const refused = async (dataDir: string, to: string, pattern: RegExp, env: Record<string, string> = {}) => {
    const err = (await t.throwsAsync(storeBackup(dataDir, to, env))) as unknown as { stderr: string; code: number };
    t.regex(err.stderr, pattern);
    t.is(err.code, 1);
  };
  await refused(join(dir, 'empty'), join(dir, 'a.db'), /there is no SQLite store at .*posthorn\.db: point dataDir \(POSTHORN_DATA_DIR\)/);

  const t0 = await startTestApp({ overrides: { store: { url: '' } } });
  t.teardown(() => t0.stop());
  const existing = join(dir, 'existing.db');
  writeFileSync(existing, 'an earlier backup');
  await refused(t0.dataDir, existing, /existing\.db already exists: a backup never overwrites a file/);
  await refused(t0.dataDir, join(dir, 'missing', 'b.db'), /the directory .*missing does not exist/);
  // A path through a file: the system's error on the hidden partial file would name neither the
  // target nor what to do.
  await refused(t0.dataDir, join(existing, 'b.db'), /cannot write .*existing\.db\/b\.db: .*existing\.db is not a directory/);
  await refused(t0.dataDir, dir, /is a directory: --to names the new file to write, such as .*posthorn-backup\.db/);
  await refused(t0.dataDir, '', /--to names no file \(an empty path\): give the path of the new file/);
  await refused(t0.dataDir, join(dir, 'c.db'), /the configured store is PostgreSQL .*pg_dump/, { POSTHORN_DATABASE_URL: 'postgres://posthorn:secret@127.0.0.1:9/posthorn' });
  t.deepEqual(readdirSync(dir).sort(), ['existing.db'], 'nothing written by a refused backup');
});

test('the copy takes its name only if nothing has it: a file that appeared during the backup is kept', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'posthorn-backup-name-'));
  const partial = join(dir, '.b.db.partial-1');
  const target = join(dir, 'b.db');
  writeFileSync(partial, 'the new copy');
  writeFileSync(target, 'another backup, made meanwhile');
  t.throws(() => giveName(partial, target), { instanceOf: BackupRefused, message: /b\.db already exists/ });
  t.is(readFileSync(target, 'utf8'), 'another backup, made meanwhile');
  const free = join(dir, 'c.db');
  giveName(partial, free);
  t.is(readFileSync(free, 'utf8'), 'the new copy');
  t.false(existsSync(partial), 'the temporary name is gone');
});
