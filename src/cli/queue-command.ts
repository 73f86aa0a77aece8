import type { Command } from 'commander';
import { MAX_QUEUE_PAGE, parseSelector, QUEUE_STATES, reasonOf, suspensionMinutes, type QueueState } from '../core/queue/queue-service.js';
import { decodeIdCursor } from '../core/id-cursor.js';
import type { ShapingState } from '../core/shaping/shaping-view.js';
import { cliCommand, existingTeam, parseIntOption, printTable, withApp } from './cli-context.js';
import type { App } from '../app.js';

// posthorn queue: the operator API's queue commands on the server itself (same selectors,
// tables for people, --json for scripts). Changes are audited with the actor "cli".

interface SelectorOptions {
  destination?: string;
  team?: string;
  campaign?: string;
  email?: string[];
}

const withSelectors = (cmd: Command, emails: boolean) => {
  cmd.option('--destination <domain>', 'recipient domain').option('--team <id>', 'team id').option('--campaign <id>', 'campaign id');
  if (emails) cmd.option('--email <id...>', 'email ids');
  return cmd;
};

const hasSelector = (opts: SelectorOptions) => opts.destination !== undefined || opts.team !== undefined || opts.campaign !== undefined || opts.email !== undefined;

/**
 * The selectors' checks that need no store, made before it is opened: one at least when
 * `required` (which names the options here; core's message names the API's fields), a --team
 * that is an id, a --destination that is a domain name.
 */
function checkSelector(opts: SelectorOptions, required?: string): void {
  if (required && !hasSelector(opts)) throw new Error(`give at least one of ${required}`);
  if (opts.team !== undefined) parseIntOption(opts.team, '--team');
  // Given empty, a selector names nothing to act on: refused, as the API refuses it.
  if (opts.campaign !== undefined && !opts.campaign.trim()) throw new Error('--campaign: is empty');
  if (opts.email?.some((id) => !id.trim())) throw new Error('--email: an email id is empty');
  if (opts.destination !== undefined) parseSelector({ destination: opts.destination });
}

/**
 * The selectors as the queue service takes them (checkSelector first). A --team must exist: a
 * filter on a typo'd id would answer "0 match", and a suspension of it hold the mail of a team
 * made later with that id.
 */
async function selector(app: App, opts: SelectorOptions) {
  return {
    ...(opts.destination !== undefined ? { destination: opts.destination } : {}),
    ...(opts.team !== undefined ? { teamId: await existingTeam(app, opts.team) } : {}),
    ...(opts.campaign !== undefined ? { campaignId: opts.campaign } : {}),
    ...(opts.email !== undefined ? { emailIds: opts.email } : {}),
  };
}

const WITH_EMAILS = '--destination, --team, --campaign or --email';
const WITHOUT_EMAILS = '--destination, --team or --campaign';

/** Minutes as a plain decimal number ("0x10" or "1e3" are no one's minutes). */
function parseMinutes(value: string): number {
  if (!/^\d+(\.\d+)?$/.test(value)) throw new Error(`--minutes must be a number of minutes, got "${value}"`);
  return Number(value);
}

/** `queue retry`'s id argument; a domain name there is someone retrying a destination, so the option for that is named. */
function retryDeliveryId(value: string): number {
  try {
    return parseIntOption(value, 'deliveryId');
  } catch (err) {
    if (/^[a-z0-9-]+(\.[a-z0-9-]+)+$/i.test(value) && /[a-z]/i.test(value)) throw new Error(`${(err as Error).message}; a destination is --destination ${value}`);
    throw err;
  }
}

/** --json may be given to `queue` or to its subcommand (commander gives it to the parent). */
const print = (cmd: Command, value: unknown, human: () => void) => {
  if ((cmd.optsWithGlobals() as { json?: boolean }).json) process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
  else human();
};

const shortTime = (iso: string | null) => (iso ? iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '');
/** A remote reply's text starts with its code already; Posthorn's own (a DNS failure) may have none. */
const withCode = (code: number | null | undefined, text: string) => (code == null || text.startsWith(String(code)) ? text : `${code} ${text}`);
const reply = (r: { code: number | null; text: string } | null) => (r ? withCode(r.code, r.text).slice(0, 60) : '');

/** Traffic shaping's part of the summary: sources and warm-up, holds from replies, rates in force. */
function printShaping(s: ShapingState, resumeHint: string): void {
  process.stdout.write('\nEgress sources\n');
  printTable(
    s.sources.map((x) => ({
      source: x.name,
      address: x.localAddress ?? 'default',
      ehlo: x.ehloName,
      pools: x.pools.join(', '),
      warmup: x.warmup ? `day ${x.warmup.day}: ${x.warmup.budget === null ? 'done, no cap' : `${x.warmup.budget} a day per rollup`}` : '',
    })),
  );
  const warm = s.sources.flatMap((x) => (x.warmup ? x.warmup.rollups.map((r) => ({ source: x.name, day: x.warmup!.day, rollup: r.rollup, used: r.used, budget: x.warmup!.budget ?? 'no cap', left: r.left ?? '' })) : []));
  if (warm.length) {
    process.stdout.write('\nWarm-up today\n');
    printTable(warm);
  }
  if (s.holds.length) {
    process.stdout.write(`\nHolds from remote replies (${resumeHint} lifts one)\n`);
    printTable(s.holds.map((h) => ({ id: h.id, source: h.source, rollup: h.rollup, kind: h.kind === 'throttle' ? `throttle ${h.messageRate}` : 'suspend', until: shortTime(h.until), reason: h.reason.slice(0, 80) })));
  }
  if (s.rates.length) {
    process.stdout.write('\nMessage rates\n');
    printTable(s.rates.map((r) => ({ source: r.source ?? 'every', rollup: r.rollup, rate: r.messageRate, until: r.until ? shortTime(r.until) : 'configured' })));
  }
}

export function registerQueue(program: Command): void {
  const queue = program.command('queue').description('the delivery queue: summary, messages, suspensions, retry, bounce, traces');

  const summary = async (opts: { json?: boolean }, cmd: Command) => {
    await withApp(cmd, async (app) => {
      const s = await app.services.queue.summary();
      print(cmd, s, () => {
        const t = s.totals;
        const total = t.ready + t.scheduled + t.deferred + t.inFlight + t.suspended;
        process.stdout.write(`Queue: ${total} deliveries (ready ${t.ready}, scheduled ${t.scheduled}, deferred ${t.deferred}, in flight ${t.inFlight}, suspended ${t.suspended})\n`);
        if (s.destinations.length) {
          process.stdout.write('\nBy destination\n');
          printTable(
            s.destinations.map((d) => ({
              destination: d.destination,
              queued: d.queued,
              inFlight: d.inFlight,
              deferred: d.deferred,
              suspended: d.suspended,
              oldestDue: shortTime(d.oldestDue),
              connections: d.openConnections,
              lastReply: reply(d.lastReply),
            })),
          );
        }
        if (s.suspensions.length) {
          process.stdout.write('\nSuspensions\n');
          printTable(s.suspensions.map((x) => ({ id: x.id, destination: x.destination ?? '', team: x.teamId ?? '', campaign: x.campaignId ?? '', until: shortTime(x.until), reason: x.reason })));
        }
        printShaping(s.shaping, cliCommand(cmd, 'queue resume <id>'));
      });
    });
  };
  queue.option('--json', 'print JSON').action(summary);
  queue.command('summary').description('totals by state and one row per destination (the default)').option('--json', 'print JSON').action(summary);

  withSelectors(queue.command('messages').description('the queued deliveries, oldest first'), false)
    .option('--state <state>', `one of ${QUEUE_STATES.join(', ')}`)
    .option('--limit <n>', `how many (at most ${MAX_QUEUE_PAGE})`, '50')
    .option('--cursor <c>', 'the next page (printed after a full page)')
    .option('--json', 'print JSON')
    .action(async (opts: SelectorOptions & { state?: string; limit: string; cursor?: string; json?: boolean }, cmd: Command) => {
      if (opts.state !== undefined && !(QUEUE_STATES as readonly string[]).includes(opts.state)) throw new Error(`--state must be one of ${QUEUE_STATES.join(', ')}`);
      checkSelector(opts);
      const limit = parseIntOption(opts.limit, '--limit', MAX_QUEUE_PAGE);
      if (opts.cursor !== undefined) decodeIdCursor('q', opts.cursor);
      await withApp(cmd, async (app) => {
        const page = await app.services.queue.messages({ ...(await selector(app, opts)), state: opts.state as QueueState | undefined }, limit, opts.cursor);
        print(cmd, page, () => {
          printTable(
            page.messages.map((m) => ({
              delivery: m.deliveryId,
              email: m.emailId,
              team: m.teamId,
              recipient: m.recipient,
              state: m.state,
              attempts: m.attempts,
              nextAttempt: shortTime(m.nextAttemptAt),
              lastReply: reply(m.lastReply),
              ...(page.messages.some((x) => x.heldReason) ? { heldBy: (m.heldReason ?? '').slice(0, 60) } : {}),
            })),
            'No queued deliveries match.',
          );
          if (page.nextCursor) process.stdout.write(`\nmore: --cursor ${page.nextCursor}\n`);
        });
      });
    });

  withSelectors(queue.command('suspend').description('hold matching mail without attempting it'), false)
    .requiredOption('--minutes <n>', 'for how long')
    .requiredOption('--reason <text>', 'why (shown in the queue)')
    .option('--json', 'print JSON')
    .action(async (opts: SelectorOptions & { minutes: string; reason: string; json?: boolean }, cmd: Command) => {
      const minutes = parseMinutes(opts.minutes);
      checkSelector(opts, WITHOUT_EMAILS);
      suspensionMinutes(minutes);
      reasonOf(opts.reason);
      await withApp(cmd, async (app) => {
        const s = await app.services.queue.suspend('cli', { ...(await selector(app, opts)), minutes, reason: opts.reason });
        print(cmd, s, () => process.stdout.write(`suspension ${s.id} holds matching mail until ${s.until} (${s.parked} queued deliveries held now)\n`));
      });
    });

  queue
    .command('resume')
    .description('end a suspension (su_...) or lift a traffic-shaping hold (sh_...) now')
    .argument('<id>')
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { json?: boolean }, cmd: Command) => {
      await withApp(cmd, async (app) => {
        if (id.startsWith('sh_')) {
          const h = await app.services.shaping.endHold('cli', id);
          print(cmd, h, () => process.stdout.write(`hold ${h.id} on ${h.rollup} from ${h.source} lifted; the mail it held is due now\n`));
          return;
        }
        const s = await app.services.queue.resume('cli', id);
        print(cmd, s, () => process.stdout.write(`suspension ${s.id} ended; the mail it held is due now\n`));
      });
    });

  withSelectors(queue.command('retry').description('make matching queued mail due now (or one delivery by id)'), true)
    .argument('[deliveryId]', 'a single delivery')
    .option('--json', 'print JSON')
    .action(async (deliveryId: string | undefined, opts: SelectorOptions & { json?: boolean }, cmd: Command) => {
      // One delivery is retried whatever it belongs to: a selector beside its id would be ignored.
      if (deliveryId !== undefined && hasSelector(opts)) throw new Error(`give a delivery id or ${WITH_EMAILS.replace(' or ', ', ')}, not both`);
      const id = deliveryId !== undefined ? retryDeliveryId(deliveryId) : undefined;
      if (id === undefined) checkSelector(opts, WITH_EMAILS);
      await withApp(cmd, async (app) => {
        if (id !== undefined) {
          const r = await app.services.queue.retryDelivery('cli', id);
          print(cmd, r, () =>
            process.stdout.write(
              r.heldBy
                ? `delivery ${deliveryId} is held by suspension ${r.heldBy.id} (${r.heldBy.reason}) until ${r.heldBy.until}: it is attempted when that ends or is resumed (${cliCommand(cmd, `queue resume ${r.heldBy.id}`)})\n`
                : `delivery ${deliveryId} is due now: the engine attempts it at its next round\n`,
            ),
          );
          return;
        }
        const r = await app.services.queue.retry('cli', await selector(app, opts));
        print(cmd, r, () =>
          process.stdout.write(`${r.retried - r.held} deliveries are due now${r.held ? `; ${r.held} more stay held by a suspension until it ends or is resumed (${cliCommand(cmd, 'queue resume <id>')})` : ''}\n`),
        );
      });
    });

  withSelectors(queue.command('bounce').description('fail matching queued mail with a reason (FAILED events and webhooks)'), true)
    .requiredOption('--reason <text>', 'why')
    .option('--json', 'print JSON')
    .action(async (opts: SelectorOptions & { reason: string; json?: boolean }, cmd: Command) => {
      checkSelector(opts, WITH_EMAILS);
      reasonOf(opts.reason);
      await withApp(cmd, async (app) => {
        const r = await app.services.queue.bounce('cli', { ...(await selector(app, opts)), reason: opts.reason });
        print(cmd, r, () => process.stdout.write(`${r.bounced} deliveries failed: ${opts.reason}\n`));
      });
    });

  queue
    .command('purge')
    .description('give up on one queued delivery now (it is recorded as FAILED)')
    .argument('<deliveryId>')
    .action(async (id: string, _opts, cmd: Command) => {
      const deliveryId = parseIntOption(id, 'deliveryId');
      await withApp(cmd, async (app) => {
        await app.services.queue.giveUp('cli', deliveryId);
        process.stdout.write(`delivery ${id} purged\n`);
      });
    });

  queue
    .command('trace')
    .description("an email's delivery attempts: MX, addresses, TLS and the SMTP transcript")
    .argument('<emailId>')
    .option('--json', 'print JSON')
    .action(async (emailId: string, opts: { json?: boolean }, cmd: Command) => {
      await withApp(cmd, async (app) => {
        const trace = await app.services.queue.trace(emailId);
        print(cmd, trace, () => {
          if (!trace.attempts.length) process.stdout.write(`${trace.emailId}: no SMTP attempt recorded: none made yet, its trace is past outbound.traces.retentionDays, or it went to the sandbox capture mailbox, which makes none\n`);
          for (const a of trace.attempts) {
            const tls = a.tls ? `${a.tls.version ?? 'TLS'} ${a.tls.cipher ?? ''}, certificate ${a.tls.verified ? 'verified' : `not verified${a.tls.error ? ` (${a.tls.error})` : ''}`}` : 'plaintext';
            process.stdout.write(`\n${shortTime(a.startedAt)}  ${a.destination} via ${a.mxHost ?? '?'} [${a.address ?? '?'}] from ${a.source ?? '?'}: ${tls}\n`);
            for (const l of a.transcript) process.stdout.write(`  ${l.at.slice(11, 23)} ${l.direction === 'client' ? 'C:' : l.direction === 'server' ? 'S:' : '  '} ${l.line}\n`);
            for (const r of a.results) process.stdout.write(`  => ${r.recipient}: ${r.outcome} ${withCode(r.code, r.response)}\n`);
          }
        });
      });
    });
}
