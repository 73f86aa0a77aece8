import type { Command } from 'commander';
import { configFrom } from './cli-context.js';
import { isPublicUrlDerived, redactConfig } from '../config/load.js';
import { configExample } from '../config/config-example.js';

export function registerConfig(program: Command): void {
  const config = program.command('config').description('inspect the configuration');
  config
    .command('print')
    .description('print the effective configuration (defaults <- file <- environment), secrets redacted')
    .action(async (_opts, cmd: Command) => {
      const effective = configFrom(cmd);
      process.stdout.write(`${JSON.stringify(redactConfig(effective), null, 2)}\n`);
      // stderr, so stdout stays one JSON document.
      if (isPublicUrlDerived(effective)) {
        process.stderr.write(
          `posthorn: publicUrl is not set, so it is derived from http.host and http.port: ${effective.publicUrl}. ` +
            'Tracking, unsubscribe and confirmation links use it; set publicUrl (POSTHORN_PUBLIC_URL) to the URL the world reaches.\n',
        );
      }
    });
  config
    .command('example')
    .description('print a commented configuration file with every key at its default (config.example.toml)')
    .action(() => {
      process.stdout.write(configExample());
    });
}
