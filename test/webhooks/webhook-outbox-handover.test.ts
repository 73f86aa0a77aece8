import test from 'ava';
import type { BusEvent } from '../../src/core/events.js';
import { createWebhookOutbox } from '../../src/core/webhooks/webhook-outbox.js';
import { ManualClock } from '../../src/lib/clock.js';
import { createLogger } from '../../src/lib/logger.js';
import type { OutboxPick, WebhookRow, WebhooksRepository } from '../../src/store/repositories/webhooks-repository.js';

// What the outbox tells the dispatcher after a commit. On PostgreSQL two writes that carry
// events commit independently, in either order; the dispatcher must hear of each write's rows
// after that write's own commit, because it claims from the store on another connection and
// forgets an endpoint when the claim finds nothing there. The store itself is faked here (the
// interleaving of two real transactions can not be forced from outside); the end-to-end paths
// are in transactional-outbox.test.ts and webhook-delivery.test.ts.

const clock = new ManualClock(Date.UTC(2026, 10, 26, 8, 0, 0));
const endpoint = (id: string, types: string[]): WebhookRow => ({
  id,
  team_id: 1,
  url: 'https://hooks.example/x',
  description: null,
  event_types_json: JSON.stringify(types),
  domain_ids_json: null,
  secret: 's',
  status: 'active',
  consecutive_failures: 0,
  disabled_at: null,
  created_at: clock.now().toISOString(),
  updated_at: clock.now().toISOString(),
});
const endpoints = [endpoint('wh_delivered', ['email.delivered']), endpoint('wh_all', [])];

function world(teamEndpoints: WebhookRow[] = endpoints) {
  const written: string[] = [];
  // The store's part: pick runs inside the emitter's transaction with the team's endpoints.
  const webhooks = {
    enqueueInOpenTransaction(_teamId: number, pick: OutboxPick): void {
      const w = pick(teamEndpoints);
      if (w) written.push(...w.webhookIds.map((id) => `${w.event.type}->${id}`));
    },
  } as unknown as WebhooksRepository;
  const handed: string[][] = [];
  const outbox = createWebhookOutbox({
    webhooks,
    resolver: {} as never,
    clock,
    logger: createLogger('silent'),
    allowPrivate: true,
    leaseMs: 60_000,
    disableAfterFailures: 30,
    owner: 'node-1',
    onDue: (due) => handed.push([...due.keys()].sort()),
  });
  return { outbox, written, handed };
}

const event = (type: BusEvent['type']): BusEvent => ({ type, teamId: 1, domainId: 7, occurredAt: clock.now().toISOString(), data: { emailId: 'em_x' } });

test('two writes in flight at once: each commit hands over its own endpoints, the later one too', (t) => {
  const { outbox, handed } = world();
  const a = event('email.delivered');
  const b = event('email.delivered');
  outbox.handleInTransaction(a); // write A
  outbox.handleInTransaction(b); // write B, open at the same time on another connection
  outbox.afterCommit(a); // A commits first; B's rows are not visible yet
  t.deepEqual(handed, [['wh_all', 'wh_delivered']]);
  outbox.afterCommit(b); // B commits: the dispatcher must look again now, not at its next sweep
  t.deepEqual(handed, [['wh_all', 'wh_delivered'], ['wh_all', 'wh_delivered']]);
});

test('the later write committing first hands over only its own endpoints', (t) => {
  const { outbox, handed } = world();
  const queued = event('email.queued');
  const delivered = event('email.delivered');
  outbox.handleInTransaction(delivered);
  outbox.handleInTransaction(queued);
  outbox.afterCommit(queued);
  t.deepEqual(handed, [['wh_all']]);
  outbox.afterCommit(delivered);
  t.deepEqual(handed, [['wh_all'], ['wh_all', 'wh_delivered']]);
});

test('a write redone after a rollback hands over once', (t) => {
  const { outbox, handed, written } = world();
  const redone = event('email.delivered');
  outbox.handleInTransaction(redone); // rolled back with its batch...
  outbox.handleInTransaction(redone); // ...and run again with the same event: only this run committed
  outbox.afterCommit(redone);
  outbox.afterCommit(redone); // the same object seen again has nothing left to hand over
  t.deepEqual(handed, [['wh_all', 'wh_delivered']]);
  t.is(written.length, 4);
});

test('nothing is handed over for an event no endpoint takes, nor for one no write noted', (t) => {
  const { outbox, handed } = world([endpoint('wh_delivered', ['email.delivered'])]);
  const unwanted = event('email.queued');
  outbox.handleInTransaction(unwanted);
  outbox.afterCommit(unwanted);
  outbox.afterCommit(event('email.delivered')); // emitted, but never written in a transaction here
  t.deepEqual(handed, []);
});
