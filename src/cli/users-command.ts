import type { Command } from 'commander';
import { existingTeam, parseIntOption, printTable, withApp } from './cli-context.js';
import { checkPassword, userEmail } from '../core/users/user-service.js';

// Console users (docs/console.md, docs/operations.md). A password is generated and printed
// once, or read from standard input with --password-stdin (first line), so it never appears
// in the process list or the shell history.

async function readPasswordFromStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  const line = Buffer.concat(chunks).toString('utf8').split(/\r?\n/)[0] ?? '';
  if (!line) throw new Error('--password-stdin: standard input is empty');
  return line;
}

export function registerUsers(program: Command): void {
  const users = program.command('users').description('manage web console users');
  users
    .command('create')
    .description('create a console user; prints a generated password once (or reads one with --password-stdin)')
    .requiredOption('--email <email>', 'the address the user signs in with')
    .requiredOption('--team <id>', 'the team the user sees')
    .option('--operator', 'also sees the operator pages (teams, queue)')
    .option('--password-stdin', 'read the password from the first line of standard input')
    .action(async (opts: { email: string; team: string; operator?: boolean; passwordStdin?: boolean }, cmd: Command) => {
      const password = opts.passwordStdin ? await readPasswordFromStdin() : undefined;
      const teamId = parseIntOption(opts.team, '--team');
      userEmail(opts.email);
      if (password !== undefined) checkPassword(password);
      await withApp(cmd, async (app) => {
        await existingTeam(app, opts.team);
        const res = await app.services.users.create({ email: opts.email, teamId, operator: opts.operator ?? false, password }, 'cli');
        const role = res.user.operator ? 'operator' : 'team member';
        process.stdout.write(`created console user ${res.user.id} ${res.user.email} (${role}, team ${res.user.teamId})\n`);
        if (res.generated) process.stdout.write(`password (shown only now):\n${res.password}\n`);
        process.stdout.write(`sign in at ${await app.consoleUrl()}\n`);
      });
    });
  users
    .command('list')
    .description('list console users (never a password)')
    .action(async (_opts, cmd: Command) => {
      await withApp(cmd, async (app) => {
        printTable((await app.services.users.list()).map((u) => ({ id: u.id, email: u.email, team: u.teamId, operator: u.operator ? 'yes' : 'no', lastLogin: u.lastLoginAt ?? 'never', createdAt: u.createdAt })));
      });
    });
  users
    .command('reset-password')
    .description('set a new password (generated and printed once, or --password-stdin); signs the user out everywhere')
    .argument('<user>', 'id or email')
    .option('--password-stdin', 'read the password from the first line of standard input')
    .action(async (user: string, opts: { passwordStdin?: boolean }, cmd: Command) => {
      const password = opts.passwordStdin ? await readPasswordFromStdin() : undefined;
      if (password !== undefined) checkPassword(password);
      await withApp(cmd, async (app) => {
        const res = await app.services.users.resetPassword(user, password, 'cli');
        process.stdout.write(`new password set for ${res.user.email}; its sessions were ended\n`);
        if (res.generated) process.stdout.write(`password (shown only now):\n${res.password}\n`);
      });
    });
  users
    .command('delete')
    .description('delete a console user and end its sessions')
    .argument('<user>', 'id or email')
    .action(async (user: string, _opts, cmd: Command) => {
      await withApp(cmd, async (app) => {
        const gone = await app.services.users.remove(user, 'cli');
        process.stdout.write(`deleted console user ${gone.id} ${gone.email}\n`);
      });
    });
}
