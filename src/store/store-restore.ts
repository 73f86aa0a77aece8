import { closeSync, copyFileSync, existsSync, fchmodSync, fsyncSync, lstatSync, mkdirSync, openSync, readSync, renameSync, rmSync, statSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { newestMigration, unknownMigrations } from './migrate.js';
import { MIGRATIONS } from './migrations/index.js';
import { acquireServeLock } from './serve-lock.js';

/*
 * `posthorn store restore --from <file>`: puts a backup (store backup) in place as the data
 * directory's posthorn.db (docs/operations.md, Backups).
 *
 * - The backup is checked before anything is touched: SQLite's header, a full
 *   `integrity_check`, the migrations table, and no migration this release does not have (a
 *   newer release's store would fail at start, or worse, be half understood).
 * - Never over a store: posthorn.db, and also a lone posthorn.db-wal or -shm, since SQLite
 *   replays an old WAL over the database beside it. `--force` renames them aside with a
 *   `.before-restore-<UTC time>` suffix instead of deleting them: a restore over the wrong
 *   directory can be undone.
 * - Never under a server: it holds the serve lock for the restore, as store copy does.
 * - Written as a store is made (data directory 0700, file 0600), under a temporary name in the
 *   data directory, synced, then renamed: posthorn.db is either absent or the whole backup.
 */

export class RestoreRefused extends Error {}

/** What a data directory holds of a store: each must be gone before a backup takes its place. */
const STORE_FILES = ['posthorn.db', 'posthorn.db-wal', 'posthorn.db-shm'];

/** The first 16 bytes of every SQLite database file. */
const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1');

export interface RestoreReport {
  /** The absolute path of the restored store. */
  target: string;
  /** The newest migration the backup holds. */
  latestMigration: string;
  /** Migrations of this release the backup does not hold yet: applied at the next start or migrate. */
  pending: string[];
  /** The names the files that were there got (--force), in the data directory. */
  movedAside: string[];
  bytes: number;
  ms: number;
}

export function restoreSqlite(opts: { dataDir: string; from: string; force: boolean; now?: Date }): RestoreReport {
  const started = Date.now();
  // resolve('') is the working directory: an unset variable in a script would name it.
  if (!opts.from) throw new RestoreRefused('--from names no file (an empty path): give the path of a backup written by posthorn store backup');
  const from = resolve(opts.from);
  const dataDir = resolve(opts.dataDir);
  const target = join(dataDir, 'posthorn.db');
  const { latestMigration, pending } = checkBackup(from);

  if (existsSync(dataDir) && !statSync(dataDir).isDirectory()) throw new RestoreRefused(`the data directory ${dataDir} is not a directory: set dataDir (POSTHORN_DATA_DIR) to the directory to restore into`);
  // Asked before the lock is taken (which writes serve.lock): a refusal leaves the directory as it was.
  const present = presentStoreFiles(dataDir);
  if (present.length > 0 && !opts.force) throw occupied(dataDir, present);
  // Made as serve makes it: the store holds the DKIM private keys and the API keys' hashes.
  try {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  } catch (err) {
    throw new RestoreRefused(`the data directory ${dataDir} cannot be created (${(err as NodeJS.ErrnoException).code ?? String(err)}): create it for this user, or set dataDir (POSTHORN_DATA_DIR) to a directory this user can write`);
  }
  let lock;
  try {
    lock = acquireServeLock(dataDir, 'store restore');
  } catch (err) {
    if ((err as { code?: string }).code) throw new RestoreRefused(`cannot take the data directory ${dataDir} (${(err as { code: string }).code}): run posthorn as the user that owns it`);
    throw err;
  }
  try {
    // Again under the lock: a server that stopped just now, or a store made meanwhile.
    const now = presentStoreFiles(dataDir);
    if (now.length > 0 && !opts.force) throw occupied(dataDir, now);
    const partial = join(dataDir, `.posthorn.db.restore-${process.pid}`);
    try {
      writeCopy(from, partial);
      const movedAside = moveAside(dataDir, now, opts.now ?? new Date());
      renameSync(partial, target);
      syncPath(dataDir, 'r');
      return { target, latestMigration, pending, movedAside, bytes: statSync(target).size, ms: Date.now() - started };
    } finally {
      rmSync(partial, { force: true });
    }
  } finally {
    lock.release();
  }
}

function occupied(dataDir: string, present: string[]): RestoreRefused {
  const them = present.length === 1 ? 'it' : 'them';
  const why = present.includes('posthorn.db')
    ? 'a restore never replaces a store'
    : `SQLite would replay ${present.length === 1 ? 'that file' : 'those files'} over the restored store`;
  return new RestoreRefused(
    `${dataDir} already holds ${present.join(', ')}: ${why}; restore into an empty data directory, or --force moves ${them} aside (renamed NAME.before-restore-TIME, nothing deleted)`,
  );
}

/** The store files in the directory (as links too: a dangling one is a name taken). */
function presentStoreFiles(dataDir: string): string[] {
  return STORE_FILES.filter((name) => {
    try {
      lstatSync(join(dataDir, name));
      return true;
    } catch {
      return false;
    }
  });
}

/** Reads the backup on its own, read-only: a file that would not open as a store is never put in place. */
function checkBackup(from: string): { latestMigration: string; pending: string[] } {
  let st;
  try {
    st = statSync(from);
  } catch {
    throw new RestoreRefused(`there is no file ${from}: --from names the backup to restore (a file written by posthorn store backup)`);
  }
  if (st.isDirectory()) throw new RestoreRefused(`${from} is a directory: --from names the backup file, such as ${join(from, 'posthorn-backup.db')}`);
  const head = Buffer.alloc(SQLITE_HEADER.length);
  let fd: number;
  try {
    fd = openSync(from, 'r');
  } catch (err) {
    throw new RestoreRefused(`cannot read ${from} (${(err as NodeJS.ErrnoException).code ?? String(err)}): run posthorn as a user that can read it`);
  }
  try {
    readSync(fd, head, 0, head.length, 0);
  } finally {
    closeSync(fd);
  }
  if (!head.equals(SQLITE_HEADER)) throw new RestoreRefused(`${from} is not a SQLite database (it does not begin with SQLite's header): give a file written by posthorn store backup`);
  // A live store's file (copied, not backed up) may keep part of its content in its WAL, which
  // the copy below would leave behind.
  const wal = `${from}-wal`;
  if (existsSync(wal) && statSync(wal).size > 0) {
    throw new RestoreRefused(`${from} has a WAL beside it (${basename(wal)}): it is a store in use or copied with cp, not a backup; take one with posthorn store backup`);
  }
  let db: Database.Database | undefined;
  try {
    db = new Database(from, { readonly: true, fileMustExist: true });
    const check = db.pragma('integrity_check', { simple: true });
    if (check !== 'ok') throw new Error(String(check));
  } catch (err) {
    db?.close();
    throw new RestoreRefused(`${from} is damaged: SQLite's integrity check failed (${oneLine((err as Error).message ?? String(err))}); nothing was restored; restore another backup`);
  }
  try {
    const hasMigrations = db.prepare("select 1 from sqlite_master where type = 'table' and name = 'kysely_migration'").get();
    if (!hasMigrations) throw new RestoreRefused(`${from} is a SQLite database but not a Posthorn store (it has no kysely_migration table): give a file written by posthorn store backup`);
    const applied = (db.prepare('select name from kysely_migration order by name').all() as { name: string }[]).map((r) => r.name);
    const known = Object.keys(MIGRATIONS);
    const unknown = unknownMigrations(applied);
    if (unknown.length > 0) {
      throw new RestoreRefused(
        `${from} was made by a newer Posthorn release: it holds migration ${unknown.join(', ')}, which this release (its newest is ${newestMigration()}) does not know; restore it with that release or a newer one`,
      );
    }
    const latest = applied[applied.length - 1];
    if (!latest) throw new RestoreRefused(`${from} is an empty Posthorn store (no migration ever ran in it): it holds no installation to restore`);
    return { latestMigration: latest, pending: known.filter((name) => !applied.includes(name)) };
  } finally {
    db.close();
  }
}

/** The copy, made for its owner only (0600 whatever the umask, as a new store) and synced. */
function writeCopy(from: string, partial: string): void {
  closeSync(openSync(partial, 'wx', 0o600));
  copyFileSync(from, partial);
  const fd = openSync(partial, 'r+');
  try {
    fchmodSync(fd, 0o600);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  if (statSync(partial).size !== statSync(from).size) throw new Error(`the copy of ${from} in the data directory is not whole (the disk full?); nothing was restored`);
}

/** --force: each store file renamed NAME.before-restore-<UTC time>, kept beside the restored store. */
function moveAside(dataDir: string, present: string[], now: Date): string[] {
  const stamp = now.toISOString().replace(/\.\d+Z$/, 'Z').replace(/[-:]/g, '');
  const names = present.map((name) => ({ name, aside: `${name}.before-restore-${stamp}` }));
  for (const { aside } of names) {
    if (existsSync(join(dataDir, aside))) throw new RestoreRefused(`${join(dataDir, aside)} already exists (a restore this very second): run it again`);
  }
  for (const { name, aside } of names) renameSync(join(dataDir, name), join(dataDir, aside));
  return names.map((n) => n.aside);
}

function oneLine(s: string): string {
  const lines = s.split('\n').map((l) => l.trim()).filter(Boolean);
  return lines.length > 3 ? `${lines.slice(0, 3).join('; ')}; ...` : lines.join('; ');
}

/** fsync of a directory: the rename in it survives a power cut. */
function syncPath(path: string, flags: 'r'): void {
  const fd = openSync(path, flags);
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
