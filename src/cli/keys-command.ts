import type { Command } from 'commander';
import { existingTeam, parseIntOption, printTable, withApp } from './cli-context.js';
import { keyName } from '../core/api-keys/api-key-service.js';

export function registerKeys(program: Command): void {
  const keys = program.command('keys').description('manage API keys');
  keys
    .command('create')
    .description('create an API key; the full key is the last line of standard output')
    .requiredOption('--name <name>', 'a name to recognise the key by')
    .option('--team <id>', 'team id (default: the first team; one is created if none exists)')
    .option('--permission <p>', 'FULL or SENDING', 'FULL')
    .option('--domain <id>', 'restrict the key to one domain id')
    .option('--operator', 'a server-operator key (no team): it may call only /admin/v1 and /metrics')
    .action(async (opts: { name: string; team?: string; permission: string; domain?: string; operator?: boolean }, cmd: Command) => {
      const permission = opts.permission.toUpperCase();
      if (permission !== 'FULL' && permission !== 'SENDING') throw new Error('--permission must be FULL or SENDING');
      if (opts.operator && (opts.team !== undefined || opts.domain !== undefined || permission !== 'FULL')) throw new Error('--operator keys belong to no team: --team, --domain and --permission do not apply');
      keyName(opts.name);
      const teamId = opts.team !== undefined ? parseIntOption(opts.team, '--team') : undefined;
      const domainId = opts.domain !== undefined ? parseIntOption(opts.domain, '--domain') : null;
      await withApp(cmd, async (app) => {
        if (opts.operator) {
          const key = await app.services.operatorKeys.create(opts.name, 'cli');
          process.stdout.write(`created operator key ${key.id}; it is shown only now:\n${key.token}\n`);
          return;
        }
        const team = teamId !== undefined ? await existingTeam(app, opts.team!) : ((await app.services.teams.list())[0]?.id ?? (await app.services.teams.create('Default team', null, 'cli')));
        const key = await app.services.apiKeys.create(team, { name: opts.name, permission, domainId }, null, 'cli');
        process.stdout.write(`created key ${key.id} (${key.permission}) for team ${team}; it is shown only now:\n${key.token}\n`);
      }, { makesStore: true });
    });
  keys
    .command('list')
    .description('list API keys of every team, and operator keys (never the secret)')
    .action(async (_opts, cmd: Command) => {
      await withApp(cmd, async (app) => {
        process.stdout.write('Team keys\n');
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
        process.stdout.write('\nOperator keys\n');
        printTable(
          (await app.services.operatorKeys.list()).map((k) => ({ id: k.id, name: k.name, key: k.partialKey, lastUsed: k.lastUsed ?? 'never' })),
        );
      });
    });
  keys
    .command('revoke')
    .description('revoke an API key at once')
    .argument('<id>')
    .option('--operator', 'the id is an operator key\'s')
    .action(async (id: string, opts: { operator?: boolean }, cmd: Command) => {
      const keyId = parseIntOption(id, 'id');
      await withApp(cmd, async (app) => {
        if (opts.operator) {
          await app.services.operatorKeys.revoke(keyId, 'cli');
        } else {
          await app.services.apiKeys.revokeAnyTeam(keyId, 'cli');
        }
        process.stdout.write(`revoked ${opts.operator ? 'operator ' : ''}key ${id}\n`);
      });
    });
}
