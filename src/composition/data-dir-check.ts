import { accessSync, constants, mkdirSync, statSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';

// SQLite's own answers to a data directory this user cannot write ("unable to open database
// file", "attempt to write a readonly database") name neither the file nor the cause; a
// newcomer meets them after one admin command run with sudo. Checked before the store opens.

/** What Posthorn writes in the data directory, when it is there already. */
const OWN_ENTRIES = ['posthorn.db', 'posthorn.db-wal', 'posthorn.db-shm', 'serve.lock', 'serve.pid', 'spool', 'tls'];

const ELSEWHERE = 'or set dataDir (POSTHORN_DATA_DIR) to a directory this user can write';

/** The user this process runs as, by name when it has one. */
function userName(): string {
  try {
    return userInfo().username;
  } catch {
    return String(process.getuid?.());
  }
}

function writable(path: string, mode: number): boolean {
  try {
    accessSync(path, mode);
    return true;
  } catch {
    return false;
  }
}

/** Throws an error naming the path, the cause and what to do, unless `dir` is a directory this process can write. */
export function checkDataDir(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' || code === 'ENOTDIR') throw new Error(`the data directory ${dir} is not a directory: set dataDir (POSTHORN_DATA_DIR) to a directory this user can write`);
    throw new Error(`the data directory ${dir} cannot be created (${code}): create it for this user (${userName()}), ${ELSEWHERE}`);
  }
  if (!statSync(dir).isDirectory()) throw new Error(`the data directory ${dir} is not a directory: set dataDir (POSTHORN_DATA_DIR) to a directory this user can write`);
  if (!writable(dir, constants.W_OK | constants.X_OK)) {
    throw new Error(
      `the data directory ${dir} is not writable by this user (${userName()}); it belongs to uid ${statSync(dir).uid}: ` +
        `run Posthorn as its owner, give it to this user (chown -R ${userName()} ${dir}), ${ELSEWHERE}`,
    );
  }
  for (const name of OWN_ENTRIES) {
    const path = join(dir, name);
    let owner: number;
    try {
      owner = statSync(path).uid;
    } catch {
      continue; // not made yet
    }
    if (!writable(path, constants.W_OK)) {
      throw new Error(
        `${path} is not writable by this user (${userName()}); it belongs to uid ${owner}, perhaps from a posthorn command run with sudo: ` +
          `run every posthorn command as the same user, give the directory to this one (chown -R ${userName()} ${dir}), ${ELSEWHERE}`,
      );
    }
  }
}
