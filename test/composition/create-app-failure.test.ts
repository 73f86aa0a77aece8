import test, { type ExecutionContext } from 'ava';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { tempDir } from '../helpers/temp-dir.js';
import { dropDataDirDatabase, testDatabaseUrl } from '../helpers/test-app.js';

// createApp opens the store (and, on SQLite, its checkpoint worker thread) first; a step after
// it that fails (here a missing outbound.caFile, read when the outbound side is wired) must
// close what was opened. Otherwise the process that asked cannot end: an admin command or a
// test's ava worker hangs, a caller retrying createApp piles up connections.

/** Deadline for the child to exit once createApp has failed; hitting it means a handle kept it alive (a PostgreSQL pool lets go of idle connections after 30 s only). */
const CHILD_EXIT_DEADLINE_MS = 15_000;

/** Runs the child in `mode`; its first line (createApp's outcome), and whether it then exited by itself. */
async function runChild(t: ExecutionContext, mode: 'ca-file' | 'migration'): Promise<{ stdout: string; stderr: string; code: number | null; signal: NodeJS.Signals | null }> {
  const dataDir = tempDir(t, 'posthorn-late-failure-');
  const { url } = await testDatabaseUrl(dataDir);
  t.teardown(() => dropDataDirDatabase(dataDir));
  const child = spawn(process.execPath, [fileURLToPath(new URL('./fixtures/create-app-fails-late-child.js', import.meta.url)), mode, dataDir, url], { stdio: ['ignore', 'pipe', 'pipe'] });
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let stdout = '';
  let stderr = '';
  let deadline: NodeJS.Timeout | undefined;
  child.stdout.on('data', (c: Buffer) => {
    stdout += c.toString();
    // The clock starts when createApp has failed: opening and migrating the store is not timed.
    if (!deadline && stdout.includes('\n')) deadline = setTimeout(() => child.kill('SIGKILL'), CHILD_EXIT_DEADLINE_MS);
  });
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on('exit', (c, s) => resolve([c, s])));
  clearTimeout(deadline);
  return { stdout, stderr, code, signal };
}

test('a createApp that fails after opening the store (a missing CA file) closes it: the process exits by itself', async (t) => {
  const ended = await runChild(t, 'ca-file');
  t.regex(ended.stdout, /^failed: .*\/nonexistent\/ca\.pem/, ended.stderr);
  t.is(ended.signal, null, `the child had to be killed: something createApp opened kept it alive. stderr: ${ended.stderr}`);
  t.is(ended.code, 0, ended.stderr);
});

test('a createApp whose migrations fail (a store a newer version ran) closes the store: the process exits by itself', async (t) => {
  const ended = await runChild(t, 'migration');
  t.regex(ended.stdout, /^failed: .*9999_from_a_newer_version/, ended.stderr);
  t.is(ended.signal, null, `the child had to be killed: something createApp opened kept it alive. stderr: ${ended.stderr}`);
  t.is(ended.code, 0, ended.stderr);
});
