import { existsSync, realpathSync } from 'node:fs';
import { delimiter, isAbsolute, join, relative, resolve } from 'node:path';
import type { Command } from 'commander';
import { ConfigError, loadConfig, unknownEnvNames } from '../config/load.js';
import type { Config } from '../config/defaults.js';
import type { App } from '../app.js';
import { createLogger } from '../lib/logger.js';
import { poolOf } from '../core/teams/team-service.js';
import { DEFAULT_POOL } from '../core/shaping/egress.js';

/**
 * The app's modules, loaded by the commands that build it: `--help`, `init` and `config` answer
 * without loading them (~0.6 s of the CLI's ~0.8 s start).
 */
export const loadApp = () => import('../app.js');

/**
 * The config for a command: the global --config file, then the environment. A POSTHORN_*
 * variable that is no setting is said on stderr (`serve` logs it instead): a mistyped
 * POSTHORN_DATA_DIR would otherwise have the command work on ./data without a word.
 */
export function configFrom(cmd: Command, opts: { warnUnknownEnv?: boolean } = {}): Config {
  const root = cmd.optsWithGlobals() as { config?: string };
  // `--config "$UNSET"` must not run on the defaults (another data directory, a new empty store).
  if (root.config === '') throw new ConfigError('--config names no file (an empty path): give the path of the TOML config file, or leave --config out');
  const config = loadConfig({ configFile: root.config });
  if (opts.warnUnknownEnv ?? true) {
    for (const { name, near } of unknownEnvNames(process.env)) {
      process.stderr.write(`posthorn: warning: ${name} is set but is no setting of Posthorn, so it changes nothing${near ? ` (did you mean ${near}?)` : ''}\n`);
    }
  }
  return config;
}

/** How an admin command uses the app (withApp). */
export interface AppUse {
  /** What needs the config but no store (an egress pool's name): checked before the store is opened. */
  check?: (config: Config) => void;
  /**
   * The command makes what it is asked for (a team, a key, a domain), so it may start a new
   * store. Every other works on data that must exist already: without a store it is refused.
   */
  makesStore?: boolean;
}

/**
 * Builds the app for an admin command (store open and migrated, no listeners), runs fn, closes.
 * A command checks its arguments before: a refused one must not make a store (a new, empty
 * database in dataDir) nor pay for loading the app. Nor does one that needs data (a user to
 * delete, a message to trace) when there is no store: a new, empty one could only answer that
 * nothing is there, and would be left behind in what is probably the wrong directory.
 */
export async function withApp<T>(cmd: Command, fn: (app: App) => Promise<T>, use: AppUse = {}): Promise<T> {
  const config = configFrom(cmd);
  use.check?.(config);
  const newStore = isNewStore(config);
  if (newStore && !use.makesStore) throw noStore(cmd, config);
  // Admin commands print their result on stdout (`keys create`: the key is its last line), so
  // their logs (warnings and errors only) go to stderr.
  const { createApp } = await loadApp();
  const app = await createApp({
    config,
    logger: createLogger('warn', { destination: 'stderr' }),
    // A few rows written and the store closed, whose close checkpoints: no checkpoint worker.
    backgroundCheckpoints: false,
    // PostgreSQL's counterpart of the missing file: a database nothing was migrated on.
    refuseNewStore: use.makesStore ? undefined : () => noStore(cmd, config),
  });
  if (newStore) noteNewStore(config);
  try {
    return await fn(app);
  } finally {
    await app.stop();
  }
}

/** The SQLite store of dataDir. */
const storeFile = (config: Config) => join(resolve(config.dataDir), 'posthorn.db');

/** Whether the command is about to make the SQLite store: there is no database in dataDir yet. */
const isNewStore = (config: Config) => !config.store.url && !existsSync(storeFile(config));

/** The refusal of a command that needs data when there is no store (withApp). */
function noStore(cmd: Command, config: Config): Error {
  const migrate = cliCommand(cmd, 'migrate');
  if (config.store.url) {
    return new Error(
      `the PostgreSQL database of store.url (POSTHORN_DATABASE_URL) holds no Posthorn store yet: this command works on existing data; point store.url at the server's database, or make a new store there with ${migrate}`,
    );
  }
  return new Error(
    `there is no store at ${storeFile(config)}: this command works on existing data; point POSTHORN_DATA_DIR (or dataDir in the --config file) at the server's data directory, or make a new store there with ${migrate}`,
  );
}

/**
 * Run from another directory than the server's, a command opens ./data there: a new, empty
 * store, whose keys and users that server never sees. Said on stderr (stdout is the result).
 */
function noteNewStore(config: Config): void {
  process.stderr.write(
    `posthorn: no database in ${resolve(config.dataDir)} yet, so this command started a new, empty one there; a posthorn serve sees what it makes only on this data directory (run admin commands from the directory the server runs in, or with its POSTHORN_DATA_DIR and --config)\n`,
  );
}

export const shellWord = (w: string) => (/^[\w/.:@%+=,-]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`);

/** Whether `posthorn` on PATH is this very CLI. */
function onPath(cli: string): boolean {
  const real = (p: string) => {
    try {
      return realpathSync(p);
    } catch {
      return undefined;
    }
  };
  const self = real(cli);
  return (process.env.PATH ?? '').split(delimiter).some((dir) => dir && real(join(dir, 'posthorn')) === self);
}

/**
 * This CLI as the user can type it again: `posthorn` when that is it on PATH (installed from the
 * package), else its path (README: `bin/posthorn` in a checkout), relative when it is below the
 * current directory unless the command must work from any directory.
 */
export function cliName(anyDirectory = false): string {
  const cli = process.argv[1];
  if (!cli || onPath(cli)) return 'posthorn';
  const below = relative(process.cwd(), cli);
  if (anyDirectory || below.startsWith('..') || isAbsolute(below)) return shellWord(cli);
  return shellWord(below.includes('/') ? below : `./${below}`);
}

/** A hint's command: this CLI with the same --config (another file, or none, is another store). */
export function cliCommand(cmd: Command, args: string): string {
  const configFile = (cmd.optsWithGlobals() as { config?: string }).config;
  return [cliName(), ...(configFile ? ['--config', shellWord(resolve(configFile))] : []), args].join(' ');
}

/** The largest id the store has (a PostgreSQL integer), and the API's bound on id parameters. */
const MAX_INT_OPTION = 2147483647;

/**
 * A count or an id given on the command line: 1 to MAX_INT_OPTION. An empty value is refused
 * like any other (never read as the option left out), and a huge one before the store sees it
 * (SQLite and PostgreSQL answer it with their own errors).
 */
export function parseIntOption(value: string, name: string, max = MAX_INT_OPTION): number {
  const n = /^\d{1,10}$/.test(value) ? Number(value) : NaN;
  if (!(n >= 1 && n <= max)) throw new Error(`${name} must be a whole number from 1 to ${max}, got "${value}"`);
  return n;
}

/** An egress pool's name as given ("default" too): refused unless outbound.pools has it, as the services refuse it. */
export function checkPool(config: Config, pool: string): void {
  poolOf(pool, (name) => name === DEFAULT_POOL || config.outbound.pools.some((p) => p.name === name));
}

/** The team a --team option names, refused when there is no such team. */
export async function existingTeam(app: App, value: string, name = '--team'): Promise<number> {
  const id = parseIntOption(value, name);
  if (!(await app.services.teams.get(id))) throw new Error(`team ${id} not found`);
  return id;
}

/**
 * A cell as it may reach a terminal: control characters (C0, DEL, C1) shown as \xNN. Cells hold
 * text others chose (a key's name comes from a team user through the API): an ESC in it must
 * not clear the operator's screen, retitle the window or write the clipboard.
 */
export function visible(text: string): string {
  return text.replace(/[\x00-\x1f\x7f-\x9f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}

/** Prints rows as an aligned text table, or `empty` when there are none. */
export function printTable(rows: Record<string, unknown>[], empty = '(none)'): void {
  if (rows.length === 0) {
    process.stdout.write(`${empty}\n`);
    return;
  }
  const headers = Object.keys(rows[0]!);
  const cells = rows.map((r) => headers.map((h) => visible(String(r[h] ?? ''))));
  const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (cols: string[]) => cols.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd();
  process.stdout.write(`${line(headers)}\n${cells.map(line).join('\n')}\n`);
}
