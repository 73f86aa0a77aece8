import type { Command } from 'commander';
import { checkPool, parseIntOption, printTable, withApp } from './cli-context.js';
import { rateLimitOf, teamName } from '../core/teams/team-service.js';

export function registerTeams(program: Command): void {
  const teams = program.command('teams').description('manage teams (accounts)');
  teams
    .command('create')
    .description('create a team and print its id')
    .requiredOption('--name <name>', 'team name')
    .option('--rate-limit <n>', 'API requests per second for this team (default: the configured limit)')
    .action(async (opts: { name: string; rateLimit?: string }, cmd: Command) => {
      teamName(opts.name);
      const rateLimit = rateLimitOf(opts.rateLimit !== undefined ? parseIntOption(opts.rateLimit, '--rate-limit') : null);
      await withApp(cmd, async (app) => {
        const id = await app.services.teams.create(opts.name, rateLimit, 'cli');
        process.stdout.write(`${id}\n`);
      }, { makesStore: true });
    });
  teams
    .command('list')
    .description('list teams')
    .action(async (_opts, cmd: Command) => {
      await withApp(cmd, async (app) => {
        printTable((await app.services.teams.list()).map((t) => ({ id: t.id, name: t.name, rateLimit: t.rateLimit ?? 'default', pool: t.pool ?? 'default', createdAt: t.createdAt })));
      });
    });
  teams
    .command('set-rate-limit')
    .description('set a team\'s API requests per second ("default" clears the override)')
    .argument('<teamId>')
    .argument('<limit>')
    .action(async (teamId: string, limit: string, _opts, cmd: Command) => {
      const id = parseIntOption(teamId, 'teamId');
      const rateLimit = rateLimitOf(limit === 'default' ? null : parseIntOption(limit, 'limit'));
      await withApp(cmd, async (app) => {
        const ok = await app.services.teams.setRateLimit(id, rateLimit, 'cli');
        if (!ok) throw new Error(`team ${teamId} not found`);
        process.stdout.write('ok\n');
      });
    });
  teams
    .command('set-pool')
    .description('send the team\'s mail through an egress pool of outbound.pools ("default" clears it)')
    .argument('<teamId>')
    .argument('<pool>')
    .action(async (teamId: string, pool: string, _opts, cmd: Command) => {
      const id = parseIntOption(teamId, 'teamId');
      await withApp(
        cmd,
        async (app) => {
          const team = await app.services.teams.update(id, { pool }, 'cli');
          if (!team) throw new Error(`team ${teamId} not found`);
          process.stdout.write(`team ${id} sends through pool ${team.pool ?? 'default'}\n`);
        },
        { check: (config) => checkPool(config, pool) },
      );
    });
}
