import { resolve } from 'node:path';
import type { Command } from 'commander';
import { cliCommand, configFrom, loadApp, shellWord } from './cli-context.js';
import type { CopyProgress } from '../app.js';

/** A progress line at most every this many rows of a table (and at its end). */
const PROGRESS_EVERY_ROWS = 10_000;

export function registerStore(program: Command): void {
  const store = program.command('store').description('the data store (SQLite in dataDir, or PostgreSQL at store.url)');
  store
    .command('copy')
    .description('copy this SQLite installation (dataDir) into an empty PostgreSQL database; stop posthorn serve first')
    .requiredOption('--to <url>', 'the target, postgres://user:password@host:5432/database (it must hold no data)')
    .action(async (opts: { to: string }, cmd: Command) => {
      const out = (line: string) => process.stdout.write(`${line}\n`);
      // A line per table: when it is done (and every PROGRESS_EVERY_ROWS rows of a big one).
      let last = { table: '', copied: 0 };
      let announced = false;
      const progress = (p: CopyProgress) => {
        // Once the target answered: a refusal before that is the only thing printed.
        if (!announced) {
          announced = true;
          out('copying every table (the source is read as one snapshot; the target is written in one transaction)');
        }
        if (p.table !== last.table) {
          last = { table: p.table, copied: 0 };
          if (p.total === 0) out(`  ${p.table}: empty`);
          return;
        }
        if (p.copied === p.total || p.copied - last.copied >= PROGRESS_EVERY_ROWS) {
          last.copied = p.copied;
          out(`  ${p.table}: ${p.copied} of ${p.total} rows${p.copied === p.total ? ', done' : ''}`);
        }
      };
      const { copyStoreTo } = await loadApp();
      const report = await copyStoreTo(configFrom(cmd), opts.to, progress);
      out('');
      out('verification (rows per table):');
      const width = Math.max(5, ...report.counts.map((c) => c.table.length));
      out(`  ${'table'.padEnd(width)}  ${'source'.padStart(9)}  ${'target'.padStart(9)}`);
      for (const c of report.counts) out(`  ${c.table.padEnd(width)}  ${String(c.source).padStart(9)}  ${String(c.target).padStart(9)}${c.source === c.target ? '' : '  MISMATCH'}`);
      const rows = report.counts.reduce((n, c) => n + c.target, 0);
      if (!report.ok) {
        const bad = report.counts.filter((c) => c.source !== c.target).map((c) => c.table);
        throw new Error(`verification failed: ${bad.join(', ')} differ between the source and ${report.target}`);
      }
      out('');
      out(`copied ${report.counts.length} tables, ${rows} rows, into ${report.target}; every table verified.`);
      out(`Next: set store.url (or POSTHORN_DATABASE_URL) to that database and start the server (${cliCommand(cmd, 'serve')}).`);
    });
  store
    .command('backup')
    .description('write a consistent copy of this SQLite installation to a new file; safe while posthorn serve runs')
    .requiredOption('--to <file>', 'the file to create (never overwritten), for example /var/backups/posthorn-2026-11-27.db')
    .action(async (opts: { to: string }, cmd: Command) => {
      const { backupStoreTo } = await loadApp();
      const report = await backupStoreTo(configFrom(cmd), opts.to);
      const mb = (report.bytes / 1024 / 1024).toFixed(1);
      process.stdout.write(
        `backed up to ${report.target}: ${mb} MB, ${report.tables} tables, checked, in ${(report.ms / 1000).toFixed(1)} s` +
          `${report.latestMigration ? ` (schema ${report.latestMigration})` : ''}\n` +
          `To restore: stop the server, then ${cliCommand(cmd, `store restore --from ${shellWord(report.target)}`)}\n`,
      );
    });
  store
    .command('restore')
    .description('put a backup (store backup) in place as the data directory\'s posthorn.db, checked first; stop posthorn serve first')
    .requiredOption('--from <file>', 'the backup file to restore')
    .option('--force', 'move the store files already in the data directory aside (posthorn.db, -wal, -shm renamed NAME.before-restore-TIME) instead of refusing')
    .action(async (opts: { from: string; force?: boolean }, cmd: Command) => {
      const { restoreStoreFrom } = await loadApp();
      const report = await restoreStoreFrom(configFrom(cmd), opts.from, opts.force === true);
      const out = (line: string) => process.stdout.write(`${line}\n`);
      out(`restored ${resolve(opts.from)} to ${report.target}: checked (integrity_check ok), schema ${report.latestMigration}, ${(report.bytes / 1024 / 1024).toFixed(1)} MB, in ${(report.ms / 1000).toFixed(1)} s`);
      if (report.movedAside.length > 0) out(`moved aside: ${report.movedAside.join(', ')} (in the data directory; delete ${report.movedAside.length === 1 ? 'it' : 'them'} once the restored store is right)`);
      const n = report.pending.length;
      if (n === 0) out(`It has this release's schema: start the server (${cliCommand(cmd, 'serve')}).`);
      else out(`${n} migration${n === 1 ? '' : 's'} of this release ${n === 1 ? 'is' : 'are'} not in it yet (${report.pending.join(', ')}): ${n === 1 ? 'it is' : 'they are'} applied at the next start (posthorn serve) or by posthorn migrate.`);
    });
}
