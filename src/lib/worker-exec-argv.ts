/*
 * The command-line flags a worker thread may inherit. Node refuses, and a Worker then fails to
 * start, when its execArgv carries V8 heap options (--max-old-space-size, --max-semi-space-size,
 * ...; an operator's `node --max-old-space-size=512 bin/posthorn serve` passes them) or an
 * option of the main module only (--input-type). Those apply to the main thread alone; a worker
 * is sized by its own resourceLimits.
 */
const NOT_FOR_WORKERS = /^--(input-type|max[-_](old|semi)[-_]space[-_]size|max[-_]young[-_]generation[-_]size|stack[-_]size|title)(=|$)/;

export function workerExecArgv(): string[] {
  const argv: string[] = [];
  for (let i = 0; i < process.execArgv.length; i++) {
    const arg = process.execArgv[i]!;
    if (NOT_FOR_WORKERS.test(arg)) {
      if (!arg.includes('=') && i + 1 < process.execArgv.length && !process.execArgv[i + 1]!.startsWith('-')) i++; // and its value
      continue;
    }
    argv.push(arg);
  }
  return argv;
}
