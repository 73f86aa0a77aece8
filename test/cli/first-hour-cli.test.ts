import test from 'ava';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { startDnsZone } from '../helpers/dns-zone.js';
import { tempDir } from '../helpers/temp-dir.js';

// The command line a newcomer meets in the first hour: --version, config print's public URL,
// domains verify's table, warnings on stderr (stdout is the result), config errors that a
// service manager does not restart into.

const run = promisify(execFile);
const BIN = fileURLToPath(new URL('../../../bin/posthorn', import.meta.url));
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

function cli(env: Record<string, string>, ...args: string[]) {
  return run(process.execPath, [BIN, ...args], { env: { PATH: process.env.PATH!, POSTHORN_DNS_SERVERS: '127.0.0.1:9', ...env } });
}

test('--version and -V print the package version', async (t) => {
  const version = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version;
  t.is((await cli({}, '--version')).stdout.trim(), version);
  t.is((await cli({}, '-V')).stdout.trim(), version);
});

test('config print shows the effective public URL, derived from the HTTP listener when not set, and says so on stderr', async (t) => {
  const derived = await cli({ POSTHORN_HTTP_PORT: '8025' }, 'config', 'print');
  t.is(JSON.parse(derived.stdout).publicUrl, 'http://localhost:8025');
  t.regex(derived.stderr, /publicUrl is not set, so it is derived from http\.host and http\.port: http:\/\/localhost:8025/);
  const bound = await cli({ POSTHORN_HTTP_HOST: '192.0.2.10', POSTHORN_HTTP_PORT: '80' }, 'config', 'print');
  t.is(JSON.parse(bound.stdout).publicUrl, 'http://192.0.2.10');
  const set = await cli({ POSTHORN_PUBLIC_URL: 'https://mail.example.com/', POSTHORN_HTTP_PORT: '8025' }, 'config', 'print');
  t.is(JSON.parse(set.stdout).publicUrl, 'https://mail.example.com');
  t.is(set.stderr, '');
});

test('an invalid configuration exits 78 (EX_CONFIG) with the key named; other errors exit 1', async (t) => {
  const bad = await t.throwsAsync(cli({ POSTHORN_HTTP_PORT: 'eighty' }, 'config', 'print'));
  t.is((bad as any).code, 78);
  t.regex((bad as any).stderr, /^posthorn: POSTHORN_HTTP_PORT must be/);
  const dir = tempDir(t, 'posthorn-cli-');
  const file = join(dir, 'bad.toml');
  writeFileSync(file, 'sandbox = "perhaps"\n');
  const typo = await t.throwsAsync(cli({}, '--config', file, 'config', 'print'));
  t.is((typo as any).code, 78);
  t.regex((typo as any).stderr, /sandbox/);
  const other = await t.throwsAsync(cli({ POSTHORN_DATA_DIR: dir }, 'keys', 'revoke', '12345'));
  t.is((other as any).code, 1);
});

test('domains add warns on stderr when records would point at localhost; stdout is only the result', async (t) => {
  const dataDir = tempDir(t, 'posthorn-cli-');
  const added = await cli({ POSTHORN_DATA_DIR: dataDir }, 'domains', 'add', 'first-hour.dev');
  t.regex(added.stdout, /^domain 1 first-hour\.dev added to team 1/);
  t.false(added.stdout.includes('{'), 'no log line on stdout');
  const warning = JSON.parse(added.stderr.trim().split('\n').find((l) => l.includes('localhost_records'))!);
  t.like(warning, { level: 40, event: 'domain.localhost_records', domain: 'first-hour.dev', hostname: 'localhost' });
  t.regex(warning.msg, /POSTHORN_HOSTNAME/);
  // With a real host name, nothing on stderr; keys create's key is still the last line of stdout.
  const quiet = await cli({ POSTHORN_DATA_DIR: dataDir, POSTHORN_HOSTNAME: 'mx.example.com' }, 'domains', 'add', 'second-hour.dev');
  t.is(quiet.stderr, '');
  const key = await cli({ POSTHORN_DATA_DIR: dataDir }, 'keys', 'create', '--name', 'ops');
  t.regex(key.stdout.trim().split('\n').pop()!, /^ph_[0-9a-z]{12}_/);
});

test('an admin command run where no database is yet (another directory than the server\'s) is refused if it needs data, and says it starts a new, empty one if it makes some', async (t) => {
  const elsewhere = tempDir(t, 'posthorn-cwd-');
  const inDir = (...args: string[]) => run(process.execPath, [BIN, ...args], { cwd: elsewhere, env: { PATH: process.env.PATH!, POSTHORN_DNS_SERVERS: '127.0.0.1:9' } });
  const listed = await t.throwsAsync(inDir('keys', 'list'));
  t.is((listed as any).code, 1);
  t.is((listed as any).stderr, `posthorn: there is no store at ${join(elsewhere, 'data', 'posthorn.db')}: this command works on existing data; point POSTHORN_DATA_DIR (or dataDir in the --config file) at the server's data directory, or make a new store there with ${BIN} migrate\n`);
  t.false(existsSync(join(elsewhere, 'data')), 'keys list made no data directory');
  const first = await inDir('keys', 'create', '--name', 'ops');
  t.regex(first.stdout.trim().split('\n').pop()!, /^ph_[0-9a-z]{12}_/, 'the key is still the last line of stdout');
  const notice = first.stderr.split('\n').filter((l) => l.startsWith('posthorn: '));
  t.is(notice.length, 1, first.stderr);
  t.true(notice[0]!.includes(`no database in ${join(elsewhere, 'data')} yet`), notice[0]);
  t.regex(notice[0]!, /started a new, empty one.*POSTHORN_DATA_DIR/);
  // The database is there now: nothing more to say.
  const again = await inDir('keys', 'list');
  t.is(again.stderr, '');
});

test('domains verify shows short record values, and --full the whole DKIM key', async (t) => {
  const zone = await startDnsZone();
  t.teardown(() => zone.close());
  const env = { POSTHORN_DATA_DIR: tempDir(t, 'posthorn-cli-'), POSTHORN_DNS_SERVERS: zone.server, POSTHORN_HOSTNAME: 'mx.example.com' };
  await cli(env, 'domains', 'add', 'short-table.dev');
  // Not verified yet: exit 2 (domains verify --help), with the whole report on stdout.
  const short = ((await t.throwsAsync(cli(env, 'domains', 'verify', 'short-table.dev'))) as any).stdout as string;
  t.regex(short, /^short-table\.dev: PENDING/);
  const rows = short.split('\n').filter((l) => l.startsWith('TXT') || l.startsWith('MX'));
  t.is(rows.length, 4);
  t.true(rows.every((l) => l.length < 160), rows.join('\n'));
  t.regex(short, /v=DKIM1; k=rsa; p=\S+…/);
  t.regex(short, /--full prints them whole/);
  const full = ((await t.throwsAsync(cli(env, 'domains', 'verify', 'short-table.dev', '--full'))) as any).stdout as string;
  const dkim = /v=DKIM1; k=rsa; p=([A-Za-z0-9+/=]+)/.exec(full)?.[1];
  t.true((dkim?.length ?? 0) > 300, 'the whole public key');
  t.false(full.includes('…'));
});

test('init writes nothing when one of its files exists: a second run after removing that one works', async (t) => {
  const dir = tempDir(t, 'posthorn-init-');
  writeFileSync(join(dir, 'posthorn.service'), '# an older unit\n');
  const refused = await t.throwsAsync(run(process.execPath, [BIN, 'init'], { cwd: dir, env: { PATH: process.env.PATH! } }));
  t.regex((refused as any).stderr, /posthorn\.service exists; pass --force/);
  t.false(existsSync(join(dir, 'posthorn.toml')), 'the config file was written although init failed');
  t.is(readFileSync(join(dir, 'posthorn.service'), 'utf8'), '# an older unit\n');
  rmSync(join(dir, 'posthorn.service'));
  const done = await run(process.execPath, [BIN, 'init'], { cwd: dir, env: { PATH: process.env.PATH! } });
  t.regex(done.stdout, /wrote .*posthorn\.toml/);
  t.true(existsSync(join(dir, 'posthorn.service')));
});

test('send from a domain that has not verified names the sandbox variable, which the CLI needs as well as the server', async (t) => {
  const env = { POSTHORN_DATA_DIR: tempDir(t, 'posthorn-cli-'), POSTHORN_HOSTNAME: 'mx.example.com' };
  await cli(env, 'domains', 'add', 'not-yet.dev');
  const args = ['send', '--from', 'hi@not-yet.dev', '--to', 'you@example.org', '--subject', 's', '--text', 't'];
  const refused = await t.throwsAsync(cli(env, ...args));
  t.is((refused as any).code, 1);
  t.regex((refused as any).stderr, /^posthorn: domain not-yet\.dev is not verified yet;/);
  t.regex((refused as any).stderr, /POSTHORN_SANDBOX=true for the server, and for posthorn send too/);
  // The domain is the first team's: naming another team would not help, so it is not suggested.
  t.notRegex((refused as any).stderr, /--team/);
  const sent = await cli({ ...env, POSTHORN_SANDBOX: 'true' }, ...args);
  t.regex(sent.stdout, /^em_\w+\n$/);
});

test('queue trace of an email without attempts does not suggest one is pending: sandbox deliveries make none', async (t) => {
  const env = { POSTHORN_DATA_DIR: tempDir(t, 'posthorn-cli-'), POSTHORN_HOSTNAME: 'mx.example.com', POSTHORN_SANDBOX: 'true' };
  await cli(env, 'domains', 'add', 'trace-less.dev');
  const emailId = (await cli(env, 'send', '--from', 'hi@trace-less.dev', '--to', 'you@example.org', '--subject', 's', '--text', 't')).stdout.trim();
  const trace = (await cli(env, 'queue', 'trace', emailId)).stdout;
  t.regex(trace, new RegExp(`^${emailId}: no SMTP attempt recorded`));
  t.regex(trace, /sandbox/);
  t.notRegex(trace, /\(yet,/);
});

test('send without --team from a domain of another team says which team it used and how to name the right one', async (t) => {
  const env = { POSTHORN_DATA_DIR: tempDir(t, 'posthorn-cli-'), POSTHORN_HOSTNAME: 'mx.example.com', POSTHORN_SANDBOX: 'true' };
  await cli(env, 'teams', 'create', '--name', 'First');
  await cli(env, 'teams', 'create', '--name', 'Second');
  await cli(env, 'domains', 'add', 'second-team.dev', '--team', '2');
  const args = ['send', '--from', 'hi@second-team.dev', '--to', 'you@example.org', '--subject', 's', '--text', 't'];
  const refused = await t.throwsAsync(cli(env, ...args));
  t.is((refused as any).code, 1);
  t.regex((refused as any).stderr, /^posthorn: domain second-team\.dev is not a domain of this team/);
  t.regex((refused as any).stderr, /sent as team 1 \(First\), the first team: pass --team with the id of the team that has the domain \(\S*posthorn domains list\)\)/);
  const sent = await cli(env, ...args, '--team', '2');
  t.regex(sent.stdout, /^em_\w+\n$/);
});

test('an admin command warns on stderr of a POSTHORN_ variable that is no setting, naming the one it probably meant', async (t) => {
  const dataDir = tempDir(t, 'posthorn-cli-');
  const listed = await cli({ POSTHORN_DATA_DIR: dataDir, POSTHORN_DATA_DIRR: '/elsewhere' }, 'teams', 'create', '--name', 'Acme');
  t.regex(listed.stderr, /^posthorn: warning: POSTHORN_DATA_DIRR is set but is no setting of Posthorn, so it changes nothing \(did you mean POSTHORN_DATA_DIR\?\)$/m);
  const quiet = await cli({ POSTHORN_DATA_DIR: dataDir }, 'keys', 'list');
  t.notRegex(quiet.stderr, /warning/);
});

test('send --help says what the README says: the sender needs a verified domain, or sandbox mode for the CLI too', async (t) => {
  const help = (await cli({}, 'send', '--help')).stdout.replace(/\s+/g, ' ');
  t.regex(help, /--from <address> sender, on a verified domain of the team, or any of its domains with POSTHORN_SANDBOX=true \(as for the server\); "Name <a@b>" works/);
  t.regex(help, /prints the email's id/);
});

test('domains verify --help gives its exit codes, which a script acts on', async (t) => {
  const help = (await cli({}, 'domains', 'verify', '--help')).stdout;
  t.regex(help, /^ {2}0 +verified \(SUCCESS\)$/m);
  t.regex(help, /^ {2}2 +checked, not verified: PENDING, FAILED or TEMPORARY_FAILURE/m);
  t.regex(help, /^ {2}1 +an error/m);
});

test('the CLI words its refusals in its own options: send without a body, a console user for a team that does not exist', async (t) => {
  const dataDir = tempDir(t, 'posthorn-cli-');
  // No templateId option here: the API's "(or a templateId)" would send the user looking for one.
  const noBody = await t.throwsAsync(cli({ POSTHORN_DATA_DIR: dataDir }, 'send', '--from', 'a@first-hour.dev', '--to', 'b@example.org', '--subject', 's'));
  t.is((noBody as any).stderr.trim(), 'posthorn: --text or --html is required');
  await cli({ POSTHORN_DATA_DIR: dataDir }, 'teams', 'create', '--name', 'One');
  const noTeam = await t.throwsAsync(cli({ POSTHORN_DATA_DIR: dataDir }, 'users', 'create', '--email', 'x@example.org', '--team', '99'));
  t.is((noTeam as any).stderr.trim(), 'posthorn: team 99 not found', 'as keys create and domains add say it');
});

test('domains add prints the whole DKIM key last in its row, so the other records stay narrow on a terminal', async (t) => {
  const out = (await cli({ POSTHORN_DATA_DIR: tempDir(t, 'posthorn-cli-'), POSTHORN_HOSTNAME: 'mx.example.com' }, 'domains', 'add', 'wide-key.dev')).stdout;
  const rows = out.split('\n').filter((l) => /^(TXT|MX) /.test(l));
  t.is(rows.length, 4);
  const dkim = rows.find((l) => l.includes('._domainkey.'))!;
  t.regex(dkim, /v=DKIM1; k=rsa; p=[A-Za-z0-9+/=]{300,}$/, 'the key whole, at the end of its line');
  t.true(rows.filter((l) => l !== dkim).every((l) => l.length < 120), rows.join('\n'));
  t.regex(out, /^type +name +priority +status +required +value$/m);
});
