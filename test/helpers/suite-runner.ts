import { spawn } from 'node:child_process';

/**
 * A run that reports no test result for this long has wedged (ava's own 60 s timeout did not
 * end it): it is killed and counted as a failure, so CI ends with a line that says so instead
 * of running into its time limit. Well above the longest test.
 */
export const SILENT_LIMIT_MS = 10 * 60_000;
/** A result line: TAP's `ok`/`not ok`, or the default reporter's tick and cross. */
const RESULT_LINE = /^(?:(?:not )?ok \d|\s*[✔✘])/m;

export interface WatchOptions {
  env?: NodeJS.ProcessEnv;
  silentLimitMs?: number;
  /** Where the run's output goes (stdout). */
  out?: NodeJS.WritableStream;
}

/**
 * Runs a test command (npm test's ava runs, run-suites.ts) with its output passed through;
 * resolves with its exit status, or 1 when it was killed for reporting nothing for too long.
 */
export function runWatched(name: string, cmd: string, args: string[], opts: WatchOptions = {}): Promise<number> {
  const silentLimitMs = opts.silentLimitMs ?? SILENT_LIMIT_MS;
  const out = opts.out ?? process.stdout;
  return new Promise((resolve) => {
    // Its own process group: a wedged run is killed with its workers and its PostgreSQL server,
    // none left holding the output pipe open.
    const child = spawn(cmd, args, { stdio: ['inherit', 'pipe', 'inherit'], env: opts.env ?? process.env, detached: true });
    const killGroup = (signal: NodeJS.Signals) => {
      try {
        process.kill(-child.pid!, signal);
      } catch {
        child.kill(signal);
      }
    };
    let lastResult = Date.now();
    child.stdout!.on('data', (chunk: Buffer) => {
      out.write(chunk);
      if (RESULT_LINE.test(chunk.toString('utf8'))) lastResult = Date.now();
    });
    let wedged = false;
    const watchdog = setInterval(
      () => {
        if (Date.now() - lastResult < silentLimitMs) return;
        wedged = true;
        clearInterval(watchdog);
        out.write(`not ok - ${name}: no test result for ${Math.round(silentLimitMs / 1000)} s; the run was killed (a test that never ends, and ava did not time it out)\n`);
        killGroup('SIGKILL');
      },
      Math.min(5_000, silentLimitMs / 4),
    );
    const forward = (signal: NodeJS.Signals) => killGroup(signal);
    process.on('SIGINT', forward);
    process.on('SIGTERM', forward);
    // 'close': after its output has all been forwarded.
    child.once('close', (code, signal) => {
      clearInterval(watchdog);
      process.off('SIGINT', forward);
      process.off('SIGTERM', forward);
      resolve(wedged ? 1 : (code ?? (signal ? 1 : 0)));
    });
  });
}
