import type { Command } from 'commander';
import { cliCommand, existingTeam, parseIntOption, withApp } from './cli-context.js';
import { sendBodySchema } from '../core/emails/send-schema.js';
import { AppError, badRequest } from '../core/errors.js';
import { issuePath, plainIssues } from '../core/plain-issues.js';
import { sendFields } from '../core/emails/send-fields.js';
import { domainOf, parseMailbox } from '../core/emails/addresses.js';

export function registerSend(program: Command): void {
  program
    .command('send')
    .description('queue an email through the same path as the API (the running server delivers it); prints the email\'s id')
    .requiredOption('--from <address>', 'sender, on a verified domain of the team, or any of its domains with POSTHORN_SANDBOX=true (as for the server); "Name <a@b>" works')
    .requiredOption('--to <address...>', 'recipient(s)')
    .requiredOption('--subject <subject>', 'subject')
    .option('--text <text>', 'plain-text body')
    .option('--html <html>', 'HTML body')
    .option('--cc <address...>', 'cc recipient(s)')
    .option('--bcc <address...>', 'bcc recipient(s)')
    .option('--scheduled-at <when>', 'ISO 8601 or plain English, e.g. "tomorrow 9am"')
    .option('--tag <tag...>', 'tags')
    .option('--team <id>', 'team id (default: the first team)')
    .action(async (opts: Record<string, string | string[] | undefined>, cmd: Command) => {
      // The body is checked before the store is opened; what needs it (the team, the sending
      // domain) is checked by the submit itself.
      if (opts.team !== undefined) parseIntOption(opts.team as string, '--team');
      const body = { from: opts.from, to: opts.to, subject: opts.subject, text: opts.text, html: opts.html, cc: opts.cc, bcc: opts.bcc, scheduledAt: opts.scheduledAt, tags: opts.tag };
      // The API's wording names a templateId, which this command has no option for.
      if (opts.text === undefined && opts.html === undefined) throw badRequest('--text or --html is required');
      const parsed = sendBodySchema.safeParse(body, plainIssues);
      if (!parsed.success) throw badRequest(`${issuePath(parsed.error.issues[0]!.path)}: ${parsed.error.issues[0]!.message}`);
      sendFields(parsed.data, { subject: parsed.data.subject, html: parsed.data.html ?? null, text: parsed.data.text ?? null }, new Date());
      await withApp(cmd, async (app) => {
        const first = opts.team !== undefined ? undefined : (await app.services.teams.list())[0];
        const teamId = opts.team !== undefined ? await existingTeam(app, opts.team as string) : first?.id;
        if (!teamId) throw new Error(`no team exists yet: create one with ${cliCommand(cmd, 'teams create --name NAME')}`);
        const { emailId } = await app.services.emails.submit({ teamId, domainId: null, apiKeyId: null }, parsed.data).catch(async (err: unknown) => {
          // The operator did not pick the team and the domain is not that team's: say which team
          // was used, since that is what to change (a domain of that team is refused for itself).
          if (first && err instanceof AppError && err.code === 'FORBIDDEN' && !(await app.services.domains.findForCli(first.id, domainOf(parseMailbox(parsed.data.from, 'from').address)))) {
            throw new AppError('FORBIDDEN', `${err.message} (sent as team ${first.id} (${first.name}), the first team: pass --team with the id of the team that has the domain (${cliCommand(cmd, 'domains list')}))`);
          }
          throw err;
        });
        process.stdout.write(`${emailId}\n`);
      });
    });
}
