import test from 'ava';
import { acceptAudit, appWithCli, refuseAudit } from '../helpers/refuse-audit.js';

// `posthorn keys create|revoke --operator` and its audit entry commit together (docs/operations.md,
// The audit log): when the store refuses the entry, the CLI fails and no key was made (or the key
// is still there); a normal run stores both. Run on SQLite and, with POSTHORN_TEST_STORE=postgres,
// on PostgreSQL (the CLI on the test app's database).

test('keys create and revoke --operator: a refused audit entry fails the command and changes no key; normal runs change the key and are audited', async (t) => {
  const { app, cli } = await appWithCli(t);
  const keys = async () => (await app.app.services.operatorKeys.list()).map((k) => [k.id, k.name]);
  const entries = async () => (await app.app.services.audit.list(10)).entries.map((e) => [e.actor, e.action, e.target]);

  await refuseAudit(app.app);
  const refused = await t.throwsAsync(cli('keys', 'create', '--operator', '--name', 'never'));
  t.regex((refused as any).stderr, /refused by the test/);
  t.deepEqual(await keys(), [], 'no operator key was made');
  t.deepEqual(await entries(), []);
  await acceptAudit(app.app);

  const made = await cli('keys', 'create', '--operator', '--name', 'ops');
  const id = Number(/created operator key (\d+)/.exec(made.stdout)![1]);
  t.deepEqual(await keys(), [[id, 'ops']]);
  t.deepEqual(await entries(), [['cli', 'operator-key.create', { keyId: id, name: 'ops' }]]);

  await refuseAudit(app.app);
  await t.throwsAsync(cli('keys', 'revoke', String(id), '--operator'));
  t.deepEqual(await keys(), [[id, 'ops']], 'the key is not revoked');
  t.is((await entries()).length, 1);
  await acceptAudit(app.app);

  t.regex((await cli('keys', 'revoke', String(id), '--operator')).stdout, /revoked operator key/);
  t.deepEqual(await keys(), []);
  t.deepEqual((await entries())[0], ['cli', 'operator-key.revoke', { keyId: id }]);
  // Revoking a key that is not there changes nothing and records nothing.
  await t.throwsAsync(cli('keys', 'revoke', String(id), '--operator'));
  t.is((await entries()).length, 2);
});
