import type { Command } from 'commander';
import { configFrom } from './cli-context.js';
import { redactConfig } from '../config/load.js';
import { configExample } from '../config/config-example.js';

export function registerConfig(program: Command): void {
  const config = program.command('config').description('inspect the configuration');
  config
    .command('print')
    .description('print the effective configuration (defaults <- file <- environment), secrets redacted')
    .action(async (_opts, cmd: Command) => {
      process.stdout.write(`${JSON.stringify(redactConfig(configFrom(cmd)), null, 2)}\n`);
    });
  config
    .command('example')
    .description('print a commented configuration file with every key at its default (config.example.toml)')
    .action(() => {
      process.stdout.write(configExample());
    });
}
