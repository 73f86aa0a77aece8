import { Command, CommanderError } from 'commander';
import { AppError } from '../core/errors.js';
import { ConfigError } from '../config/load.js';
import { registerServe } from './serve-command.js';
import { registerMigrate } from './migrate-command.js';
import { registerTeams } from './teams-command.js';
import { registerKeys } from './keys-command.js';
import { registerConfig } from './config-command.js';
import { registerDomains } from './domains-command.js';
import { registerQueue, registerSend } from './send-command.js';
import { registerUsers } from './users-command.js';

export function buildProgram(): Command {
  const program = new Command();
  program
    .name('posthorn')
    .description('Posthorn: self-hosted email delivery')
    .option('-c, --config <path>', 'TOML config file (environment variables override it)')
    .showHelpAfterError()
    .exitOverride();
  registerServe(program);
  registerMigrate(program);
  registerTeams(program);
  registerKeys(program);
  registerConfig(program);
  registerDomains(program);
  registerSend(program);
  registerQueue(program);
  registerUsers(program);
  return program;
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
    process.exitCode = 1;
  }
}
