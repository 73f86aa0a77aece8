import test from 'ava';
import { readFileSync } from 'node:fs';
import { PassThrough } from 'node:stream';
import { runWatched } from './suite-runner.js';

// npm test's watchdog (suite-runner.ts): a run that stops reporting results is killed with
// everything it started, and fails with a line that says why; a run that reports passes through.

function captured() {
  const out = new PassThrough();
  let text = '';
  out.on('data', (c: Buffer) => (text += c.toString('utf8')));
  return { out, text: () => text };
}

/** Running: neither gone nor a zombie waiting to be reaped by whoever adopted it. */
const running = (pid: number) => {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};

/** Until the process is no longer running (SIGKILL is delivered asynchronously), within a bound. */
async function ended(pid: number): Promise<boolean> {
  for (let i = 0; i < 200 && running(pid); i++) await new Promise((r) => setTimeout(r, 10));
  return !running(pid);
}

test('a run that reports a result and then nothing more is killed with its children, and fails saying why', async (t) => {
  const c = captured();
  // The child starts a grandchild that never ends (an ava worker), reports one result, then hangs.
  const script = `
    const { spawn } = require('node:child_process');
    const g = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'inherit' });
    console.log('grandchild ' + g.pid);
    console.log('ok 1 - first');
    setInterval(() => {}, 1000);`;
  const status = await runWatched('SQLite', process.execPath, ['-e', script], { silentLimitMs: 1_500, out: c.out });
  t.is(status, 1);
  t.regex(c.text(), /^ok 1 - first$/m, 'its output passed through');
  t.regex(c.text(), /^not ok - SQLite: no test result for 2 s; the run was killed/m);
  const grandchild = Number(/grandchild (\d+)/.exec(c.text())![1]);
  t.true(await ended(grandchild), 'the process group went with it');
});

test('a run that ends on its own keeps its exit status and adds nothing', async (t) => {
  const c = captured();
  t.is(await runWatched('SQLite', process.execPath, ['-e', "console.log('ok 1 - a'); process.exitCode = 3"], { silentLimitMs: 60_000, out: c.out }), 3);
  t.is(c.text(), 'ok 1 - a\n');
  t.is(await runWatched('SQLite', process.execPath, ['-e', "console.log('  ✔ a')"], { silentLimitMs: 60_000, out: c.out }), 0);
});
