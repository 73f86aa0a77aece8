import { spawn } from 'node:child_process';
import { startPgServer } from './pg-server.js';
import { ADMIN_URL_ENV, TEST_STORE_ENV } from './pg-databases.js';

// `node dist/test/helpers/with-postgres.js <command> [args...]`: starts one PostgreSQL server for
// the whole run, runs the command with POSTHORN_TEST_STORE=postgres pointing every test app at
// it (a database each), stops the server, and exits with the command's status.

const [cmd, ...args] = process.argv.slice(2);
if (!cmd) {
  process.stderr.write('usage: with-postgres <command> [args...]\n');
  process.exit(2);
}
const server = await startPgServer();
process.stderr.write(`PostgreSQL test server on 127.0.0.1:${server.port}\n`);
const child = spawn(cmd, args, { stdio: 'inherit', env: { ...process.env, [TEST_STORE_ENV]: 'postgres', [ADMIN_URL_ENV]: server.adminUrl } });
const forward = (signal: NodeJS.Signals) => child.kill(signal);
process.on('SIGINT', forward);
process.on('SIGTERM', forward);
const code = await new Promise<number>((resolve) => child.once('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0))));
await server.stop();
process.exit(code);
