import type { Command } from 'commander';
import { parseIntOption, printTable, withApp } from './cli-context.js';

export function registerKeys(program: Command): void {
  const keys = program.command('keys').description('manage API keys');
  keys
    .command('create')
    .description('create an API key; the full key is the last line of standard output')
    .requiredOption('--name <name>', 'a name to recognise the key by')
    .option('--team <id>', 'team id (default: the first team; one is created if none exists)')
    .option('--permission <p>', 'FULL or SENDING', 'FULL')
    .option('--domain <id>', 'restrict the key to one domain id')
    .action(async (opts: { name: string; team?: string; permission: string; domain?: string }, cmd: Command) => {
      const permission = opts.permission.toUpperCase();
      if (permission !== 'FULL' && permission !== 'SENDING') throw new Error('--permission must be FULL or SENDING');
      await withApp(cmd, async (app) => {
        let teamId: number;
        if (opts.team) {
          teamId = parseIntOption(opts.team, '--team');
          if (!(await app.services.teams.get(teamId))) throw new Error(`team ${teamId} not found`);
        } else {
          teamId = (await app.services.teams.list())[0]?.id ?? (await app.services.teams.create('Default team'));
        }
        const key = await app.services.apiKeys.create(teamId, {
          name: opts.name,
          permission,
          domainId: opts.domain ? parseIntOption(opts.domain, '--domain') : null,
        });
        process.stdout.write(`created key ${key.id} (${key.permission}) for team ${teamId}; it is shown only now:\n${key.token}\n`);
      });
    });
  keys
    .command('list')
    .description('list API keys of every team (never the secret)')
    .action(async (_opts, cmd: Command) => {
      await withApp(cmd, async (app) => {
        printTable(
          (await app.services.apiKeys.listAll()).map((k) => ({
            id: k.id,
            team: k.teamId,
            name: k.name,
            permission: k.permission,
            domain: k.domainId ?? '',
            key: k.partialKey,
            lastUsed: k.lastUsed ?? 'never',
          })),
        );
      });
    });
  keys
    .command('revoke')
    .description('revoke an API key at once')
    .argument('<id>')
    .action(async (id: string, _opts, cmd: Command) => {
      await withApp(cmd, async (app) => {
        await app.services.apiKeys.revoke(parseIntOption(id, 'id'));
        process.stdout.write(`revoked key ${id}\n`);
      });
    });
}
