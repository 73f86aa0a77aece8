import test from 'ava';
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { tempDir } from '../helpers/temp-dir.js';

const run = promisify(execFile);
const BIN = fileURLToPath(new URL('../../../bin/posthorn', import.meta.url));

function cli(dataDir: string, ...args: string[]) {
  return run(process.execPath, [BIN, ...args], {
    env: { PATH: process.env.PATH, POSTHORN_DATA_DIR: dataDir, POSTHORN_DNS_SERVERS: '127.0.0.1:9' },
  });
}

// The CLI on a data directory's own SQLite store (POSTHORN_DATA_DIR alone: no database URL, so
// the same in both runs, and run once: run-suites.ts). The CLI on a test app's store, which is
// PostgreSQL in the PostgreSQL run, is in cli.test.ts.

test('teams create prints the id; keys list and revoke; migrate is idempotent; config print redacts', async (t) => {
  const dataDir = tempDir(t, 'posthorn-cli-');
  const first = await cli(dataDir, 'migrate');
  t.regex(first.stdout, /applied \d+ migration/);
  const second = await cli(dataDir, 'migrate');
  t.regex(second.stdout, /up to date/);
  const team = (await cli(dataDir, 'teams', 'create', '--name', 'Acme')).stdout.trim();
  t.regex(team, /^\d+$/);
  const created = await cli(dataDir, 'keys', 'create', '--name', 'sender', '--team', team, '--permission', 'SENDING');
  t.regex(created.stdout, /SENDING/);
  const list = (await cli(dataDir, 'keys', 'list')).stdout;
  t.regex(list, /sender/);
  t.false(list.includes(created.stdout.trim().split('\n').pop()!));
  const id = /created key (\d+)/.exec(created.stdout)![1]!;
  t.regex((await cli(dataDir, 'keys', 'revoke', id)).stdout, /revoked/);
  const err = await t.throwsAsync(cli(dataDir, 'keys', 'revoke', id));
  t.regex((err as any).stderr, /not found/);
  const print = await run(process.execPath, [BIN, 'config', 'print'], {
    env: { PATH: process.env.PATH, POSTHORN_SECRET: 'topsecretvalue', POSTHORN_DATABASE_URL: 'postgres://posthorn:db-pass-123@db.internal:5433/mail?sslmode=require' },
  });
  const printed = JSON.parse(print.stdout);
  t.is(printed.secret, '[redacted]');
  // The store: which server and database, never the password.
  t.is(printed.store.url, 'postgres://posthorn:[redacted]@db.internal:5433/mail?sslmode=require');
  t.false(print.stdout.includes('db-pass-123') || print.stderr.includes('db-pass-123'));
});

test('bad arguments exit non-zero with a message', async (t) => {
  const dataDir = tempDir(t, 'posthorn-cli-');
  const err = await t.throwsAsync(cli(dataDir, 'keys', 'create', '--name', 'x', '--permission', 'ROOT'));
  t.regex((err as any).stderr, /FULL or SENDING/);
  const missing = await t.throwsAsync(cli(dataDir, 'keys', 'create'));
  t.regex((missing as any).stderr, /--name/);
});

/** A run that may exit non-zero: its exit code and output, for the commands whose code is an answer. */
async function runCode(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [BIN, ...args], { env });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: unknown; stdout?: string; stderr?: string };
    if (typeof e.code !== 'number') throw err;
    return { code: e.code, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

test('domains add prints the records; verify checks them through the configured DNS servers and exits 2 until the domain is verified, then 0', async (t) => {
  const { startDnsZone } = await import('../helpers/dns-zone.js');
  const zone = await startDnsZone();
  const dataDir = tempDir(t, 'posthorn-cli-');
  const env = { PATH: process.env.PATH, POSTHORN_DATA_DIR: dataDir, POSTHORN_DNS_SERVERS: zone.server, POSTHORN_HOSTNAME: 'mx.cli.test' };
  try {
    const added = (await run(process.execPath, [BIN, 'domains', 'add', 'cli-example.com'], { env })).stdout;
    t.regex(added, /posthorn\._domainkey\.cli-example\.com/);
    t.regex(added, /bounces\.cli-example\.com/);
    // A deploy script asks `posthorn domains verify` whether the domain is ready: not yet is 2,
    // with the reason still printed; an error (no such domain) stays 1.
    const pending = await runCode(['domains', 'verify', 'cli-example.com'], env);
    t.is(pending.code, 2, pending.stderr);
    t.regex(pending.stdout, /^cli-example\.com: PENDING\nDomain verification finished with status PENDING: \S/);
    t.is(pending.stderr, '');
    const unknown = await runCode(['domains', 'verify', 'nowhere.example.com'], env);
    t.is(unknown.code, 1);
    t.regex(unknown.stderr, /^posthorn: domain nowhere\.example\.com not found\n$/);
    const dkim = /v=DKIM1; k=rsa; p=([A-Za-z0-9+/=]+)/.exec(added)![1]!;
    zone.set('posthorn._domainkey.cli-example.com', 'TXT', [`v=DKIM1; k=rsa; p=${dkim}`]);
    zone.set('bounces.cli-example.com', 'TXT', ['v=spf1 a:mx.cli.test ~all']);
    zone.set('bounces.cli-example.com', 'MX', [{ exchange: 'mx.cli.test', priority: 10 }]);
    const ok = await runCode(['domains', 'verify', '1'], env);
    t.is(ok.code, 0, ok.stderr);
    t.regex(ok.stdout, /cli-example\.com: SUCCESS/);
    t.regex((await run(process.execPath, [BIN, 'domains', 'list'], { env })).stdout, /cli-example\.com\s+SUCCESS/);
    // Another team adding the name is given a selector of its own: its key is published beside the first's.
    const team = (await run(process.execPath, [BIN, 'teams', 'create', '--name', 'Other'], { env })).stdout.trim();
    const other = (await run(process.execPath, [BIN, 'domains', 'add', 'cli-example.com', '--team', team], { env })).stdout;
    t.regex(other, /posthorn-[0-9a-f]{8}\._domainkey\.cli-example\.com/);
    t.notRegex(other, /\sposthorn\._domainkey\./);
    // A name typed in Unicode is the domain in A-labels: added, its records and a verify by either spelling.
    const idn = (await run(process.execPath, [BIN, 'domains', 'add', 'Bücher-CLI.com'], { env })).stdout;
    t.regex(idn, /posthorn\._domainkey\.xn--bcher-cli-q9a\.com/);
    for (const name of ['bücher-cli.com', 'xn--bcher-cli-q9a.com']) {
      const byName = await runCode(['domains', 'verify', name], env);
      t.is(byName.code, 2, `${name}: ${byName.stderr}`);
      t.regex(byName.stdout, /^xn--bcher-cli-q9a\.com: PENDING\n/);
    }
  } finally {
    await zone.close();
  }
});

test('the commands the CLI tells the user to run next are spelled as this CLI is run: bin/posthorn in a checkout, with the same --config', async (t) => {
  const dataDir = tempDir(t, 'posthorn-cli-');
  const checkout = join(BIN, '..', '..');
  const env = { PATH: process.env.PATH, POSTHORN_DATA_DIR: dataDir, POSTHORN_DNS_SERVERS: '127.0.0.1:9' };
  const noStore = await t.throwsAsync(run(process.execPath, [BIN, 'send', '--from', 'a@x.example', '--to', 'b@y.example', '--subject', 'S', '--text', 'T'], { env, cwd: checkout }));
  t.regex((noStore as any).stderr, /make a new store there with bin\/posthorn migrate\n/);
  await run(process.execPath, [BIN, 'migrate'], { env, cwd: checkout });
  const noTeam = await t.throwsAsync(run(process.execPath, [BIN, 'send', '--from', 'a@x.example', '--to', 'b@y.example', '--subject', 'S', '--text', 'T'], { env, cwd: checkout }));
  t.regex((noTeam as any).stderr, /create one with bin\/posthorn teams create --name NAME\n/);
  const added = (await run(process.execPath, [BIN, 'domains', 'add', 'hint.example.com'], { env, cwd: checkout })).stdout;
  t.regex(added, /then run: bin\/posthorn domains verify hint\.example\.com\n/);
  // From another directory the path is the whole one; a --config file is carried along.
  const config = join(dataDir, 'posthorn.toml');
  writeFileSync(config, '');
  const elsewhere = (await run(process.execPath, [BIN, '--config', config, 'domains', 'add', 'hint2.example.com'], { env, cwd: dataDir })).stdout;
  t.true(elsewhere.includes(`then run: ${BIN} --config ${config} domains verify hint2.example.com\n`), elsewhere);
});

test('send queues through the API path; queue shows counts and the due delivery; retry and purge act on it', async (t) => {
  const { startDnsZone } = await import('../helpers/dns-zone.js');
  const zone = await startDnsZone();
  const dataDir = tempDir(t, 'posthorn-cli-');
  const env = { PATH: process.env.PATH, POSTHORN_DATA_DIR: dataDir, POSTHORN_DNS_SERVERS: zone.server, POSTHORN_HOSTNAME: 'mx.cli.test' };
  const cliRun = (...args: string[]) => run(process.execPath, [BIN, ...args], { env });
  try {
    const added = (await cliRun('domains', 'add', 'cli-sender.com')).stdout;
    const dkim = /v=DKIM1; k=rsa; p=([A-Za-z0-9+/=]+)/.exec(added)![1]!;
    zone.set('posthorn._domainkey.cli-sender.com', 'TXT', [`v=DKIM1; k=rsa; p=${dkim}`]);
    zone.set('bounces.cli-sender.com', 'TXT', ['v=spf1 a:mx.cli.test ~all']);
    zone.set('bounces.cli-sender.com', 'MX', [{ exchange: 'mx.cli.test', priority: 10 }]);
    await cliRun('domains', 'verify', 'cli-sender.com');
    const refused = await t.throwsAsync(cliRun('send', '--from', 'a@unverified-cli.com', '--to', 'b@example.net', '--subject', 'S', '--text', 'T'));
    t.regex((refused as any).stderr, /unverified-cli\.com/);
    const emailId = (await cliRun('send', '--from', 'CLI <a@cli-sender.com>', '--to', 'b@example.net', '--subject', 'From the CLI', '--text', 'Hello')).stdout.trim();
    t.regex(emailId, /^em_/);
    const queue = (await cliRun('queue')).stdout;
    t.regex(queue, /^Queue: 1 deliveries \(ready 1,/m);
    t.regex(queue, /^By destination\n/m);
    t.regex(queue, /^example\.net\s+1\s/m);
    const messages = (await cliRun('queue', 'messages')).stdout;
    t.regex(messages, /b@example\.net/);
    const deliveryId = /^(\d+)\s+em_/m.exec(messages)![1]!;
    t.is((await cliRun('queue', 'retry', deliveryId)).stdout, `delivery ${deliveryId} is due now: the engine attempts it at its next round\n`);
    // Held by a suspension, a retry makes it due but the suspension keeps holding it: said so.
    const su = JSON.parse((await cliRun('queue', 'suspend', '--destination', 'example.net', '--minutes', '10', '--reason', 'mx maintenance', '--json')).stdout);
    const held = (await cliRun('queue', 'retry', deliveryId)).stdout;
    t.regex(held, new RegExp(`^delivery ${deliveryId} is held by suspension ${su.id} \\(mx maintenance\\) until ${su.until}: it is attempted when that ends or is resumed \\(.*queue resume ${su.id}\\)\n$`));
    t.like(JSON.parse((await cliRun('queue', 'retry', deliveryId, '--json')).stdout), { retried: 1, heldBy: { id: su.id, destination: 'example.net', until: su.until } });
    await cliRun('queue', 'resume', su.id);
    t.regex((await cliRun('queue', 'retry', deliveryId)).stdout, /is due now/);
    t.regex((await cliRun('queue', 'purge', deliveryId)).stdout, /purged/);
    t.regex((await cliRun('queue')).stdout, /^Queue: 0 deliveries/m);
    const err = await t.throwsAsync(cliRun('queue', 'purge', deliveryId));
    t.regex((err as any).stderr, /not queued/);
    // Both changes are in the operator audit log, by the CLI (after the default team `domains add` made).
    const db = new Database(join(dataDir, 'posthorn.db'), { readonly: true });
    const audit = db.prepare("select actor, action, key_id, console_user_id, target_json from operator_audit where action like 'queue.%' order by id").all() as any[];
    db.close();
    t.deepEqual(audit.map((a) => [a.actor, a.action, a.key_id, a.console_user_id, JSON.parse(a.target_json).deliveryId]), [
      ['cli', 'queue.retry', null, null, Number(deliveryId)],
      ['cli', 'queue.suspend', null, null, undefined],
      ['cli', 'queue.retry', null, null, Number(deliveryId)],
      ['cli', 'queue.retry', null, null, Number(deliveryId)],
      ['cli', 'queue.resume', null, null, undefined],
      ['cli', 'queue.retry', null, null, Number(deliveryId)],
      ['cli', 'queue.purge', null, null, Number(deliveryId)],
    ]);
    // --json for scripts.
    t.deepEqual(JSON.parse((await cliRun('queue', 'summary', '--json')).stdout).totals, { ready: 0, scheduled: 0, deferred: 0, inFlight: 0, suspended: 0 });
  } finally {
    await zone.close();
  }
});

test('server-dns prints the DKIM record of the server key (made once, kept) and SPF for the host name', async (t) => {
  const dataDir = tempDir(t, 'posthorn-cli-');
  const env = { PATH: process.env.PATH, POSTHORN_DATA_DIR: dataDir, POSTHORN_DNS_SERVERS: '127.0.0.1:9', POSTHORN_HOSTNAME: 'mail.example.test' };
  await run(process.execPath, [BIN, 'migrate'], { env });
  const first = (await run(process.execPath, [BIN, 'server-dns'], { env })).stdout;
  t.regex(first, /posthorn\._domainkey\.mail\.example\.test\s+v=DKIM1; k=rsa; p=[A-Za-z0-9+/]{300,}={0,2}/);
  t.regex(first, /TXT\s+mail\.example\.test\s+v=spf1 a -all/);
  const second = (await run(process.execPath, [BIN, 'server-dns'], { env })).stdout;
  t.is(second, first, 'the same key on every run');
});

test('server-dns warns on stderr while the host name is localhost, whose records no one could look up; stdout stays the records', async (t) => {
  const dataDir = tempDir(t, 'posthorn-cli-');
  const env = { PATH: process.env.PATH, POSTHORN_DATA_DIR: dataDir, POSTHORN_DNS_SERVERS: '127.0.0.1:9' };
  await run(process.execPath, [BIN, 'migrate'], { env });
  const local = await run(process.execPath, [BIN, 'server-dns'], { env });
  t.regex(local.stderr, /^posthorn: warning: hostname is localhost: .*set hostname \(POSTHORN_HOSTNAME\) to this server's public DNS name/m);
  t.regex(local.stdout, /TXT\s+localhost\s+v=spf1 a -all/);
  const named = await run(process.execPath, [BIN, 'server-dns'], { env: { ...env, POSTHORN_HOSTNAME: 'mail.example.test' } });
  t.is(named.stderr, '');
});
