import type { Command } from 'commander';
import { cliCommand, configFrom, loadApp } from './cli-context.js';
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
          `To restore: stop the server, move posthorn.db and its -wal and -shm files out of the data directory, copy this file there as posthorn.db, start the server.\n`,
      );
    });
}
