import type { Command } from 'commander';
import { configFrom, loadApp } from './cli-context.js';

export function registerMigrate(program: Command): void {
  program
    .command('migrate')
    .description('apply pending database migrations (serve also does this on start)')
    .action(async (_opts, cmd: Command) => {
      const { migrateStore } = await loadApp();
      const applied = await migrateStore(configFrom(cmd));
      process.stdout.write(applied.length ? `applied ${applied.length} migration(s):\n${applied.map((m) => `  ${m}\n`).join('')}` : 'database is up to date\n');
    });
}
