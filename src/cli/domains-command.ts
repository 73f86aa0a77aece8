import type { Command } from 'commander';
import { checkPool, cliCommand, existingTeam, parseIntOption, printTable, shellWord, withApp } from './cli-context.js';
import { normalizeDomainName } from '../core/domains/domain-names.js';
import type { App } from '../app.js';

/** A --team option's id, checked before the store is opened (undefined when not given). */
const teamOption = (team?: string) => (team !== undefined ? parseIntOption(team, '--team') : undefined);

async function teamFor(app: App, team?: string): Promise<number> {
  if (team !== undefined) return existingTeam(app, team);
  return (await app.services.teams.list())[0]?.id ?? (await app.services.teams.create('Default team', null, 'cli'));
}

/** Characters of a record value a table shows unless --full: a DKIM key is about 400. */
const SHORT_VALUE_CHARS = 40;

export function shortValue(value: string): string {
  return value.length <= SHORT_VALUE_CHARS ? value : `${value.slice(0, SHORT_VALUE_CHARS - 1)}…`;
}

function printRecords(records: { type: string; name: string; value: string; priority: string | null; status: string; recommended: boolean }[], full = true): void {
  printTable(
    records.map((r) => ({ type: r.type, name: r.name, priority: r.priority ?? '', status: r.status, required: r.recommended ? 'recommended' : 'yes', value: full ? r.value : shortValue(r.value) })),
  );
  if (!full && records.some((r) => r.value.length > SHORT_VALUE_CHARS)) process.stdout.write('(long values shortened; --full prints them whole)\n');
}

/**
 * `domains verify`'s exit status when the check ran but the domain is not verified (PENDING,
 * FAILED, TEMPORARY_FAILURE): an answer a script or a deploy step acts on, apart from the 1 of
 * an error (the check could not run) and 0 (verified).
 */
export const EXIT_NOT_VERIFIED = 2;

export function registerDomains(program: Command): void {
  const domains = program.command('domains').description('manage sending domains');
  domains
    .command('add')
    .description('add a sending domain and print the DNS records to publish')
    .argument('<name>')
    .option('--team <id>', 'team id (default: the first team)')
    .option('--region <region>', 'region label', 'default')
    .action(async (name: string, opts: { team?: string; region: string }, cmd: Command) => {
      teamOption(opts.team);
      normalizeDomainName(name);
      await withApp(cmd, async (app) => {
        const teamId = await teamFor(app, opts.team);
        const d = await app.services.domains.create({ teamId, domainId: null }, { name, region: opts.region });
        process.stdout.write(`domain ${d.id} ${d.name} added to team ${teamId}. Publish these records, then run: ${cliCommand(cmd, `domains verify ${shellWord(d.name)}`)}\n\n`);
        printRecords(d.dnsRecords);
      }, { makesStore: true });
    });
  domains
    .command('list')
    .description('list domains of a team, or of every team')
    .option('--team <id>', 'only this team')
    .action(async (opts: { team?: string }, cmd: Command) => {
      teamOption(opts.team);
      await withApp(cmd, async (app) => {
        const teams = opts.team !== undefined ? [await existingTeam(app, opts.team)] : (await app.services.teams.list()).map((t) => t.id);
        const rows = [];
        for (const teamId of teams) {
          for (const d of await app.services.domains.list({ teamId, domainId: null })) {
            rows.push({ id: d.id, team: teamId, name: d.name, status: d.status, dkim: d.dkimStatus ?? '', spf: d.spfDetails ?? '', lastChecked: d.lastCheckedTime ?? 'never' });
          }
        }
        printTable(rows);
      });
    });
  domains
    .command('set-pool')
    .description('send the domain\'s mail through an egress pool of outbound.pools, over its team\'s ("default" clears it)')
    .argument('<nameOrId>')
    .argument('<pool>')
    .option('--team <id>', 'team id, when several teams have the name')
    .action(async (nameOrId: string, pool: string, opts: { team?: string }, cmd: Command) => {
      const teamId = teamOption(opts.team) ?? null;
      await withApp(
        cmd,
        async (app) => {
          const found = await app.services.domains.findForCli(teamId, nameOrId);
          if (!found) throw new Error(`domain ${nameOrId} not found`);
          const d = await app.services.domains.setPool(found.id, pool, 'cli');
          if (!d) throw new Error(`domain ${nameOrId} not found`);
          process.stdout.write(`domain ${d.name} sends through ${d.pool ? `pool ${d.pool}` : "its team's pool"}\n`);
        },
        { check: (config) => checkPool(config, pool) },
      );
    });
  domains
    .command('verify')
    .description(`check the DNS records of a domain now and print each record's status; exits ${EXIT_NOT_VERIFIED} while the domain is not verified`)
    .argument('<nameOrId>')
    .option('--team <id>', 'team id, when several teams have the name')
    .option('--full', 'print every record value whole (the DKIM key is about 400 characters)')
    .addHelpText(
      'after',
      `\nExit status:\n  0   verified (SUCCESS)\n  ${EXIT_NOT_VERIFIED}   checked, not verified: PENDING, FAILED or TEMPORARY_FAILURE (the reason is printed)\n  1   an error: the domain not found, the store out of reach, ... (78: an invalid configuration)\n`,
    )
    .action(async (nameOrId: string, opts: { team?: string; full?: boolean }, cmd: Command) => {
      const teamId = teamOption(opts.team) ?? null;
      await withApp(cmd, async (app) => {
        const found = await app.services.domains.findForCli(teamId, nameOrId);
        if (!found) throw new Error(`domain ${nameOrId} not found`);
        const result = await app.services.domains.verify({ teamId: found.teamId, domainId: null }, found.id);
        process.stdout.write(`${result.domain.name}: ${result.domain.status}\n${result.message}\n\n`);
        printRecords(result.domain.dnsRecords, opts.full === true);
        if (result.domain.status !== 'SUCCESS') process.exitCode = EXIT_NOT_VERIFIED;
      });
    });
}
