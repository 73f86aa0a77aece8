// Campaign fan-out: a 100,000-contact campaign with a large batchSize, timed from its creation
// until every contact's email is queued (the engine is paused so delivery
// does not compete for the CPU). Reports contacts queued per second.
import { startBenchApp } from './bench-app.js';

export interface CampaignBenchResult {
  contacts: number;
  seconds: number;
  contactsQueuedPerSecond: number;
  emailsQueued: number;
  /** One bulk add of 1000 contacts (the API's maximum), in milliseconds. */
  bulkAdd1000Ms: number;
  /** Peak resident memory of the process when run on its own (scenario-process.ts), in MB. */
  peakRssMb?: number;
}

const CONTACTS = Number(process.env.BENCH_CAMPAIGN_CONTACTS ?? 100_000);

export async function runCampaignBench(): Promise<CampaignBenchResult> {
  // The engine stays paused: this measures queueing, not delivery.
  const bench = await startBenchApp('bench-news.com', { campaigns: { batchWindowSeconds: 0 } });
  const { app, teamId } = bench;
  const scope = { teamId, domainId: null };
  const book = await app.services.contactBooks.create(scope, { name: 'Everyone', variables: ['company'] } as never);
  // Bulk add through the service the API uses: 1000 contacts in one request (issue: "well under a second").
  const warm = await app.services.contactBooks.create(scope, { name: 'Bulk', variables: [] } as never);
  await app.services.contacts.bulkAdd(scope, warm.id, Array.from({ length: 50 }, (_, i) => ({ email: `warm${i}@bulk.bench.test` })));
  const bulkStarted = performance.now();
  await app.services.contacts.bulkAdd(scope, warm.id, Array.from({ length: 1000 }, (_, i) => ({ email: `bulk${i}@bulk.bench.test`, firstName: `F${i}`, properties: { n: String(i) } })));
  const bulkAddMs = Math.round(performance.now() - bulkStarted);
  // Seed contacts directly (setup, not measured): the bulk API takes 1000 per request.
  const now = new Date().toISOString();
  const insert = app.store.sqlite.prepare(
    `insert into contacts (id, team_id, contact_book_id, email, first_name, last_name, subscribed, properties_json, created_at, updated_at)
     values (?, ?, ?, ?, ?, ?, 1, ?, ?, ?)`,
  );
  app.store.sqlite.transaction(() => {
    for (let i = 0; i < CONTACTS; i++) {
      insert.run(`ct_bench${String(i).padStart(7, '0')}`, teamId, book.id, `reader${i}@rcpt${i % 50}.bench.test`, `Reader${i}`, 'Bench', JSON.stringify({ company: `Company ${i % 100}` }), now, now);
    }
  })();
  const content = JSON.stringify({
    type: 'doc',
    content: [
      { type: 'heading', attrs: { level: 1 }, content: [{ type: 'text', text: 'News for {{firstName}}' }] },
      { type: 'paragraph', content: [{ type: 'text', text: 'Hello {{firstName}} from {{company,fallback=your company}}. '.repeat(10) }] },
      { type: 'button', attrs: { text: 'Read more', url: 'https://bench-news.com/read' } },
    ],
  });
  // Timed from the create: the app's campaign runner ticks every second and may start the batch
  // before the bench's own tick, which then waits for it (runCampaigns queues behind a running tick).
  const started = performance.now();
  const campaign = await app.services.campaigns.create(scope, {
    name: 'Bench',
    from: 'News <news@bench-news.com>',
    subject: 'Hello {{firstName}}',
    contactBookId: book.id,
    content,
    sendNow: true,
    batchSize: CONTACTS,
  });
  const countQueued = async () =>
    Number((await app.store.db.selectFrom('emails').select((eb) => eb.fn.countAll<number>().as('n')).where('campaign_id', '=', campaign.id).executeTakeFirstOrThrow()).n);
  let queued = 0;
  // The whole campaign is one batch: one tick queues it; a second covers a tick that began just before the create.
  for (let ticks = 0; ticks < 3 && queued < CONTACTS; ticks++) {
    await app.runCampaigns();
    queued = await countQueued();
  }
  const seconds = (performance.now() - started) / 1000;
  await bench.close();
  return { contacts: CONTACTS, seconds: Math.round(seconds * 10) / 10, contactsQueuedPerSecond: Math.round(queued / seconds), emailsQueued: queued, bulkAdd1000Ms: bulkAddMs };
}
