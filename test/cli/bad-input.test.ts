import test from 'ava';
import { tempDir } from '../helpers/temp-dir.js';
import { cli, ok, refused } from './bad-input-cli.js';

// Bad input on the command line: a one-line `posthorn: ...` naming what is wrong and a non-zero
// exit, never a stack trace, a database's own error or a silent wrong result, and nothing changed.

test('an empty option value is refused, never taken for the option left out', async (t) => {
  const dataDir = tempDir(t, 'posthorn-bad-input-');
  await ok(t, dataDir, ['teams', 'create', '--name', 'Acme']);
  await refused(t, dataDir, ['keys', 'create', '--name', 'k', '--domain', ''], /--domain must be/);
  await refused(t, dataDir, ['keys', 'create', '--name', 'k', '--team', ''], /--team must be/);
  await refused(t, dataDir, ['teams', 'create', '--name', 'Beta', '--rate-limit', ''], /--rate-limit must be/);
  await refused(t, dataDir, ['domains', 'add', 'bad-input.dev', '--team', ''], /--team must be/);
  await refused(t, dataDir, ['domains', 'list', '--team', ''], /--team must be/);
  await refused(t, dataDir, ['send', '--from', 'a@bad-input.dev', '--to', 'b@example.com', '--subject', 's', '--text', 't', '--team', ''], /--team must be/);
  await refused(t, dataDir, ['--config', '', 'teams', 'list'], /--config/, { code: 78 });
  // Nothing was made by the refused commands.
  t.notRegex(await ok(t, dataDir, ['keys', 'list']), /\bk\b/);
  t.notRegex(await ok(t, dataDir, ['teams', 'list']), /Beta/);
  t.notRegex(await ok(t, dataDir, ['domains', 'list']), /bad-input\.dev/);
});

test('a number out of range is refused before it reaches the store: 0, negative, huge', async (t) => {
  const dataDir = tempDir(t, 'posthorn-bad-input-');
  await ok(t, dataDir, ['teams', 'create', '--name', 'Acme']);
  const range = /must be a whole number from 1 to 2147483647/;
  await refused(t, dataDir, ['queue', 'messages', '--limit', '0'], /--limit must be/);
  await refused(t, dataDir, ['queue', 'messages', '--limit', '99999999999999999999999'], /--limit must be/);
  // The API's bound on a page of the queue, with the same kind of message as any other number.
  await refused(t, dataDir, ['queue', 'messages', '--limit', '501'], /^posthorn: --limit must be a whole number from 1 to 500, got "501"$/);
  t.regex(await ok(t, dataDir, ['queue', 'messages', '--limit', '500']), /No queued deliveries match/);
  await refused(t, dataDir, ['keys', 'revoke', '99999999999999999999999'], range);
  await refused(t, dataDir, ['keys', 'revoke', '0'], range);
  await refused(t, dataDir, ['queue', 'purge', '99999999999999999999999'], range);
  await refused(t, dataDir, ['queue', 'retry', '-3'], range);
  await refused(t, dataDir, ['teams', 'set-rate-limit', '99999999999999999999999', '5'], range);
  await refused(t, dataDir, ['domains', 'list', '--team', '3000000000'], range);
});

test('a --team that does not exist is named, and nothing is held or sent for it', async (t) => {
  const dataDir = tempDir(t, 'posthorn-bad-input-');
  await ok(t, dataDir, ['teams', 'create', '--name', 'Acme']);
  await refused(t, dataDir, ['domains', 'list', '--team', '9'], /team 9 not found/);
  await refused(t, dataDir, ['send', '--from', 'a@bad-input.dev', '--to', 'b@example.com', '--subject', 's', '--text', 't', '--team', '9'], /team 9 not found/);
  await refused(t, dataDir, ['queue', 'messages', '--team', '9'], /team 9 not found/);
  await refused(t, dataDir, ['queue', 'retry', '--team', '9'], /team 9 not found/);
  await refused(t, dataDir, ['queue', 'bounce', '--reason', 'r', '--team', '9'], /team 9 not found/);
  // A suspension of team 9 would hold the mail of a team made later with that id.
  await refused(t, dataDir, ['queue', 'suspend', '--minutes', '5', '--reason', 'r', '--team', '9'], /team 9 not found/);
  t.deepEqual(JSON.parse(await ok(t, dataDir, ['queue', '--json'])).suspensions, []);
});

test('queue: a delivery id with a selector is refused and nothing is made due; selectors and minutes are named as options', async (t) => {
  const dataDir = tempDir(t, 'posthorn-bad-input-');
  await ok(t, dataDir, ['teams', 'create', '--name', 'Acme']);
  await ok(t, dataDir, ['teams', 'create', '--name', 'Other']);
  await ok(t, dataDir, ['domains', 'add', 'bad-input.dev', '--team', '1']);
  const sandbox = { POSTHORN_SANDBOX: 'true' };
  await ok(t, dataDir, ['send', '--from', 'a@bad-input.dev', '--to', 'b@example.com', '--subject', 's', '--text', 't', '--scheduled-at', 'in 3 days'], sandbox);
  const before = JSON.parse(await ok(t, dataDir, ['queue', 'messages', '--json']));
  t.is(before.messages.length, 1);
  const delivery = before.messages[0];
  t.is(delivery.state, 'scheduled');
  // Team 2's id with team 1's delivery: the selector must not be dropped in silence.
  await refused(t, dataDir, ['queue', 'retry', String(delivery.deliveryId), '--team', '2'], /a delivery id or --destination, --team, --campaign, --email/);
  t.deepEqual(JSON.parse(await ok(t, dataDir, ['queue', 'messages', '--json'])).messages, before.messages);
  await refused(t, dataDir, ['queue', 'retry'], /give at least one of --destination, --team, --campaign or --email/);
  await refused(t, dataDir, ['queue', 'suspend', '--minutes', '5', '--reason', 'r'], /give at least one of --destination, --team or --campaign/);
  await refused(t, dataDir, ['queue', 'suspend', '--minutes', '0x10', '--reason', 'r', '--destination', 'example.com'], /--minutes must be a number of minutes, got "0x10"/);
  // A selector given empty selects nothing to act on: refused by name, never read as "all" or as "none, 0 done".
  await refused(t, dataDir, ['queue', 'bounce', '--email', '', '--reason', 'r'], /^posthorn: --email: an email id is empty/);
  await refused(t, dataDir, ['queue', 'bounce', '--email', 'em_x', ' ', '--reason', 'r'], /^posthorn: --email: an email id is empty/);
  await refused(t, dataDir, ['queue', 'bounce', '--campaign', ' ', '--reason', 'r'], /^posthorn: --campaign: is empty/);
  await refused(t, dataDir, ['queue', 'retry', '--destination', ''], /destination: must be a domain name/);
  t.deepEqual(JSON.parse(await ok(t, dataDir, ['queue', 'messages', '--json'])).messages, before.messages);
  t.deepEqual(JSON.parse(await ok(t, dataDir, ['queue', '--json'])).suspensions, []);
});

test('a domain name several teams hold needs --team: verify and set-pool never pick one of them', async (t) => {
  const dataDir = tempDir(t, 'posthorn-bad-input-');
  await ok(t, dataDir, ['teams', 'create', '--name', 'Acme']);
  await ok(t, dataDir, ['teams', 'create', '--name', 'Other']);
  await ok(t, dataDir, ['domains', 'add', 'shared-name.dev', '--team', '1']);
  await ok(t, dataDir, ['domains', 'add', 'shared-name.dev', '--team', '2']);
  await refused(t, dataDir, ['domains', 'verify', 'shared-name.dev'], /shared-name\.dev is a domain of several teams \(1, 2\): pass --team/);
  await refused(t, dataDir, ['domains', 'set-pool', 'shared-name.dev', 'default'], /pass --team/);
  // Named, each team's is found; an id needs no team.
  t.regex(await cli(dataDir, ['domains', 'verify', 'shared-name.dev', '--team', '2']).then((r) => r.stdout), /^shared-name\.dev: /);
  await ok(t, dataDir, ['domains', 'set-pool', '1', 'default']);
});

test('a domain or console user id past the integer range is not found, never a database error', async (t) => {
  const dataDir = tempDir(t, 'posthorn-bad-input-');
  await ok(t, dataDir, ['teams', 'create', '--name', 'Acme']);
  for (const id of ['2147483648', '99999999999999999999']) {
    await refused(t, dataDir, ['domains', 'verify', id], new RegExp(`^posthorn: domain ${id} not found$`));
    await refused(t, dataDir, ['domains', 'set-pool', id, 'default'], new RegExp(`^posthorn: domain ${id} not found$`));
    await refused(t, dataDir, ['users', 'delete', id], new RegExp(`^posthorn: console user ${id} not found$`));
    await refused(t, dataDir, ['users', 'reset-password', id], new RegExp(`^posthorn: console user ${id} not found$`));
  }
});
