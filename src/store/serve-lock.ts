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
 * ends, so a killed server leaves nothing to clean up. Admin commands never take it, except
 * `posthorn store copy` and `store restore`, which must not run beside a server and hold it
 * while they work.
 */
export function acquireServeLock(dataDir: string, command: 'serve' | 'store copy' | 'store restore' = 'serve'): ServeLock {
  const lock = new BetterSqlite3(join(dataDir, LOCK_FILE), { timeout: 0 });
  try {
    lock.pragma('locking_mode = EXCLUSIVE');
    lock.exec('BEGIN EXCLUSIVE');
    lock.exec('COMMIT');
  } catch (err) {
    lock.close();
    if ((err as { code?: string }).code !== 'SQLITE_BUSY') throw err;
    const other = holder(dataDir);
    const running = `${other.command === 'serve' ? (command === 'serve' ? 'another posthorn serve' : 'posthorn serve') : `posthorn ${other.command}`}${other.pid}`;
    throw new Error(
      command === 'serve'
        ? `${running} is running on the data directory ${dataDir}: stop it first, ` +
            'or give this one a data directory of its own (dataDir, POSTHORN_DATA_DIR); admin commands (posthorn keys, domains, send...) run beside it'
        : command === 'store copy'
          ? // A copy of a live store misses what the server writes after the copy's snapshot, and its migration would write under the server.
            `${running} is running on the data directory ${dataDir}: stop it before posthorn store copy, so that the copy holds every message it accepted`
          : // A server keeps the store it opened (and its WAL) and would go on writing there.
            `${running} is running on the data directory ${dataDir}: stop it before posthorn store restore (a running server keeps the store it opened)`,
    );
  }
  writeFileSync(join(dataDir, HOLDER_FILE), command === 'serve' ? `${process.pid}\n` : `${process.pid} ${command}\n`);
  return { release: () => lock.close() };
}

/** Who holds the lock, from the holder file: its pid (" (pid 12)", or nothing when unknown) and its command. */
function holder(dataDir: string): { pid: string; command: string } {
  try {
    const m = /^(\d+)(?: (.+))?$/.exec(readFileSync(join(dataDir, HOLDER_FILE), 'utf8').trim());
    return m ? { pid: ` (pid ${m[1]})`, command: m[2] ?? 'serve' } : { pid: '', command: 'serve' };
  } catch {
    return { pid: '', command: 'serve' };
  }
}
