import test, { type ExecutionContext } from 'ava';
import pg from 'pg';
import { ManualClock } from '../../src/lib/clock.js';
import { createCampaignService } from '../../src/core/campaigns/campaign-service.js';
import type { EmailService } from '../../src/core/emails/email-service.js';
import { createCampaignsRepository } from '../../src/store/repositories/campaigns-repository.js';
import { createContactBooksRepository } from '../../src/store/repositories/contact-books-repository.js';
import { createSegmentsRepository } from '../../src/store/repositories/segments-repository.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { createTestDatabase, dropTestDatabase } from '../helpers/pg-databases.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

// A campaign batch that outlives its lease (BATCH_LEASE_MS, 10 minutes: a slow store, a huge
// batch, a node stalled by GC or a stopped VM) is claimed by another node, which sends from the
// stored cursor while the first still holds its chunk. Two nodes on one PostgreSQL database and
// one injected clock: the (campaign, contact) key written with each message is what keeps every
// contact to one message, whichever node stores it first.

const clock = new ManualClock(Date.UTC(2026, 10, 26, 9, 0, 0));
const LEASE_MS = 10 * 60_000;
const WINDOW_MS = 60_000;
let url: string;
let w: MailWorld;
let b: TestApp;
let admin: pg.Client;

test.before(async () => {
  url = await createTestDatabase();
  const shared = { store: { url }, campaigns: { batchWindowSeconds: WINDOW_MS / 1000 } };
  w = await startMailWorld({ clock, overrides: { ...shared, cluster: { nodeName: 'node-a' } } });
  b = await startTestApp({ zone: w.zone, clock, overrides: { ...shared, cluster: { nodeName: 'node-b' }, outbound: w.t0.config.outbound } });
  (b as { key: string }).key = w.t0.key;
  admin = new pg.Client({ connectionString: url });
  await admin.connect();
});
test.after.always(async () => {
  await admin?.end();
  await b?.close();
  await w?.close();
  if (url) await dropTestDatabase(url);
});

async function bookOf(name: string, emails: string[]): Promise<string> {
  const book = (await w.t0.request('POST', '/v1/contactBooks', { body: { name } })).body.id as string;
  const bulk = await w.t0.request('POST', `/v1/contactBooks/${book}/contacts/bulk`, { body: emails.map((email) => ({ email })) });
  if (bulk.status !== 200) throw new Error(JSON.stringify(bulk.body));
  return book;
}

async function campaignOf(book: string, extra: Record<string, unknown>) {
  const c = await w.t0.request('POST', '/v1/campaigns', {
    body: { name: 'Lease', from: `News <news@${w.domain.name}>`, subject: 'Hi', contactBookId: book, html: '<p>x {{unsubscribeUrl}}</p>', ...extra },
  });
  if (c.status !== 200) throw new Error(JSON.stringify(c.body));
  return c.body.id as string;
}

const bothRun = () => Promise.all([w.t0.app.runCampaigns(), b.app.runCampaigns()]);
/** Both nodes idle, and what their last results set off after the commit (the campaign counters) has run. */
const settle = () => Promise.all([w.settle(), b.app.engine.whenIdle().then(() => b.app.services.events.settled())]);
const rcptsOf = (prefix: string) => w.sink.messages.flatMap((m) => m.rcptTo).filter((r) => r.startsWith(prefix));
const campaign = async (id: string) => (await w.t0.request('GET', `/v1/campaigns/${id}`)).body;

async function lockWaiters(): Promise<number> {
  const r = await admin.query<{ n: number }>(`select count(*)::int as n from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and wait_event_type = 'Lock'`);
  return r.rows[0]!.n;
}

/** The campaign's emails whose delivery has no result yet, with what the row says (for a failure's message). */
async function unfinished(id: string): Promise<string[]> {
  const r = await admin.query<{ email_id: string; state: string; attempts: number; next_attempt_at: number; lease_owner: string | null }>(
    `select d.email_id, d.state, d.attempts, d.next_attempt_at, d.lease_owner from deliveries d
     join campaign_recipients cr on cr.email_id = d.email_id where cr.campaign_id = $1 and d.state = 'queued'`,
    [id],
  );
  return r.rows.map((d) => `${d.email_id} ${d.state} after ${d.attempts}, due ${d.next_attempt_at - clock.nowMs()} ms from now, lease ${d.lease_owner}`);
}

async function finish(id: string): Promise<void> {
  for (let i = 0; i < 10 && (await campaign(id)).status !== 'SENT'; i++) {
    clock.advance(WINDOW_MS);
    await bothRun();
  }
  await settle();
  // A node's engine may have gone idle before the other node's last batch was committed (its
  // wake-up is that node's only): both are woken until every email of the campaign has a result.
  for (let i = 0; i < 5 && (await unfinished(id)).length; i++) {
    w.t0.app.engine.wake();
    b.app.engine.wake();
    await settle();
  }
}

/** Runs the campaign to its end, then checks every `prefix` contact was mailed exactly once and the counters agree. */
async function finishedOnce(t: ExecutionContext, id: string, prefix: string, n: number): Promise<void> {
  await finish(id);
  const rcpts = rcptsOf(prefix);
  t.is(rcpts.length, n, JSON.stringify(rcpts));
  t.is(new Set(rcpts).size, n, 'nobody twice');
  const done = await campaign(id);
  t.is(done.status, 'SENT');
  t.is(done.total, n);
  t.is(done.sent, n);
}

test.serial('two nodes storing the same chunk at once (the lease ran out under a slow store) mail each contact once', async (t) => {
  const emails = Array.from({ length: 5 }, (_, i) => `slow${i}@example.org`);
  const book = await bookOf('Slow store', emails);
  const id = await campaignOf(book, { batchSize: 10, sendNow: true });
  // Another transaction holds the first contact's (campaign, contact) key: the node that claims
  // the batch waits on it in the middle of storing its chunk.
  const first = await admin.query<{ id: string }>('select id from contacts where contact_book_id = $1 order by id limit 1', [book]);
  await admin.query('begin');
  await admin.query("insert into campaign_recipients (campaign_id, contact_id, email_id) values ($1, $2, 'em_held')", [id, first.rows[0]!.id]);
  const firstClaim = bothRun();
  while ((await lockWaiters()) < 1);
  const before = await lockWaiters();
  // Past its lease: the other node claims the same batch from the same cursor and reaches the same rows.
  clock.advance(LEASE_MS + 1000);
  const secondClaim = bothRun();
  while ((await lockWaiters()) <= before);
  await admin.query('rollback');
  await Promise.all([firstClaim, secondClaim]);
  await finishedOnce(t, id, 'slow', 5);
});

test.serial('a node stalled mid-batch past its lease wakes after another node sent that batch: it mails nobody again and sends no extra batch', async (t) => {
  const emails = Array.from({ length: 6 }, (_, i) => `stall${i}@example.org`);
  const book = await bookOf('Stalled node', emails);
  // Due an hour from now for the shared clock; the stalled runner's own clock is there already,
  // so it claims the first batch before the nodes' runners can.
  const id = await campaignOf(book, { batchSize: 3, scheduledAt: new Date(clock.nowMs() + 3600_000).toISOString() });
  const stalledClock = new ManualClock(clock.nowMs() + 3600_000);
  const app = w.t0.app;
  const real = app.services.emails;
  let wake!: () => void;
  const woken = new Promise<void>((resolve) => (wake = resolve));
  let stalled!: () => void;
  const inChunk = new Promise<void>((resolve) => (stalled = resolve));
  // node-a's runner frozen between reading its chunk and storing it (a GC pause, a stopped VM).
  const frozen = createCampaignService({
    campaigns: createCampaignsRepository(app.store.db),
    contactBooks: createContactBooksRepository(app.store.db),
    segments: createSegmentsRepository(app.store.db),
    contacts: app.services.contacts,
    emails: {
      ...real,
      submitEach: async (ctx, items) => {
        stalled();
        await woken;
        return real.submitEach(ctx, items);
      },
    } as EmailService,
    domains: app.services.domains,
    events: app.services.events,
    clock: stalledClock,
    logger: app.logger,
    secret: app.secret,
    publicUrl: app.config.publicUrl,
    hostname: app.config.hostname,
    batchWindowMs: WINDOW_MS,
    owner: 'node-a',
  });
  const frozenTick = frozen.tick();
  await inChunk;
  t.is((await campaign(id)).status, 'RUNNING');
  // Its lease runs out; the nodes send that batch from the stored cursor.
  clock.advance(3600_000 + LEASE_MS + 1000);
  await bothRun();
  await settle();
  t.is(rcptsOf('stall').length, 3);
  // The frozen runner wakes (to the time the others live in) and stores its chunk: every one of
  // them was reached meanwhile.
  stalledClock.set(clock.nowMs());
  wake();
  t.is(await frozenTick, 1);
  await settle();
  t.is(rcptsOf('stall').length, 3, 'nobody again, and no batch on top of the window');
  await finishedOnce(t, id, 'stall', 6);
});

test.serial('a batch that outlives the lease while it progresses keeps it: no second node sends alongside', async (t) => {
  // The two nodes deliver its 1001 messages before the next test: about 20 s on an idle host,
  // near a minute on a slow, loaded one (over ava's 60 s).
  t.timeout(240_000);
  // Two chunks (the runner stores at most 1000 messages at a time), six minutes each.
  const emails = Array.from({ length: 1001 }, (_, i) => `long${i}@example.org`);
  const book = await bookOf('Long batch', emails.slice(0, 1000));
  t.is((await w.t0.request('POST', `/v1/contactBooks/${book}/contacts/bulk`, { body: [{ email: emails[1000] }] })).status, 200);
  const id = await campaignOf(book, { batchSize: 1001, scheduledAt: new Date(clock.nowMs() + 3600_000).toISOString() });
  // Its own clock is at the campaign's time already, so this runner claims the batch first.
  const slowClock = new ManualClock(clock.nowMs() + 3600_000);
  const app = w.t0.app;
  const real = app.services.emails;
  let chunk = 0;
  let othersRan: number[] = [];
  let secondChunk: Awaited<ReturnType<EmailService['submitEach']>> = [];
  const slow = createCampaignService({
    campaigns: createCampaignsRepository(app.store.db),
    contactBooks: createContactBooksRepository(app.store.db),
    segments: createSegmentsRepository(app.store.db),
    contacts: app.services.contacts,
    emails: {
      ...real,
      submitEach: async (ctx, items) => {
        chunk++;
        // A slow store: each chunk takes six minutes, for this runner and the nodes alike.
        slowClock.advance(6 * 60_000);
        clock.set(slowClock.nowMs());
        // Twelve minutes into the batch, past the lease it claimed: the nodes look for due work.
        if (chunk === 2) othersRan = await bothRun();
        const results = await real.submitEach(ctx, items);
        if (chunk === 2) secondChunk = results;
        return results;
      },
    } as EmailService,
    domains: app.services.domains,
    events: app.services.events,
    clock: slowClock,
    logger: app.logger,
    secret: app.secret,
    publicUrl: app.config.publicUrl,
    hostname: app.config.hostname,
    batchWindowMs: WINDOW_MS,
    owner: 'node-a',
  });
  t.is(await slow.tick(), 1);
  t.is(chunk, 2);
  t.deepEqual(othersRan, [0, 0], 'no node claimed the batch still in progress');
  t.is(secondChunk.length, 1);
  t.true(secondChunk.every((r) => 'emailId' in r), `the rest of its batch was sent by another node meanwhile: ${JSON.stringify(secondChunk)}`);
  await finish(id);
  const done = await campaign(id);
  t.is(done.status, 'SENT');
  t.is(done.total, 1001);
  const stored = await app.store.db.selectFrom('emails').select((eb) => eb.fn.countAll<number>().as('n')).where('campaign_id', '=', id).executeTakeFirstOrThrow();
  t.is(Number(stored.n), 1001, 'one message per contact');
});

test.serial('the campaign counts a dead node never made are made when the live nodes find it dead, once, without a restart', async (t) => {
  const book = await bookOf('Dead counter', ['dc1@example.org', 'dc2@example.org', 'dc3@example.org']);
  const id = await campaignOf(book, { sendNow: true });
  await finish(id);
  t.like(await campaign(id), { status: 'SENT', total: 3, sent: 3, delivered: 3 }, (await unfinished(id)).join('; '));
  const db = w.t0.app.store.db;
  // node-x is a live member: both nodes' sweeps have seen it.
  await db.insertInto('cluster_nodes').values({ id: 'node-x', hostname: 'elsewhere', pid: 3, started_at: clock.now().toISOString(), heartbeat_at: Date.now(), listeners_json: '{}' }).execute();
  await Promise.all([w.t0.app.cluster!.sweepNow(), b.app.cluster!.sweepNow()]);
  // It committed the DELIVERED events of two recipients, then was SIGKILLed before the counting
  // that follows them (one had not counted SENT yet either), and is silent since.
  const rows = await admin.query<{ email_id: string }>('select email_id from campaign_recipients where campaign_id = $1 order by rowid', [id]);
  const [first, second] = rows.rows.map((r) => r.email_id);
  await admin.query("update campaign_recipients set counted = 'sent' where email_id = $1", [first]);
  await admin.query("update campaign_recipients set counted = '' where email_id = $1", [second]);
  await admin.query('update campaigns set sent = 2, delivered = 1 where id = $1', [id]);
  await db.updateTable('cluster_nodes').set({ heartbeat_at: Date.now() - 3600_000 }).where('id', '=', 'node-x').execute();
  // The live nodes' next heartbeats find it dead; neither restarts.
  await Promise.all([w.t0.app.cluster!.sweepNow(), b.app.cluster!.sweepNow()]);
  await Promise.all([w.t0.app.campaignRecount(), b.app.campaignRecount()]);
  t.like(await campaign(id), { sent: 3, delivered: 3, opened: 0, bounced: 0 }, 'recounted from the stored events');
  const recounts = await admin.query<{ node: string }>("select node from job_runs where period like 'node-x@%'");
  t.is(recounts.rows.length, 1, 'one node recounts for the cluster');
  await Promise.all([w.t0.app.cluster!.sweepNow(), b.app.cluster!.sweepNow()]);
  await Promise.all([w.t0.app.campaignRecount(), b.app.campaignRecount()]);
  t.like(await campaign(id), { sent: 3, delivered: 3 }, 'later sweeps count nothing twice');
});
