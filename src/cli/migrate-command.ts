import type { Command } from 'commander';
import { configFrom } from './cli-context.js';
import { openStore } from '../store/db.js';
import { migrateToLatest } from '../store/migrate.js';
import { join, resolve } from 'node:path';

export function registerMigrate(program: Command): void {
  program
    .command('migrate')
    .description('apply pending database migrations (serve also does this on start)')
    .action(async (_opts, cmd: Command) => {
      const config = configFrom(cmd);
      const store = openStore(join(resolve(config.dataDir), 'posthorn.db'));
      try {
        const { applied } = await migrateToLatest(store.db);
        process.stdout.write(applied.length ? `applied ${applied.length} migration(s):\n${applied.map((m) => `  ${m}\n`).join('')}` : 'database is up to date\n');
      } finally {
        await store.close();
      }
    });
}
