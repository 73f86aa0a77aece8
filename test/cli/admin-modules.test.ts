import test from 'ava';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { dropDataDirDatabase, storeEnvOf, testDatabaseUrl } from '../helpers/test-app.js';
import { tempDir } from '../helpers/temp-dir.js';

// An admin command builds the app without starting it (cli-context.ts withApp): it loads the
// store and the core services, never what only a running server uses (the HTTP API and the
// console, the SMTP listeners and client, parsing and authenticating mail in, the metrics).
// Loading them was about a fifth of such a command's time (docs/benchmarks.md, "CLI start").

const run = promisify(execFile);
const BIN = fileURLToPath(new URL('../../../bin/posthorn', import.meta.url));
const MODULE_HOOKS = fileURLToPath(new URL('./fixtures/module-hooks.js', import.meta.url));

/** Modules only `posthorn serve` (App.start) needs. */
const SERVER_ONLY = [
  /\/node_modules\/(koa|@koa\/router|smtp-server|mailauth|mailparser|prom-client|html-to-text)\//,
  /\/node_modules\/nodemailer\/lib\/(smtp-connection|mail-composer|mime-node)\//,
  /\/dist\/src\/(api|console|smtp)\//,
  /\/dist\/src\/composition\/(start-sequence|server-wiring|outbound-wiring)\.js$/,
];

/** Runs the CLI on the test store of dataDir; returns the URLs of the modules its process loaded. */
async function modulesOf(dataDir: string, ...args: string[]): Promise<string[]> {
  const log = join(dataDir, 'modules.log');
  await run(process.execPath, ['--import', MODULE_HOOKS, BIN, ...args], {
    env: { PATH: process.env.PATH, POSTHORN_DNS_SERVERS: '127.0.0.1:9', MODULE_LOG: log, ...(await storeEnvOf(dataDir)) },
  });
  return readFileSync(log, 'utf8').split('\n').filter(Boolean);
}

test('an admin command loads the store and the core services, not the server: no HTTP, console, SMTP or metrics modules', async (t) => {
  const dataDir = tempDir(t, 'posthorn-admin-modules-');
  t.teardown(() => dropDataDirDatabase(dataDir));
  const postgres = !!(await testDatabaseUrl(dataDir)).url;
  await run(process.execPath, [BIN, 'teams', 'create', '--name', 'Acme'], { env: { PATH: process.env.PATH, POSTHORN_DNS_SERVERS: '127.0.0.1:9', ...(await storeEnvOf(dataDir)) } });
  const loaded = await modulesOf(dataDir, 'teams', 'list');
  // The log saw the admin path itself: the composition root, the store, a core service.
  for (const needed of [/\/dist\/src\/app\.js$/, /\/node_modules\/kysely\//, /\/dist\/src\/core\/teams\/team-service\.js$/]) {
    t.true(loaded.some((url) => needed.test(url)), `${needed} was loaded`);
  }
  const serverOnly = loaded.filter((url) => SERVER_ONLY.some((p) => p.test(url)));
  t.deepEqual(serverOnly, [], 'modules only a running server needs');
  // Nor the migrations of a store that is up to date (they are loaded when one runs).
  t.deepEqual(loaded.filter((url) => /\/dist\/src\/store\/migrations\/\d/.test(url)), [], 'migrations');
  // The other store's driver is not loaded either.
  const otherDriver = postgres ? /\/node_modules\/better-sqlite3\// : /\/node_modules\/pg\//;
  t.deepEqual(loaded.filter((url) => otherDriver.test(url)), [], `the ${postgres ? 'SQLite' : 'PostgreSQL'} driver`);
});
