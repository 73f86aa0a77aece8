import { readFileSync } from 'node:fs';
import { parse as parseToml } from 'smol-toml';
import { DEFAULT_CONFIG, type Config } from './defaults.js';
import { configSchema } from './schema.js';
import { configKeys, type KeyKind } from './config-keys.js';
import { editDistance, typosOf } from '../lib/edit-distance.js';
import { plainIssueMessage } from '../core/plain-issues.js';

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

// Every key has a POSTHORN_* variable (config-keys.ts); the names are a public interface
// (README, systemd units): keep them stable.
const ENV_KEYS = configKeys();

export const ENV_NAMES = ENV_KEYS.map((k) => k.env);
const ENV_OF_PATH = new Map(ENV_KEYS.map((k) => [k.path.join('.'), k.env]));

/** A key as an issue names it: its path, and its variable when it has one (either may have set it). */
function settingName(path: PropertyKey[]): string {
  const name = path.map(String).join('.');
  const env = ENV_OF_PATH.get(name);
  return env ? `${name} (${env})` : name || '(root)';
}

/** Keys a file has where the schema has none (a typo): each named, with the key it probably meant. */
function unknownKeys(path: PropertyKey[], keys: string[]): string {
  const at = path.map(String);
  // In an [[outbound.sources]] table (path outbound.sources.0): the fields of its tables.
  const tables = typeof path.at(-1) === 'number' ? ENV_KEYS.find((k) => k.path.join('.') === at.slice(0, -1).join('.'))?.fields : undefined;
  const known = tables
    ? tables.map((f) => f.name)
    : [...new Set(ENV_KEYS.filter((k) => at.every((p, i) => k.path[i] === p) && k.path.length > at.length).map((k) => k.path[at.length]!))];
  const where = tables ? `[[${at.slice(0, -1).join('.')}]] number ${Number(path.at(-1)) + 1}` : at.length ? `[${at.join('.')}]` : 'the top level';
  return keys
    .map((key) => {
      const near = known.find((k) => k.toLowerCase() === key.toLowerCase()) ?? typosOf(key, known)[0];
      return `unknown key "${key}" in ${where}${near ? ` (did you mean "${near}"?)` : ''}`;
    })
    .join('; ');
}

/**
 * POSTHORN_* variables in `env` that set nothing (a typo such as POSTHORN_SANBOX is otherwise
 * silently ignored), each with the name it probably meant. POSTHORN_TEST_* are the test suite's.
 */
export function unknownEnvNames(env: Env): { name: string; near?: string }[] {
  const known = new Set(ENV_NAMES);
  return Object.keys(env)
    .filter((name) => name.startsWith('POSTHORN_') && !name.startsWith('POSTHORN_TEST_') && !known.has(name))
    .sort()
    .map((name) => {
      const near = ENV_NAMES.find((k) => editDistance(k, name) <= 2);
      return near ? { name, near } : { name };
    });
}

/** The API's plain words ("must be at most 65535"), with TOML's names for its shapes. */
function configIssueMessage(issue: Parameters<typeof plainIssueMessage>[0]): string | undefined {
  if (issue.code === 'invalid_type' && issue.input !== undefined && (issue.expected === 'object' || issue.expected === 'record')) return 'must be a section (a [table] in TOML)';
  return plainIssueMessage(issue);
}

export interface LoadOptions {
  configFile?: string;
  env?: Env;
  overrides?: DeepPartial<Config>;
}

export type DeepPartial<T> = { [K in keyof T]?: T[K] extends object ? (T[K] extends unknown[] ? T[K] : DeepPartial<T[K]>) : T[K] };

/** defaults <- TOML file <- environment <- explicit overrides (tests). The only reader of process.env. */
export function loadConfig(opts: LoadOptions = {}): Config {
  const env = opts.env ?? process.env;
  let merged: Record<string, unknown> = structuredClone(DEFAULT_CONFIG) as unknown as Record<string, unknown>;
  if (opts.configFile) {
    let text: string;
    try {
      text = readFileSync(opts.configFile, 'utf8');
    } catch (err) {
      throw new ConfigError(`cannot read config file ${opts.configFile}: ${(err as Error).message}`);
    }
    let fileValues: Record<string, unknown>;
    try {
      fileValues = parseToml(text) as Record<string, unknown>;
    } catch (err) {
      throw new ConfigError(`config file ${opts.configFile} is not valid TOML: ${tomlProblem(err, text)}`);
    }
    merged = deepMerge(merged, fileValues);
  }
  const fromFile = opts.configFile ? structuredClone(merged) : undefined;
  const setByEnv: string[][] = [];
  for (const spec of ENV_KEYS) {
    const raw = env[spec.env];
    if (raw === undefined || (raw === '' && spec.kind !== 'list' && spec.kind !== 'string')) continue;
    setPath(merged, spec.path, convert(spec.env, raw, spec.kind));
    setByEnv.push(spec.path);
  }
  if (fromFile) checkMaskedFileValues(fromFile, setByEnv, opts.configFile!);
  if (opts.overrides) merged = deepMerge(merged, opts.overrides as Record<string, unknown>);
  const parsed = configSchema.safeParse(merged, { error: configIssueMessage });
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => (i.code === 'unrecognized_keys' ? unknownKeys(i.path, i.keys) : `${settingName(i.path)}: ${i.message}`)).join('; ');
    throw new ConfigError(`invalid configuration: ${issues}`);
  }
  const config = parsed.data;
  if (!config.publicUrl) {
    config.publicUrl = derivedPublicUrl(config.http);
    derived.add(config);
    try {
      new URL(config.publicUrl);
    } catch {
      // A bind address no URL can hold (an IPv6 zone index): the links need an explicit one.
      throw new ConfigError(`invalid configuration: publicUrl (POSTHORN_PUBLIC_URL) is empty and cannot be derived from http.host "${config.http.host}": set it to the URL the world reaches the HTTP API at`);
    }
  }
  return config;
}

/**
 * A wrong value in the file under a key a variable sets now: the server runs, and stops with
 * the file's error the day the variable goes (an EnvironmentFile edited, a shell without it).
 * Only issues of those very keys: a rule across keys may rely on the environment's part
 * (a relay user in the file, its password in the environment).
 */
function checkMaskedFileValues(fromFile: Record<string, unknown>, setByEnv: string[][], file: string): void {
  if (setByEnv.length === 0) return;
  const parsed = configSchema.safeParse(fromFile, { error: configIssueMessage });
  if (parsed.success) return;
  const masked = parsed.error.issues.flatMap((issue) => {
    const key = setByEnv.find((path) => path.length <= issue.path.length && path.every((p, i) => issue.path[i] === p));
    if (!key || issue.code === 'unrecognized_keys') return [];
    return [`${issue.path.map(String).join('.')} in ${file}: ${issue.message} (${ENV_OF_PATH.get(key.join('.'))} overrides it for now)`];
  });
  if (masked.length) throw new ConfigError(`invalid configuration: ${masked.join('; ')}`);
}

/**
 * smol-toml's error as one line: its message carries an excerpt of the file with a caret under
 * the spot (raw bytes of the file on a terminal), replaced by the line and column it gives.
 */
function tomlProblem(err: unknown, text: string): string {
  const { message, line, column } = err as Error & { line?: number; column?: number };
  const what = message.split('\n')[0]!.replace(/^Invalid TOML document: /, '');
  // The parser meets the end of the line inside a string whose closing quote is missing, and
  // names that newline as a control character.
  if (/control characters are not allowed/.test(what) && line !== undefined && column !== undefined && column > (text.split(/\r?\n/)[line - 1]?.length ?? Infinity)) {
    return `the string on line ${line} is not closed (its closing quote is missing)`;
  }
  return line !== undefined && column !== undefined ? `${what} at line ${line}, column ${column}` : what;
}

/** Configurations whose publicUrl was left empty and derived from the HTTP listener. */
const derived = new WeakSet<Config>();

/** Whether `config.publicUrl` was derived from http.host and http.port (publicUrl left empty). */
export function isPublicUrlDerived(config: Config): boolean {
  return derived.has(config);
}

/** The URL of the HTTP listener as seen from this machine: a wildcard bind is reached as localhost. */
export function derivedPublicUrl(http: { host: string; port: number }): string {
  const host = http.host === '0.0.0.0' || http.host === '::' || http.host === '' ? 'localhost' : http.host.includes(':') ? `[${http.host}]` : http.host;
  return `http://${host}${http.port === 80 ? '' : `:${http.port}`}`;
}

function convert(name: string, raw: string, kind: KeyKind): unknown {
  switch (kind) {
    case 'string':
      return raw;
    case 'int': {
      if (!/^\d+$/.test(raw.trim())) throw new ConfigError(`${name} must be a non-negative integer, got "${raw}"`);
      return Number(raw.trim());
    }
    case 'number': {
      if (!/^\d+(\.\d+)?$/.test(raw.trim())) throw new ConfigError(`${name} must be a non-negative number, got "${raw}"`);
      return Number(raw.trim());
    }
    case 'bool': {
      const v = raw.trim().toLowerCase();
      if (['1', 'true', 'yes', 'on'].includes(v)) return true;
      if (['0', 'false', 'no', 'off', ''].includes(v)) return false;
      throw new ConfigError(`${name} must be true or false, got "${raw}"`);
    }
    case 'list':
      return raw.split(',').map((s) => s.trim()).filter(Boolean);
    case 'tables': {
      // An array of tables is JSON in the environment: [{"name": "ip1", "localAddress": "192.0.2.10"}].
      if (raw.trim() === '') return [];
      try {
        return JSON.parse(raw) as unknown;
      } catch (err) {
        throw new ConfigError(`${name} must be a JSON array of tables, got "${raw}": ${(err as Error).message}`);
      }
    }
  }
}

function setPath(target: Record<string, unknown>, path: string[], value: unknown): void {
  let node = target;
  for (const key of path.slice(0, -1)) {
    const next = node[key];
    // The file gave a section a value (outbound = 5): left as it is, for the schema to name it.
    if (!next || typeof next !== 'object' || Array.isArray(next)) return;
    node = next as Record<string, unknown>;
  }
  node[path[path.length - 1]!] = value;
}

function deepMerge(base: Record<string, unknown>, extra: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(extra)) {
    const current = out[key];
    if (value && typeof value === 'object' && !Array.isArray(value) && current && typeof current === 'object' && !Array.isArray(current)) {
      out[key] = deepMerge(current as Record<string, unknown>, value as Record<string, unknown>);
    } else if (value !== undefined) {
      out[key] = value;
    }
  }
  return out;
}

/** The config with secrets replaced, for `posthorn config print`. */
export function redactConfig(config: Config): Config {
  const copy = structuredClone(config);
  if (copy.secret) copy.secret = '[redacted]';
  if (copy.outbound.relay.password) copy.outbound.relay.password = '[redacted]';
  if (copy.store.url) copy.store.url = redactUrlPassword(copy.store.url);
  return copy;
}

/** URL parameters node-postgres reads a password from (libpq's `?password=`, a client key's passphrase). */
const PASSWORD_PARAMS = ['password', 'sslpassword'];

/** postgres://user:secret@host/db -> postgres://user:[redacted]@host/db (the rest is worth seeing); ?password= too. */
export function redactUrlPassword(url: string): string {
  try {
    const u = new URL(url);
    const params = PASSWORD_PARAMS.filter((p) => u.searchParams.has(p));
    if (!u.password && params.length === 0) return url;
    if (u.password) u.password = '[redacted]';
    for (const p of params) u.searchParams.set(p, '[redacted]');
    return u.toString().replaceAll('%5Bredacted%5D', '[redacted]');
  } catch {
    return url.replace(/(:\/\/[^:/@]*:)[^@]*@/, '$1[redacted]@').replace(/([?&](?:ssl)?password=)[^&]*/gi, '$1[redacted]');
  }
}
