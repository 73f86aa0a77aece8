import { closeSync, existsSync, fsyncSync, linkSync, openSync, renameSync, rmSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import Database from 'better-sqlite3';

/*
 * `posthorn store backup --to <file>`: an online copy of a SQLite installation, taken while the
 * server runs (docs/operations.md, Backups).
 *
 * - `VACUUM INTO` writes the copy from one read transaction: a consistent snapshot of the moment
 *   it began, however busy the server is. WAL readers do not block writers, so sends go on
 *   meanwhile (the WAL is not checkpointed past the snapshot until the copy ends). SQLite's
 *   page-by-page backup API would start again after every write by the server, and a busy
 *   server writes every few milliseconds.
 * - The copy is a single file with nothing in a WAL: the whole installation (the DKIM keys and
 *   the link secret included), ready to be put in place as posthorn.db.
 * - It is written under a temporary name beside the target, checked (`quick_check`, the schema
 *   present), synced to disk, then given the target's name: a target that exists is always a
 *   whole, checked copy. An existing file is never overwritten.
 */

export class BackupRefused extends Error {}

const alreadyThere = (target: string) => new BackupRefused(`${target} already exists: a backup never overwrites a file; name a new one (for example with the date in it)`);

export interface BackupReport {
  /** The absolute path of the copy. */
  target: string;
  bytes: number;
  tables: number;
  /** The newest migration the copy holds: the Posthorn version it needs is that or newer. */
  latestMigration: string | null;
  ms: number;
}

/** Waits this long for a lock the server holds (a checkpoint's brief exclusive moment). */
const BUSY_TIMEOUT_MS = 10_000;

export function backupSqlite(opts: { sqliteFile: string; target: string }): BackupReport {
  const started = Date.now();
  // resolve('') is the working directory: an unset variable in a script would name it.
  if (!opts.target) throw new BackupRefused('--to names no file (an empty path): give the path of the new file to write');
  const source = resolve(opts.sqliteFile);
  const target = resolve(opts.target);
  if (!existsSync(source)) throw new BackupRefused(`there is no SQLite store at ${source}: point dataDir (POSTHORN_DATA_DIR) at the installation to back up`);
  if (existsSync(target) && statSync(target).isDirectory()) throw new BackupRefused(`${target} is a directory: --to names the new file to write, such as ${join(target, 'posthorn-backup.db')}`);
  if (existsSync(target)) throw alreadyThere(target);
  if (!existsSync(dirname(target))) throw new BackupRefused(`the directory ${dirname(target)} does not exist: create it first`);
  if (!statSync(dirname(target)).isDirectory()) throw new BackupRefused(`cannot write ${target}: ${dirname(target)} is not a directory`);
  const partial = resolve(dirname(target), `.${basename(target)}.partial-${process.pid}`);
  try {
    // The copy holds DKIM private keys and key hashes: made empty, for its owner only, before
    // SQLite fills it (VACUUM INTO takes an empty file), so it is never readable by others.
    closeSync(openSync(partial, 'wx', 0o600));
  } catch (err) {
    // The system's error names the hidden partial file, not the target.
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    throw new BackupRefused(`cannot write ${target}: the directory ${dirname(target)} refuses a new file (${code}); choose a directory this user can write to`);
  }
  try {
    const db = new Database(source, { fileMustExist: true });
    try {
      db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
      db.prepare('VACUUM INTO ?').run(partial);
    } finally {
      db.close();
    }
    const { tables, latestMigration } = checkCopy(partial);
    syncPath(partial, 'r+');
    giveName(partial, target);
    syncPath(dirname(target), 'r');
    return { target, bytes: statSync(target).size, tables, latestMigration, ms: Date.now() - started };
  } catch (err) {
    rmSync(partial, { force: true });
    throw err;
  }
}

/**
 * The checked copy takes the target's name, never over a file that appeared meanwhile (two
 * backups to one name): a hard link fails if the name exists. A file system without hard links
 * gets a rename after the check.
 */
export function giveName(partial: string, target: string): void {
  try {
    linkSync(partial, target);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') throw alreadyThere(target);
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP' && code !== 'ENOSYS') throw err;
    if (existsSync(target)) throw alreadyThere(target);
    renameSync(partial, target);
    return;
  }
  rmSync(partial);
}

/** Opens the copy on its own and reads it back: a copy that cannot be restored is no backup. */
function checkCopy(file: string): { tables: number; latestMigration: string | null } {
  const copy = new Database(file, { readonly: true, fileMustExist: true });
  try {
    const check = copy.pragma('quick_check', { simple: true });
    if (check !== 'ok') throw new Error(`the copy failed SQLite's integrity check (${String(check)}); nothing was kept`);
    const tables = (copy.prepare("select count(*) as n from sqlite_master where type = 'table' and name not like 'sqlite_%'").get() as { n: number }).n;
    const hasMigrations = copy.prepare("select 1 from sqlite_master where type = 'table' and name = 'kysely_migration'").get();
    const latest = hasMigrations ? (copy.prepare('select name from kysely_migration order by name desc limit 1').get() as { name: string } | undefined) : undefined;
    return { tables, latestMigration: latest?.name ?? null };
  } finally {
    copy.close();
  }
}

/** fsync of a file (`r+`) or of a directory (`r`: the rename in it survives a power cut). */
function syncPath(path: string, flags: 'r' | 'r+'): void {
  const fd = openSync(path, flags);
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
