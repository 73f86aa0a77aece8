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
  // Through Kysely in chunks, so the same seeding runs on SQLite and PostgreSQL.
  await app.store.db.transaction().execute(async (trx) => {
    const rows = Array.from({ length: CONTACTS }, (_, i) => ({
      id: `ct_bench${String(i).padStart(7, '0')}`,
      team_id: teamId,
      contact_book_id: book.id,
      email: `reader${i}@rcpt${i % 50}.bench.test`,
      first_name: `Reader${i}`,
      last_name: 'Bench',
      subscribed: 1,
      unsubscribe_reason: null,
      properties_json: JSON.stringify({ company: `Company ${i % 100}` }),
      created_at: now,
      updated_at: now,
    }));
    for (let i = 0; i < rows.length; i += 500) await trx.insertInto('contacts').values(rows.slice(i, i + 500)).execute();
  });
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
