import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';

/** The lock file and, beside it, the pid of its holder (for the refusal's message). */
const LOCK_FILE = 'serve.lock';
const HOLDER_FILE = 'serve.pid';

export interface ServeLock {
  release(): void;
}

/**
 * One `posthorn serve` per SQLite data directory: a server frees every lease at start (what a
 * previous run left), so a second one would take the first one's mail on the wire and send it
 * again. The lock is an exclusive SQLite lock on a file of its own, held for the life of the
 * connection (locking_mode EXCLUSIVE): the kernel drops it when the process ends however it
 * ends, so a killed server leaves nothing to clean up. Admin commands never take it.
 */
export function acquireServeLock(dataDir: string): ServeLock {
  const lock = new BetterSqlite3(join(dataDir, LOCK_FILE), { timeout: 0 });
  try {
    lock.pragma('locking_mode = EXCLUSIVE');
    lock.exec('BEGIN EXCLUSIVE');
    lock.exec('COMMIT');
  } catch (err) {
    lock.close();
    if ((err as { code?: string }).code !== 'SQLITE_BUSY') throw err;
    throw new Error(
      `another posthorn serve${holder(dataDir)} is running on the data directory ${dataDir}: stop it first, ` +
        'or give this one a data directory of its own (dataDir, POSTHORN_DATA_DIR); admin commands (posthorn keys, domains, send...) run beside it',
    );
  }
  writeFileSync(join(dataDir, HOLDER_FILE), `${process.pid}\n`);
  return { release: () => lock.close() };
}

function holder(dataDir: string): string {
  try {
    const pid = readFileSync(join(dataDir, HOLDER_FILE), 'utf8').trim();
    return /^\d+$/.test(pid) ? ` (pid ${pid})` : '';
  } catch {
    return '';
  }
}
