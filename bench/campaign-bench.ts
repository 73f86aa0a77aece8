// Campaign fan-out: a 100,000-contact campaign with a large batchSize, timed from the start
// of its first batch until every contact's email is queued (the engine is paused so delivery
// does not compete for the CPU). Reports contacts queued per second.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createApp } from '../src/app.js';
import { loadConfig } from '../src/config/load.js';
import { createDnsClient } from '../src/lib/dns/dns-client.js';
import { startDnsZone } from '../test/helpers/dns-zone.js';

export interface CampaignBenchResult {
  contacts: number;
  seconds: number;
  contactsQueuedPerSecond: number;
  emailsQueued: number;
}

const CONTACTS = Number(process.env.BENCH_CAMPAIGN_CONTACTS ?? 100_000);

export async function runCampaignBench(): Promise<CampaignBenchResult> {
  const dataDir = mkdtempSync(join(tmpdir(), 'posthorn-bench-campaign-'));
  const zone = await startDnsZone();
  const config = loadConfig({
    env: {},
    overrides: {
      dataDir,
      hostname: 'mx.posthorn.bench',
      log: { level: 'warn' },
      http: { host: '127.0.0.1', port: 0 },
      inbound: { host: '127.0.0.1', port: 0 },
      submission: { host: '127.0.0.1', port: 0 },
      dns: { servers: [zone.server] },
      campaigns: { batchWindowSeconds: 0 },
    },
  });
  const app = await createApp({ config, resolver: createDnsClient({ servers: [zone.server], timeoutMs: 1000, tries: 1 }) });
  await app.start();
  await app.engine.stop();
  const teamId = (await app.services.teams.list())[0]?.id ?? (await app.services.teams.create('Bench'));
  const scope = { teamId, domainId: null };
  const domain = await app.services.domains.create(scope, { name: 'bench-news.com', region: 'local' });
  for (const r of domain.dnsRecords) zone.set(r.name, r.type as 'TXT', [r.type === 'MX' ? { exchange: r.value, priority: 10 } : r.value]);
  await app.services.domains.verify(scope, domain.id);
  const book = await app.services.contactBooks.create(scope, { name: 'Everyone', variables: ['company'] } as never);
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
  const campaign = await app.services.campaigns.create(scope, {
    name: 'Bench',
    from: 'News <news@bench-news.com>',
    subject: 'Hello {{firstName}}',
    contactBookId: book.id,
    content,
    sendNow: true,
    batchSize: CONTACTS,
  });
  const started = performance.now();
  await app.services.campaigns.tick(); // the whole campaign is one batch
  const seconds = (performance.now() - started) / 1000;
  const queued = Number(
    (await app.store.db.selectFrom('emails').select((eb) => eb.fn.countAll<number>().as('n')).where('campaign_id', '=', campaign.id).executeTakeFirstOrThrow()).n,
  );
  await app.stop();
  await zone.close();
  rmSync(dataDir, { recursive: true, force: true });
  return { contacts: CONTACTS, seconds: Math.round(seconds * 10) / 10, contactsQueuedPerSecond: Math.round(queued / seconds), emailsQueued: queued };
}
