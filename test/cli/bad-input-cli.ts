import type { ExecutionContext } from 'ava';
import { storeEnvOf } from '../helpers/test-app.js';
import { runPosthornCli, type CliEnded } from '../helpers/cli-child.js';

// The command line's bad-input checks (bad-input.test.ts, bad-input-no-store.test.ts): a refusal
// is a one-line `posthorn: ...` naming what is wrong and a non-zero exit.

/**
 * The CLI on the data dir's store (its PostgreSQL database when the tests run on PostgreSQL), or
 * with no data dir set up (null: `env` names one). `input` is its standard input.
 */
export async function cli(dataDir: string | null, args: string[], env: Record<string, string> = {}, cwd?: string, input = ''): Promise<CliEnded> {
  const childEnv = { PATH: process.env.PATH!, POSTHORN_DNS_SERVERS: '127.0.0.1:9', ...(dataDir === null ? {} : await storeEnvOf(dataDir)), ...env };
  return runPosthornCli(args, { env: childEnv, cwd, input });
}

/** A path as a regular expression that matches it literally. */
export const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

export async function ok(t: ExecutionContext, dataDir: string, args: string[], env: Record<string, string> = {}): Promise<string> {
  const r = await cli(dataDir, args, env);
  t.is(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

/** Refused: exit `code`, stderr one line `posthorn: ...` matching `pattern`, nothing on stdout. */
export async function refused(t: ExecutionContext, dataDir: string | null, args: string[], pattern: RegExp, opts: { env?: Record<string, string>; code?: number; cwd?: string; input?: string } = {}): Promise<void> {
  const r = await cli(dataDir, args, opts.env, opts.cwd, opts.input);
  const what = `posthorn ${args.map((a) => JSON.stringify(a)).join(' ')}`;
  t.is(r.code, opts.code ?? 1, `${what} exits ${opts.code ?? 1}; stderr: ${r.stderr}`);
  t.is(r.stdout, '', `${what} prints no result`);
  const lines = r.stderr.trimEnd().split('\n');
  t.is(lines.length, 1, `${what} says one line: ${r.stderr}`);
  t.regex(lines[0]!, /^posthorn: /, what);
  t.regex(lines[0]!, pattern, what);
}
