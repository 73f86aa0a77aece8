import test from 'ava';
import { configKeys, type ConfigKey } from '../../src/config/config-keys.js';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import { ConfigError, loadConfig } from '../../src/config/load.js';
import { codeSpans, DOCS, prose, readDoc, tablesOf, type Table, type TableRow } from './helpers/markdown.js';

// The settings the docs restate: every key a settings table names exists in the schema, its
// environment variable is the one loadConfig reads (proved by setting it), and its stated
// default is the schema's. Defaults are written for people ("40 MB", "30 s", "generated"):
// each form is mapped below, and a form not mapped fails, so a new row gets checked too.

const KEYS = configKeys();
const byPath = new Map(KEYS.map((k) => [k.path.join('.'), k]));
const byEnv = new Map(KEYS.map((k) => [k.env, k]));
const derivedEnv = (path: string[]) => `POSTHORN_${path.map((p) => p.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase()).join('_')}`;

function defaultOf(k: ConfigKey): unknown {
  let v: unknown = DEFAULT_CONFIG;
  for (const p of k.path) v = (v as Record<string, unknown>)[p];
  return v;
}
const defaultAt = (path: string) => defaultOf(byPath.get(path)!);

/** Keys a key cell names: `a.b`, `a.*Suffix` (every key the glob matches), `[[a.b]]`. */
function keysOfCell(cell: string): { keys: ConfigKey[]; problems: string[] } {
  const keys: ConfigKey[] = [];
  const problems: string[] = [];
  for (const span of codeSpans(cell)) {
    const name = span.replace(/^\[\[(.*)\]\]$/, '$1');
    if (name.includes('*')) {
      const re = new RegExp(`^${name.split('*').map((s) => s.replace(/[.]/g, '\\.')).join('[^.]*')}$`);
      const matched = KEYS.filter((k) => re.test(k.path.join('.')));
      if (!matched.length) problems.push(`\`${span}\` matches no configuration key`);
      keys.push(...matched);
    } else if (byPath.has(name)) keys.push(byPath.get(name)!);
    else problems.push(`\`${span}\` is no configuration key`);
  }
  return { keys, problems };
}

/**
 * The variables an environment cell names, written out. `_X` after a full name is that name with
 * its end swapped (`POSTHORN_OUTBOUND_SOURCES`, `_POOLS`), `_X_` with a part in the middle swapped
 * (`POSTHORN_OUTBOUND_CONNECT_TIMEOUT_MS`, `_GREETING_`); `...` elides the rest; `A_*_B` is every
 * variable with one word there.
 */
function envsOfCell(cell: string): { envs: string[]; elided: boolean; problems: string[] } {
  const envs: string[] = [];
  const problems: string[] = [];
  let first: string | undefined;
  for (const span of codeSpans(cell)) {
    if (span.startsWith('_')) {
      if (!first) {
        problems.push(`\`${span}\` abbreviates no full name before it`);
        continue;
      }
      const candidates = [...byEnv.keys()]
        .map((e) => {
          const at = span.endsWith('_') ? e.indexOf(span) : e.endsWith(span) ? e.length - span.length : -1;
          return at < 0 ? undefined : { e, before: e.slice(0, at), after: e.slice(at + span.length) };
        })
        .filter((c) => c && first!.startsWith(c.before + '_') && first!.endsWith(c.after) && c.e !== first)
        .sort((a, b) => b!.before.length - a!.before.length);
      if (!candidates.length) problems.push(`\`${span}\` (after \`${first}\`) names no variable`);
      else envs.push(candidates[0]!.e);
    } else if (span.includes('*')) {
      const re = new RegExp(`^${span.split('*').join('[A-Z0-9]+')}$`);
      const matched = [...byEnv.keys()].filter((e) => re.test(e));
      if (!matched.length) problems.push(`\`${span}\` matches no variable`);
      envs.push(...matched);
    } else if (/^POSTHORN_[A-Z0-9_]+$/.test(span)) {
      first ??= span;
      envs.push(span);
    } else problems.push(`\`${span}\` is not a variable name`);
  }
  return { envs, elided: /(^|,\s*)\.\.\.\s*$/.test(cell.replace(/`[^`]*`/g, '')), problems };
}

/** Defaults written as a phrase for a whole row: what each says of the schema. */
const ROW_DEFAULTS: Record<string, (keys: string[]) => boolean> = {
  generated: (keys) => keys.join() === 'secret' && defaultAt('secret') === '',
  system: (keys) => keys.join() === 'dns.servers' && (defaultAt('dns.servers') as string[]).length === 0,
  '`<hostname>:<pid>`': (keys) => keys.join() === 'cluster.nodeName' && defaultAt('cluster.nodeName') === '',
  'from the HTTP listener': (keys) => keys.join() === 'publicUrl' && defaultAt('publicUrl') === '',
  'direct delivery': (keys) => keys.every((k) => k.startsWith('outbound.relay.')) && defaultAt('outbound.relay.host') === '',
  none: (keys) => keys.every((k) => k.startsWith('outbound.relay.')) && defaultAt('outbound.relay.host') === '',
  "one source, the host's address": (keys) => keys.join() === 'outbound.sources,outbound.pools' && keys.every((k) => (defaultAt(k) as unknown[]).length === 0),
  'the built-in rules': (keys) =>
    keys.join() === 'outbound.shaping,outbound.replyRules' && keys.every((k) => (defaultAt(k) as unknown[]).length === 0) && defaultAt('outbound.builtinShaping') === true && defaultAt('outbound.builtinReplyRules') === true,
  // A pointer to the table that states them (which this test reads too).
  'see [outbound.md](docs/outbound.md#connections-and-limits)': (keys) => keys.every((k) => /^outbound\.\w+TimeoutMs$/.test(k)),
};

const UNITS: Record<string, { factor: number; suffix: string }> = {
  MB: { factor: 1024 * 1024, suffix: 'Bytes' },
  s: { factor: 1000, suffix: 'Ms' },
  min: { factor: 60_000, suffix: 'Ms' },
};

/** One key's default as written in a cell: undefined when it is the schema's, else what is wrong. */
function defaultProblem(k: ConfigKey, written: string): string | undefined {
  const path = k.path.join('.');
  const actual = defaultOf(k);
  const literal = /^`([^`]*)`(?: \([^)]*\))?$/.exec(written);
  if (literal) return String(actual) === literal[1] ? undefined : `${path} defaults to ${JSON.stringify(actual)}, not ${written}`;
  if (/^\d+$/.test(written)) return actual === Number(written) ? undefined : `${path} defaults to ${JSON.stringify(actual)}, not ${written}`;
  const unit = /^(\d+) (\w+)$/.exec(written);
  if (unit && UNITS[unit[2]!]) {
    const { factor, suffix } = UNITS[unit[2]!]!;
    if (!path.endsWith(suffix)) return `${path}: "${written}" is a unit the key (not ...${suffix}) is not in`;
    return actual === Number(unit[1]) * factor ? undefined : `${path} defaults to ${JSON.stringify(actual)}, not ${written}`;
  }
  // An empty text, or an empty list.
  if (/^empty\b/.test(written)) return actual === '' || (Array.isArray(actual) && actual.length === 0) ? undefined : `${path} defaults to ${JSON.stringify(actual)}, not empty`;
  return `${path}: the default "${written}" is a form this test does not know (map it in docs-settings.test.ts)`;
}

/** What is wrong with a settings row: its keys, its variables, its default. */
function rowProblems(row: TableRow, cols: { key?: number; env: number; def: number }): string[] {
  const problems: string[] = [];
  const env = envsOfCell(row.cells[cols.env]!);
  problems.push(...env.problems);
  let keys: ConfigKey[];
  if (cols.key !== undefined) {
    const named = keysOfCell(row.cells[cols.key]!);
    problems.push(...named.problems);
    keys = named.keys;
    const want = keys.map((k) => k.env);
    const listed = env.elided ? want.slice(0, env.envs.length) : want;
    if (env.envs.join() !== listed.join()) problems.push(`variables ${env.envs.join(', ')} are not those of ${keys.map((k) => k.path.join('.')).join(', ')} (${want.join(', ')})`);
    if (env.elided && !want.slice(env.envs.length).every((e) => e.startsWith(env.envs[0]!.replace(/[^_]*$/, '')))) problems.push(`the variables "..." stands for do not follow ${env.envs[0]}`);
  } else {
    keys = env.envs.map((e) => byEnv.get(e)).filter((k): k is ConfigKey => !!k);
    for (const e of env.envs) if (!byEnv.has(e)) problems.push(`${e} is no configuration variable`);
  }
  if (!keys.length) return [...problems, 'names no key'];
  // The loader reads each variable: set it, and the key changes (or, for an array of tables, a
  // bad value is refused naming that variable).
  for (const k of keys) problems.push(...loaderProblems(k));
  const cell = row.cells[cols.def]!;
  const paths = keys.map((k) => k.path.join('.'));
  if (cell in ROW_DEFAULTS) {
    if (!ROW_DEFAULTS[cell]!(paths)) problems.push(`"${cell}" is not the default of ${paths.join(', ')}`);
  } else {
    const parts = keys.length > 1 ? cell.split(/\s*(?:,|\s\/)\s+/) : [cell];
    if (parts.length !== keys.length) problems.push(`default "${cell}" does not give one value for each of ${paths.join(', ')}`);
    else keys.forEach((k, i) => problems.push(...[defaultProblem(k, parts[i]!)].filter((p): p is string => !!p)));
  }
  return problems;
}

/** A value each kind of key can be set to through its variable, other than its default. */
const PROBES: Record<string, string> = {
  'log.level': 'debug',
  'dns.trustAd': 'always',
  'store.durability': 'normal',
  'store.statementTimeout': '45s',
  'store.url': 'postgres://u@db.example.com/posthorn',
  hostname: 'mail.example.com',
  publicUrl: 'https://mail.example.com',
  'dns.servers': '192.0.2.53',
  'outbound.relay.secure': 'none',
  'outbound.relay.host': 'relay.example.com',
  'http.host': '127.0.0.1',
  'inbound.exemptNetworks': '10.0.0.0/8,2001:db8::/32',
  'submission.exemptNetworks': '10.0.0.0/8,2001:db8::/32',
  'tracking.machineNetworks': '192.0.2.0/24,2001:db8::/32',
};

function loaderProblems(k: ConfigKey): string[] {
  const path = k.path.join('.');
  const read = (env: Record<string, string>) => {
    let v: unknown = loadConfig({ env });
    for (const p of k.path) v = (v as Record<string, unknown>)[p];
    return v;
  };
  const actual = defaultOf(k);
  if (k.kind === 'tables') {
    try {
      loadConfig({ env: { [k.env]: 'not json' } });
      return [`${k.env} set to "not json" was not read for ${path}`];
    } catch (err) {
      return err instanceof ConfigError && err.message.startsWith(k.env) ? [] : [`${k.env}: ${(err as Error).message}`];
    }
  }
  const probe =
    PROBES[path] ?? (k.kind === 'bool' ? String(!actual) : k.kind === 'int' || k.kind === 'number' ? String((actual as number) === 0 ? 1 : (actual as number) - 1) : 'docs-probe');
  try {
    const got = read({ [k.env]: probe });
    return JSON.stringify(got) !== JSON.stringify(actual) ? [] : [`${k.env}=${probe} left ${path} at ${JSON.stringify(actual)}`];
  } catch (err) {
    return [`${k.env}=${probe}: ${(err as Error).message} (add a probe value for ${path})`];
  }
}

/** The settings tables of every doc: a Key or Environment column and a Default column. */
function settingsTables(): { table: Table; cols: { key?: number; env: number; def: number } }[] {
  return DOCS.flatMap((file) =>
    tablesOf(file).flatMap((table) => {
      const col = (name: string) => table.header.indexOf(name);
      if (col('Environment') < 0) return [];
      const cols = { key: col('Key') >= 0 ? col('Key') : undefined, env: col('Environment'), def: col('Default') };
      return [{ table, cols }];
    }),
  );
}

test('every settings table in the docs names real keys, the variables the loader reads and the schema defaults', (t) => {
  const tables = settingsTables();
  const problems: string[] = [];
  let rows = 0;
  for (const { table, cols } of tables) {
    if (cols.def < 0) problems.push(`${table.file}: a settings table without a Default column (${table.header.join(' | ')})`);
    for (const row of table.rows) {
      rows++;
      problems.push(...rowProblems(row, cols).map((p) => `${row.at}: ${p}`));
    }
  }
  t.log(`${rows} rows in ${tables.length} settings tables`);
  // operations.md, console.md, outbound.md (timeouts, relay), README.
  t.true(tables.length >= 5);
  t.deepEqual(problems, []);
});

test('the listeners table gives the listeners\' default addresses', (t) => {
  const table = tablesOf('docs/operations.md').find((tb) => tb.header[0] === 'Listener');
  const names: Record<string, string> = { HTTP: 'http', 'inbound SMTP': 'inbound', submission: 'submission' };
  const problems: string[] = [];
  for (const row of table?.rows ?? []) {
    const section = names[row.cells[0]!];
    if (!section) problems.push(`${row.at}: unknown listener ${row.cells[0]} (map it here)`);
    else if (row.cells[1] !== `\`${defaultAt(`${section}.host`)}:${defaultAt(`${section}.port`)}\``) problems.push(`${row.at}: ${section} listens on ${defaultAt(`${section}.host`)}:${defaultAt(`${section}.port`)} by default, not ${row.cells[1]}`);
  }
  t.is(table?.rows.length, 3);
  t.deepEqual(problems, []);
});

test('"`a.b` is `POSTHORN_...`" in the docs pairs a key with its variable, and the keys named as having shorter names are all that have', (t) => {
  const problems: string[] = [];
  for (const file of DOCS) {
    for (const m of prose(file).matchAll(/`([a-zA-Z][\w.]*)`\s+is\s+`(POSTHORN_[A-Z0-9_]+)`/g)) {
      const k = byPath.get(m[1]!);
      if (!k) problems.push(`${file}: ${m[1]} is no configuration key`);
      else if (k.env !== m[2]) problems.push(`${file}: ${m[1]} is read from ${k.env}, not ${m[2]}`);
    }
    const shorter = /Three keys have shorter names: (.*?)\.\n\n/s.exec(prose(file) + '\n\n');
    if (!shorter) continue;
    const listed = [...shorter[1]!.matchAll(/`([\w.]+)`\s+is\s+`(POSTHORN_\w+)`/g)].map((m) => m[1]).sort();
    // The listeners' ports are named by their section (POSTHORN_INBOUND_PORT), which is the
    // derived name anyway; a key whose variable is not the derived one must be in the list.
    const irregular = KEYS.filter((k) => k.env !== derivedEnv(k.path)).map((k) => k.path.join('.')).sort();
    if (listed.join() !== irregular.join()) problems.push(`${file}: the keys with shorter names are ${irregular.join(', ')}, the doc lists ${listed.join(', ')}`);
    if (irregular.length !== 3) problems.push(`${file}: "Three keys": there are ${irregular.length}`);
  }
  t.deepEqual(problems, []);
});

/** POSTHORN_* names in the docs that are not settings: the test suite's, and a typo shown as one. */
const NOT_SETTINGS: Record<string, string> = {
  POSTHORN_FC_SEED: 'the segment property test (test/audience/helpers/filter-oracle.ts)',
  POSTHORN_FC_RUNS: 'the segment property test (test/audience/helpers/filter-oracle.ts)',
  POSTHORN_DATA_DIRR: 'operations.md: the example of a misspelt variable',
};

test('every POSTHORN_ variable the docs name is a setting\'s (or the test suite\'s)', (t) => {
  const problems: string[] = [];
  for (const file of DOCS) {
    for (const m of readDoc(file).matchAll(/\bPOSTHORN_[A-Z0-9_]*[A-Z0-9]\b(?!\*)/g)) {
      const name = m[0];
      if (byEnv.has(name) || name.startsWith('POSTHORN_TEST_') || name in NOT_SETTINGS) continue;
      problems.push(`${file}: ${name} is no configuration variable`);
    }
  }
  t.deepEqual(problems, []);
});
