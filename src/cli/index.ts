import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { AppError } from '../core/errors.js';
import { ConfigError } from '../config/load.js';
import { registerServe } from './serve-command.js';
import { registerMigrate } from './migrate-command.js';
import { registerTeams } from './teams-command.js';
import { registerKeys } from './keys-command.js';
import { registerConfig } from './config-command.js';
import { registerDomains } from './domains-command.js';
import { registerSend } from './send-command.js';
import { registerQueue } from './queue-command.js';
import { registerInit } from './init-command.js';
import { registerServerDns } from './server-dns-command.js';
import { registerUsers } from './users-command.js';
import { registerStore } from './store-command.js';
import { EXIT_CONFIG_ERROR } from './systemd-unit.js';

/** The package's version (dist/src/cli/index.js -> package.json at the root). */
export function posthornVersion(): string {
  return (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}

export function buildProgram(): Command {
  const program = new Command();
  program
    .name('posthorn')
    .description('Posthorn: self-hosted email delivery')
    .version(posthornVersion(), '-V, --version', 'print the version and exit')
    .option('-c, --config <path>', 'TOML config file (environment variables override it)')
    .exitOverride();
  registerServe(program);
  registerMigrate(program);
  registerTeams(program);
  registerKeys(program);
  registerConfig(program);
  registerDomains(program);
  registerSend(program);
  registerQueue(program);
  registerInit(program);
  registerServerDns(program);
  registerUsers(program);
  registerStore(program);
  oneLineUsageErrors(program);
  return program;
}

/**
 * A usage error (an unknown option, a missing argument) is one line like every other error,
 * `posthorn: <what is wrong>; <command> --help shows the usage`, instead of commander's
 * `error: ...` followed by the whole help.
 */
function oneLineUsageErrors(cmd: Command): void {
  const path: string[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) path.unshift(c.name());
  cmd.configureOutput({
    outputError: (str, write) => {
      // A suggestion comes on a line of its own: "\n(Did you mean --name?)".
      const message = str.replace(/^error: /, '').replace(/\s*\n\(Did you mean/g, ' (did you mean').trim().replace(/\.$/, '');
      write(`posthorn: ${message}; ${path.join(' ')} --help shows the usage\n`);
    },
  });
  for (const sub of cmd.commands) oneLineUsageErrors(sub);
}

export async function runCli(argv: string[]): Promise<void> {
  try {
    await buildProgram().parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      process.exitCode = err.exitCode;
      return;
    }
    const message = err instanceof AppError || err instanceof ConfigError || err instanceof Error ? err.message : String(err);
    process.stderr.write(`posthorn: ${message}\n`);
    // A service manager must not restart into the same bad configuration (systemd-unit.ts).
    // Exit now: a command that failed part way may have left something open (a worker, a
    // listener) that would otherwise keep the process running after its error was printed.
    process.exit(err instanceof ConfigError ? EXIT_CONFIG_ERROR : 1);
  }
}
