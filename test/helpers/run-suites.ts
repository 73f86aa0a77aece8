import { readdirSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runWatched } from './suite-runner.js';

// `npm test` runs the suites twice: every test file on SQLite, then the ones that touch the
// store again on PostgreSQL (a server this run starts: with-postgres.ts). Arguments are passed
// to both ava runs (`npm test -- --tap` gives two countable TAP streams); the exit status is
// non-zero when either run failed. `node dist/test/helpers/run-suites.js --postgres-only`
// runs only the second, `--sqlite-only` only the first.

const TEST_ROOT = fileURLToPath(new URL('..', import.meta.url)); // dist/test
// ava's command line with its TAP reporter repaired (ava-cli.ts).
const AVA = fileURLToPath(new URL('./ava-cli.js', import.meta.url));
const WITH_POSTGRES = fileURLToPath(new URL('./with-postgres.js', import.meta.url));

/** PostgreSQL's own tests (they use or start servers themselves): run once, in the PostgreSQL run. */
const POSTGRES_ONLY = [/^cluster\//, /^proof\/cluster-sigkill\./, /^proof\/cluster-name-lost\./, /^proof\/pg-connection-loss\./, /^webhooks\/webhook-endpoint-delete-race\./, /^emails\/schedule-claim-race\./, /^campaigns\/campaign-audience-race-pg\./, /^emails\/idempotency-connection-loss\./, /^store\/pg-connection-cut\./, /^store\/pg-commit-answer-lost[.-]/, /^store\/store-copy\./, /^store\/store-outage\./, /^store\/pg-unicode-lower\./, /^cli\/pg-empty-database\./];

/**
 * Not run a second time on PostgreSQL: code with no store (pure functions, the SMTP client,
 * parsers, the config), SQLite's own proofs (the full disk, its WAL), real `posthorn serve` or
 * CLI processes on SQLite data directories, the package build, and the console in a browser
 * (its pages read through the same services the API tests cover on both stores), and the port 25
 * watch (process memory fed by the SMTP client; it reads and writes nothing in the store), the
 * CLI's refusals that come before any store is opened (bad-input-no-store: arguments, usage, the
 * config file, init's files; its no-data-dir cases never point the CLI at PostgreSQL anyway), the
 * CLI given only POSTHORN_DATA_DIR (cli-data-dir-store: its SQLite store in both runs), and
 * the JSON shapes proof (fuzz-api-shapes: bodies refused by the parser and validation, a cost of
 * the main thread that no store changes), and the unit tests that open no store (a stub in its
 * place, or none needed: threading, bounce phrases, health and metrics with a failing stub, the
 * client IP limits, the submission parse time, the start notices, the webhook POST's socket).
 */
const SQLITE_ONLY = [
  /^(lib|render|config|lint|helpers|core|docs)\//,
  /^analytics\/analytics-batch\./,
  /^smtp\/(mime|outbound)\//,
  /^store\/(wal-checkpointer|scope-precedence|store-backup|store-restore)\./,
  /^proof\/(fuzz-api-shapes|leak-check|faults-disk|faults-disk-campaign|crash-sigkill|smtp-crash-sigkill|webhook-outbox-kill|fuzz-smtp)\./,
  /^emails\/(crash-kill|retry-schedule|bounce-sub-type)\./,
  /^cli\/(bad-input-no-store|cli-data-dir-store|first-hour-cli|npm-start|systemd-unit|data-dir|start-failure)\./,
  /^shaping\/(shaping-cli|shaping-units)\./,
  /^operations\/(package|port25-blocked)\./,
  /^console\/(browser-|console-html\.)/,
  /^inbound\/report-parser\./,
  /^tls-reports\/tls-report-document\./,
  /^tracking\/tracking-rewrite\./,
  /^analytics\/overview-attention\./,
  /^api\/(pagination|json-nesting)\./,
  /^emails\/simple-mailbox\./,
  /^scheduler\/(cron-finish-order|cron-time-zone)\./,
  /^store\/statement-cache\./,
  /^webhooks\/(url-policy|webhook-dispatcher|webhook-retry|http-post-keepalive|http-post-trailing-bytes)\./,
  /^emails\/threading\./,
  /^inbound\/text-bounce-languages\./,
  /^operations\/(admin-health-store-read|metrics-store-down)\./,
  /^smtp\/client-ip-limits\./,
  /^submission\/submission-parse-time\./,
  /^composition\/start-notices\./,
];

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? testFiles(join(dir, e.name)) : e.name.endsWith('.test.js') ? [join(dir, e.name)] : []));
}

const args = process.argv.slice(2);
const postgresOnly = args.includes('--postgres-only');
const sqliteOnly = args.includes('--sqlite-only');
const avaArgs = args.filter((a) => a !== '--postgres-only' && a !== '--sqlite-only');
// Two test files per core: most of a test's time is spent waiting on sockets, child processes
// and timers, so ava's default (one per core) left a quarter of the cores idle on a 2-core
// machine (measured: 1.48 of 2 cores busy; with 4 files at once the SQLite run took 18% less
// time). `--concurrency` (or `-c`) given to npm test wins.
if (!avaArgs.some((a) => a === '-c' || a.startsWith('--concurrency'))) avaArgs.push(`--concurrency=${availableParallelism() * 2}`);
const all = testFiles(TEST_ROOT)
  .map((f) => relative(TEST_ROOT, f))
  .sort();
const matches = (patterns: RegExp[]) => (f: string) => patterns.some((p) => p.test(f));
const onSqlite = all.filter((f) => !matches(POSTGRES_ONLY)(f));
const onPostgres = all.filter((f) => !matches(SQLITE_ONLY)(f));
const paths = (files: string[]) => files.map((f) => join(TEST_ROOT, f));

/** Each run says how long it took (a TAP comment), so a CI log shows where the time went. */
async function timed(name: string, files: string[], cmd: string[]): Promise<boolean> {
  process.stdout.write(`# ${name}: ${files.length} test files\n`);
  const started = Date.now();
  const ok = (await runWatched(name, process.execPath, cmd)) === 0;
  process.stdout.write(`# ${name}: finished in ${Math.round((Date.now() - started) / 1000)} s\n`);
  return ok;
}

let failed = false;
if (!postgresOnly) failed = !(await timed('SQLite', onSqlite, [AVA, ...avaArgs, ...paths(onSqlite)]));
if (!sqliteOnly) failed = !(await timed('PostgreSQL', onPostgres, [WITH_POSTGRES, process.execPath, AVA, ...avaArgs, ...paths(onPostgres)])) || failed;
process.exit(failed ? 1 : 0);
