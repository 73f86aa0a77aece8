import test from 'ava';
import { acceptAudit, appWithCli, refuseAudit } from '../helpers/refuse-audit.js';

// The CLI's changes to console users, team API keys and teams are operator actions like its queue
// and operator-key changes (docs/operations.md, The audit log): each commits with its `cli` audit
// entry, and a refused entry fails the command with nothing changed. Run on SQLite and, with
// POSTHORN_TEST_STORE=postgres, on PostgreSQL (the CLI on the test app's database).

async function setUp(t: import('ava').ExecutionContext) {
  const { app, cli } = await appWithCli(t);
  const entries = async () => (await app.app.services.audit.list(20)).entries.reverse().map((e) => [e.actor, e.action, e.target]);
  return { app, cli, entries };
}

test('users create, reset-password and delete are audited as cli; a refused entry fails the command and changes nothing', async (t) => {
  const { app, cli, entries } = await setUp(t);
  const users = async () => (await app.app.services.users.list()).map((u) => u.email);

  await refuseAudit(app.app);
  const refused = await t.throwsAsync(cli('users', 'create', '--email', 'ops@acme.example', '--team', String(app.teamId), '--operator'));
  t.regex((refused as any).stderr, /refused by the test/);
  t.deepEqual(await users(), [], 'no user was made');
  await acceptAudit(app.app);

  const made = await cli('users', 'create', '--email', 'ops@acme.example', '--team', String(app.teamId), '--operator');
  const id = Number(/created console user (\d+)/.exec(made.stdout)![1]);
  const password = /password \(shown only now\):\n(\S+)\n/.exec(made.stdout)![1]!;

  await refuseAudit(app.app);
  await t.throwsAsync(cli('users', 'reset-password', 'ops@acme.example'));
  t.truthy(await app.app.services.users.verifyCredentials('ops@acme.example', password), 'the password is unchanged');
  await t.throwsAsync(cli('users', 'delete', String(id)));
  t.deepEqual(await users(), ['ops@acme.example'], 'the user is still there');
  await acceptAudit(app.app);

  await cli('users', 'reset-password', 'ops@acme.example');
  await cli('users', 'delete', String(id));
  t.deepEqual(await users(), []);
  t.deepEqual(await entries(), [
    ['cli', 'console-user.create', { userId: id, email: 'ops@acme.example', teamId: app.teamId, operator: true }],
    ['cli', 'console-user.password-reset', { userId: id, email: 'ops@acme.example' }],
    ['cli', 'console-user.delete', { userId: id, email: 'ops@acme.example' }],
  ]);
});

test('keys create and revoke of a team key, teams create and set-rate-limit are audited as cli; a refused entry changes nothing', async (t) => {
  const { app, cli, entries } = await setUp(t);
  const keyNames = async () => (await app.app.services.apiKeys.listAll()).map((k) => k.name).sort();
  const before = await keyNames();

  await refuseAudit(app.app);
  await t.throwsAsync(cli('keys', 'create', '--name', 'never', '--team', String(app.teamId)));
  t.deepEqual(await keyNames(), before, 'no key was made');
  await t.throwsAsync(cli('teams', 'create', '--name', 'Never'));
  t.is((await app.app.services.teams.list()).length, 1, 'no team was made');
  await acceptAudit(app.app);

  const made = await cli('keys', 'create', '--name', 'deploy', '--team', String(app.teamId), '--permission', 'SENDING');
  const keyId = Number(/created key (\d+)/.exec(made.stdout)![1]);

  await refuseAudit(app.app);
  await t.throwsAsync(cli('keys', 'revoke', String(keyId)));
  t.true((await keyNames()).includes('deploy'), 'the key is not revoked');
  await t.throwsAsync(cli('teams', 'set-rate-limit', String(app.teamId), '7'));
  t.is((await app.app.services.teams.get(app.teamId))!.rateLimit, null, 'the limit is unchanged');
  await acceptAudit(app.app);

  await cli('keys', 'revoke', String(keyId));
  t.deepEqual(await keyNames(), before);
  const teamId = Number((await cli('teams', 'create', '--name', 'Beta')).stdout.trim());
  await cli('teams', 'set-rate-limit', String(teamId), '7');
  t.deepEqual(await entries(), [
    ['cli', 'api-key.create', { keyId, teamId: app.teamId, name: 'deploy', permission: 'SENDING', domainId: null }],
    ['cli', 'api-key.revoke', { keyId }],
    ['cli', 'team.create', { teamId, name: 'Beta' }],
    ['cli', 'team.update', { teamId, rateLimit: 7 }],
  ]);
});
