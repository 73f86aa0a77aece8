import type { Command } from 'commander';
import { parseIntOption, printTable, withApp } from './cli-context.js';
import { sendBodySchema } from '../core/emails/send-schema.js';
import { badRequest } from '../core/errors.js';

export function registerSend(program: Command): void {
  program
    .command('send')
    .description('queue an email through the same path as the API (the running server delivers it)')
    .requiredOption('--from <address>', 'sender, on a verified domain ("Name <a@b>" works)')
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
      await withApp(cmd, async (app) => {
        const teamId = opts.team ? parseIntOption(opts.team as string, '--team') : (await app.services.teams.list())[0]?.id;
        if (!teamId) throw new Error('no team exists yet: create one with posthorn teams create');
        const parsed = sendBodySchema.safeParse({
          from: opts.from,
          to: opts.to,
          subject: opts.subject,
          text: opts.text,
          html: opts.html,
          cc: opts.cc,
          bcc: opts.bcc,
          scheduledAt: opts.scheduledAt,
          tags: opts.tag,
        });
        if (!parsed.success) throw badRequest(`${parsed.error.issues[0]!.path.join('.')}: ${parsed.error.issues[0]!.message}`);
        const { emailId } = await app.services.emails.submit({ teamId, domainId: null, apiKeyId: null }, parsed.data);
        process.stdout.write(`${emailId}\n`);
      });
    });
}

export function registerQueue(program: Command): void {
  const queue = program
    .command('queue')
    .description('inspect the delivery queue: counts by state and the next due deliveries')
    .option('--limit <n>', 'how many queued deliveries to list', '20')
    .action(async (opts: { limit: string }, cmd: Command) => {
      await withApp(cmd, async (app) => {
        printTable((await app.services.deliveries.countsByState()).map((r) => ({ state: r.state, count: r.count })));
        process.stdout.write('\n');
        const rows = await app.services.deliveries.listQueued(parseIntOption(opts.limit, '--limit'));
        printTable(
          rows.map((d) => ({
            id: d.id,
            email: d.email_id,
            recipient: d.recipient,
            attempts: d.attempts,
            nextAttempt: new Date(d.next_attempt_at).toISOString(),
            lastReply: (d.last_response ?? '').slice(0, 60),
          })),
        );
      });
    });
  queue
    .command('retry')
    .description('attempt a queued delivery now')
    .argument('<deliveryId>')
    .action(async (id: string, _opts, cmd: Command) => {
      await withApp(cmd, async (app) => {
        if (!(await app.services.deliveries.retryNow(parseIntOption(id, 'deliveryId')))) {
          throw new Error(`delivery ${id} is not queued`);
        }
        process.stdout.write(`delivery ${id} will be attempted at the next engine round\n`);
      });
    });
  queue
    .command('purge')
    .description('give up on a queued delivery now (it is recorded as FAILED)')
    .argument('<deliveryId>')
    .action(async (id: string, _opts, cmd: Command) => {
      await withApp(cmd, async (app) => {
        await app.services.deliveries.purge(parseIntOption(id, 'deliveryId'));
        process.stdout.write(`delivery ${id} purged\n`);
      });
    });
}
