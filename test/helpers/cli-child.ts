import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** bin/posthorn of this checkout. */
export const POSTHORN_BIN = fileURLToPath(new URL('../../../bin/posthorn', import.meta.url));

export interface CliEnded {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `posthorn args...` to its end with `input` on standard input; a non-zero exit is a result, not a rejection. */
export function runPosthornCli(args: string[], opts: { env: Record<string, string>; cwd?: string; input?: string }): Promise<CliEnded> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [POSTHORN_BIN, ...args], { env: opts.env, cwd: opts.cwd });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(opts.input ?? '');
  });
}
