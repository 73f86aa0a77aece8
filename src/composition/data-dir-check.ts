import { accessSync, closeSync, constants, mkdirSync, openSync, readSync, statSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';

// SQLite's own answers to a data directory this user cannot write ("unable to open database
// file", "attempt to write a readonly database") name neither the file nor the cause; a
// newcomer meets them after one admin command run with sudo. Checked before the store opens.

/** What Posthorn writes in the data directory, when it is there already. */
const OWN_ENTRIES = ['posthorn.db', 'posthorn.db-wal', 'posthorn.db-shm', 'serve.lock', 'serve.pid', 'spool', 'tls'];

/** A directory Posthorn makes for its data: its owner's alone. */
export const PRIVATE_DIR_MODE = 0o700;

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

/**
 * When this user owns `path` and still cannot write it, the cause is its mode (or a read-only
 * file system), not its owner: a chown to the owner it has would change nothing.
 */
function ownModeError(what: string, path: string, chmod: string): Error | undefined {
  const st = statSync(path);
  if (st.uid !== process.getuid?.()) return undefined;
  const mode = (st.mode & 0o777).toString(8).padStart(4, '0');
  const needed = chmod === 'u+rwx' ? 0o300 : 0o200;
  if ((st.mode & needed) === needed) {
    return new Error(`${what} belongs to this user (${userName()}) and its mode ${mode} lets it write, yet it cannot: it is on a read-only file system (a mount, or systemd's ProtectSystem: add it to ReadWritePaths), ${ELSEWHERE}`);
  }
  return new Error(`${what} belongs to this user (${userName()}), but its mode ${mode} does not let it write: chmod ${chmod} ${path}, ${ELSEWHERE}`);
}

/** Throws an error naming the path, the cause and what to do, unless `dir` is a directory this process can write. */
export function checkDataDir(dir: string): void {
  try {
    // Only its owner may enter a new data directory: the store holds the DKIM private keys and
    // the API keys' hashes, the spool received mail.
    mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' || code === 'ENOTDIR') throw new Error(`the data directory ${dir} is not a directory: set dataDir (POSTHORN_DATA_DIR) to a directory this user can write`);
    throw new Error(`the data directory ${dir} cannot be created (${code}): create it for this user (${userName()}), ${ELSEWHERE}`);
  }
  if (!statSync(dir).isDirectory()) throw new Error(`the data directory ${dir} is not a directory: set dataDir (POSTHORN_DATA_DIR) to a directory this user can write`);
  if (!writable(dir, constants.W_OK | constants.X_OK)) {
    throw ownModeError(`the data directory ${dir}`, dir, 'u+rwx') ??
      new Error(
        `the data directory ${dir} is not writable by this user (${userName()}); it belongs to uid ${statSync(dir).uid}: ` +
          `run Posthorn as its owner, give it to this user (chown -R ${userName()} ${dir}), ${ELSEWHERE}`,
      );
  }
  checkStoreFile(join(dir, 'posthorn.db'));
  for (const name of OWN_ENTRIES) {
    const path = join(dir, name);
    let owner: number;
    try {
      owner = statSync(path).uid;
    } catch {
      continue; // not made yet
    }
    if (!writable(path, constants.W_OK)) {
      throw ownModeError(path, path, statSync(path).isDirectory() ? 'u+rwx' : 'u+rw') ?? new Error(
        `${path} is not writable by this user (${userName()}); it belongs to uid ${owner}, perhaps from a posthorn command run with sudo: ` +
          `run every posthorn command as the same user, give the directory to this one (chown -R ${userName()} ${dir}), ${ELSEWHERE}`,
      );
    }
  }
}

/** The first 16 bytes of every SQLite database file. */
const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1');

/**
 * SQLite answers a store file that is something else with "file is not a database" or "unable
 * to open database file", naming neither the file nor what to do. An empty file is a new store.
 */
function checkStoreFile(path: string): void {
  let size: number;
  try {
    const st = statSync(path);
    if (!st.isFile()) throw new Error(`the store file ${path} is not a file: move it out of the way, ${ELSEWHERE}`);
    size = st.size;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return; // a new store
    throw err;
  }
  if (size === 0 || !writable(path, constants.R_OK)) return; // empty: a new store; unreadable: named by the loop below
  const head = Buffer.alloc(SQLITE_HEADER.length);
  const fd = openSync(path, 'r');
  try {
    readSync(fd, head, 0, head.length, 0);
  } finally {
    closeSync(fd);
  }
  if (!head.equals(SQLITE_HEADER)) {
    throw new Error(`the store file ${path} is not a SQLite database: it was left as it is; restore it from a backup (operations.md, Backups), move it out of the way to start a new store, ${ELSEWHERE}`);
  }
}

/**
 * A warning when every user of the machine can read the SQLite store: the file readable by
 * others in a data directory they may enter (a store made before Posthorn made them private,
 * or copied in with a loose umask). Group access is the operator's choice (a 0750 state
 * directory), and a private directory protects a readable file.
 */
export function storeReadableByOthers(dir: string): string | undefined {
  const file = join(dir, 'posthorn.db');
  try {
    const fileMode = statSync(file).mode & 0o777;
    const dirMode = statSync(dir).mode & 0o777;
    if (!(fileMode & 0o004) || !(dirMode & 0o001)) return undefined;
    return (
      `${file} can be read by every user of this machine (mode ${fileMode.toString(8).padStart(4, '0')} in a directory of mode ${dirMode.toString(8).padStart(4, '0')}), ` +
      `and it holds the DKIM private keys and the API keys' hashes: chmod 700 ${dir}`
    );
  } catch {
    return undefined; // no store yet
  }
}
