import test from 'ava';
import pg from 'pg';
import { createEmptyDatabase, dropTestDatabase } from '../helpers/pg-databases.js';
import { runPosthornCli } from '../helpers/cli-child.js';
import { tempDir } from '../helpers/temp-dir.js';

// PostgreSQL's counterpart of a data directory with no store: a database nothing was ever
// migrated on. A command that works on existing data is refused there and leaves it empty (as
// it leaves no posthorn.db behind on SQLite); one that makes what it is asked for starts the store.

async function tablesOf(url: string): Promise<string[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const r = await c.query<{ name: string }>("select table_name as name from information_schema.tables where table_schema = 'public' order by 1");
    return r.rows.map((row) => row.name);
  } finally {
    await c.end();
  }
}

test('on an empty database, a command that needs data is refused and migrates nothing; teams create starts the store', async (t) => {
  const url = await createEmptyDatabase();
  t.teardown(() => dropTestDatabase(url));
  const env = { PATH: process.env.PATH!, POSTHORN_DNS_SERVERS: '127.0.0.1:9', POSTHORN_DATA_DIR: tempDir(t, 'posthorn-pg-empty-'), POSTHORN_DATABASE_URL: url };
  for (const args of [['users', 'list'], ['users', 'delete', '1'], ['queue', 'trace', 'em_0000000000000000'], ['keys', 'list'], ['server-dns']]) {
    const r = await runPosthornCli(args, { env });
    t.is(r.code, 1, `${args.join(' ')}: ${r.stderr}`);
    t.regex(r.stderr, /^posthorn: the PostgreSQL database of store\.url \(POSTHORN_DATABASE_URL\) holds no Posthorn store yet: .* migrate\n$/, args.join(' '));
    t.false(r.stderr.includes(url), 'the URL (and its password) is not printed');
  }
  t.deepEqual(await tablesOf(url), [], 'nothing was migrated');
  const made = await runPosthornCli(['teams', 'create', '--name', 'first'], { env });
  t.is(made.code, 0, made.stderr);
  t.is(made.stdout.trim(), '1');
  t.true((await tablesOf(url)).includes('teams'));
  const listed = await runPosthornCli(['teams', 'list'], { env });
  t.is(listed.code, 0, listed.stderr);
  t.regex(listed.stdout, /first/);
});
