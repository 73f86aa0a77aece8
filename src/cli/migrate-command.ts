import type { Command } from 'commander';
import { configFrom } from './cli-context.js';
import { migrateStore } from '../app.js';

export function registerMigrate(program: Command): void {
  program
    .command('migrate')
    .description('apply pending database migrations (serve also does this on start)')
    .action(async (_opts, cmd: Command) => {
      const applied = await migrateStore(configFrom(cmd));
      process.stdout.write(applied.length ? `applied ${applied.length} migration(s):\n${applied.map((m) => `  ${m}\n`).join('')}` : 'database is up to date\n');
    });
}
