import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { campaignFixtures } from '../helpers/campaign-fixtures.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { createCampaignService, MAX_BATCH_FAILURES } from '../../src/core/campaigns/campaign-service.js';
import { createCampaignsRepository } from '../../src/store/repositories/campaigns-repository.js';
import { createContactBooksRepository } from '../../src/store/repositories/contact-books-repository.js';
import { createSegmentsRepository } from '../../src/store/repositories/segments-repository.js';
import type { EmailService } from '../../src/core/emails/email-service.js';

// The campaign runner under failures and races: refused and unstored sends, pause and resume,
// segments edited while a campaign runs.

const clock = new ManualClock(Date.UTC(2026, 10, 22, 10, 0, 0));
const WINDOW_MS = 60_000;
let w: MailWorld;
test.before(async () => {
  w = await startMailWorld({ clock, overrides: { campaigns: { batchWindowSeconds: WINDOW_MS / 1000 } } });
});
test.after.always(async () => {
  await w?.close();
});

const { book, campaign, get, run } = campaignFixtures(() => w, () => ({ name: 'Runner', from: `News <news@${w.domain.name}>`, subject: 'Hello', html: '<p>Hi {{unsubscribeUrl}}</p>' }));
const sentTo = (prefix: string) => w.sink.messages.flatMap((m) => m.rcptTo).filter((r) => r.startsWith(prefix));
const idsInOrder = async (bookId: string) =>
  (await w.t0.app.store.db.selectFrom('contacts').select(['id', 'email']).where('contact_book_id', '=', bookId).orderBy('id').execute());

/**
 * The app runs its own campaign runner, a real-time tick every second on the test clock: a
 * campaign due at once could be started by it before a test's second runner gets it. So a
 * campaign a second runner must start is due a minute ahead (`aheadOfTheApp`), the runner's
 * clock is two minutes ahead (`RACING_AHEAD_MS`), and the test clock catches up after its tick.
 */
const RACING_AHEAD_MS = 120_000;
const aheadOfTheApp = () => ({ scheduledAt: new Date(clock.nowMs() + 60_000).toISOString() });

/**
 * A second runner over the app's store whose email service is `emails` (to inject failures), its
 * clock RACING_AHEAD_MS ahead; it starts only campaign `only` (others' batches are due on its clock too).
 */
function runnerWith(emails: EmailService, owner: string, only: string) {
  const app = w.t0.app;
  const repo = createCampaignsRepository(app.store.db);
  return createCampaignService({
    campaigns: { ...repo, due: async (nowIso, nowMs) => (await repo.due(nowIso, nowMs)).filter((c) => c.id === only) },
    contactBooks: createContactBooksRepository(app.store.db),
    segments: createSegmentsRepository(app.store.db),
    contacts: app.services.contacts,
    emails,
    domains: app.services.domains,
    events: app.services.events,
    clock: new ManualClock(clock.nowMs() + RACING_AHEAD_MS),
    logger: app.logger,
    secret: app.secret,
    publicUrl: app.config.publicUrl,
    hostname: app.config.hostname,
    batchWindowMs: WINDOW_MS,
    owner,
  });
}

test.serial('a domain gone while its campaign runs pauses it, also right after a restart (reached contacts in the chunk); added again and resumed, the rest get it once', async (t) => {
  const domain = await addVerifiedDomain(w.t0, 'lapse.dev');
  const bookId = await book('Lapse', Array.from({ length: 6 }, (_, i) => ({ email: `lapse${i}@example.net` })));
  const c = await campaign(bookId, { from: `News <news@${domain.name}>`, sendNow: true, batchSize: 4 });
  await run();
  t.is(sentTo('lapse').length, 4);
  // Killed mid-batch: the cursor stored is the one after the first two, the next two were reached too.
  const contacts = await idsInOrder(bookId);
  await w.t0.app.store.db.updateTable('campaigns').set({ cursor: contacts[1]!.id }).where('id', '=', c.id).execute();
  // Meanwhile the domain was deleted (a lapsed verification refuses the same way).
  t.is((await w.t0.request('DELETE', `/v1/domains/${domain.id}`)).status, 200);
  clock.advance(WINDOW_MS);
  await run();
  const paused = await get(c.id);
  t.is(paused.status, 'PAUSED', 'every send of the chunk is refused (the domain is checked before the (campaign, contact) key): the campaign pauses');
  t.is(sentTo('lapse').length, 4);
  // Added and verified again, then resumed: the two refused get it, nobody twice.
  await addVerifiedDomain(w.t0, 'lapse.dev');
  t.is((await w.t0.request('POST', `/v1/campaigns/${c.id}/resume`)).status, 200);
  for (let i = 0; i < 3; i++) {
    clock.advance(WINDOW_MS);
    await run();
  }
  t.is((await get(c.id)).status, 'SENT');
  const rcpts = sentTo('lapse');
  t.is(new Set(rcpts).size, 6, JSON.stringify(rcpts));
  t.is(rcpts.length, 6, 'nobody twice');
});


test.serial('a chunk the store could not take at all (the database out of reach) is tried again at the next batch, not paused', async (t) => {
  const bookId = await book('Unstored', Array.from({ length: 3 }, (_, i) => ({ email: `unstored${i}@example.net` })));
  const c = await campaign(bookId, { ...aheadOfTheApp(), batchSize: 10 });
  const real = w.t0.app.services.emails;
  const down = new Error('Connection terminated unexpectedly');
  const failing = runnerWith({ ...real, submitEach: async (_ctx, items) => items.map(() => ({ error: down })) } as EmailService, 'failing-runner', c.id);
  t.is(await failing.tick(), 1);
  clock.advance(RACING_AHEAD_MS);
  t.is((await get(c.id)).status, 'RUNNING', 'an outage is not a refusal: the campaign carries on');
  clock.advance(WINDOW_MS);
  await run();
  t.is(sentTo('unstored').length, 3);
  await run();
  t.is((await get(c.id)).status, 'SENT');
});

test.serial('pause and resume keep the pacing: the batch after a resume waits for the window of the last one', async (t) => {
  const bookId = await book('Resume pace', Array.from({ length: 9 }, (_, i) => ({ email: `rpace${i}@example.net` })));
  const c = await campaign(bookId, { sendNow: true, batchSize: 3 });
  await run();
  t.is(sentTo('rpace').length, 3);
  t.is((await w.t0.request('POST', `/v1/campaigns/${c.id}/pause`)).status, 200);
  t.is((await w.t0.request('POST', `/v1/campaigns/${c.id}/resume`)).status, 200);
  await run();
  t.is(sentTo('rpace').length, 3, 'still the same window: batchSize messages per window');
  clock.advance(WINDOW_MS);
  await run();
  t.is(sentTo('rpace').length, 6);
  // Paused for longer than a window: the next batch goes at once after the resume.
  t.is((await w.t0.request('POST', `/v1/campaigns/${c.id}/pause`)).status, 200);
  clock.advance(5 * WINDOW_MS);
  t.is((await w.t0.request('POST', `/v1/campaigns/${c.id}/resume`)).status, 200);
  await run();
  t.is(sentTo('rpace').length, 9);
});

test.serial('a pause that lands while a batch is being sent keeps the pacing too: a quick resume waits for the window', async (t) => {
  const bookId = await book('Pause mid-batch', Array.from({ length: 6 }, (_, i) => ({ email: `midpause${i}@example.net` })));
  const c = await campaign(bookId, { ...aheadOfTheApp(), batchSize: 3 });
  const real = w.t0.app.services.emails;
  // The pause request arrives while the batch's messages are being stored.
  const pausing = runnerWith({ ...real, submitEach: async (ctx, items) => {
    t.is((await w.t0.request('POST', `/v1/campaigns/${c.id}/pause`)).status, 200);
    return real.submitEach(ctx, items);
  } } as EmailService, 'pausing-runner', c.id);
  t.is(await pausing.tick(), 1);
  clock.advance(RACING_AHEAD_MS);
  await w.settle();
  t.is(sentTo('midpause').length, 3);
  t.is((await get(c.id)).status, 'PAUSED');
  t.is((await w.t0.request('POST', `/v1/campaigns/${c.id}/resume`)).status, 200);
  await run();
  t.is(sentTo('midpause').length, 3, 'still the window of the batch the pause landed in');
  clock.advance(WINDOW_MS);
  await run();
  t.is(sentTo('midpause').length, 6);
});

test.serial('a delete that lands while a batch is being sent stops the campaign after the chunk in flight', async (t) => {
  const bookId = await book('Delete mid-batch', Array.from({ length: 6 }, (_, i) => ({ email: `middel${i}@example.net` })));
  const c = await campaign(bookId, { ...aheadOfTheApp(), batchSize: 3 });
  const real = w.t0.app.services.emails;
  const deleting = runnerWith({ ...real, submitEach: async (ctx, items) => {
    t.is((await w.t0.request('DELETE', `/v1/campaigns/${c.id}`)).status, 200);
    return real.submitEach(ctx, items);
  } } as EmailService, 'deleting-runner', c.id);
  t.is(await deleting.tick(), 1);
  clock.advance(RACING_AHEAD_MS);
  for (let i = 0; i < 3; i++) {
    clock.advance(WINDOW_MS);
    await run();
  }
  t.is(sentTo('middel').length, 3, 'the chunk already handed over is sent; nothing after it');
  t.is((await w.t0.request('GET', `/v1/campaigns/${c.id}`)).status, 404);
});

test.serial('contacts unsubscribed, suppressed or deleted after the start are not mailed', async (t) => {
  const bookId = await book('Mid-run changes', Array.from({ length: 8 }, (_, i) => ({ email: `midrun${i}@example.net` })));
  const c = await campaign(bookId, { sendNow: true, batchSize: 2 });
  await run();
  const reached = new Set(sentTo('midrun'));
  const rest = (await idsInOrder(bookId)).filter((x) => !reached.has(x.email));
  const [unsub, supp, del] = rest;
  t.is((await w.t0.request('PATCH', `/v1/contactBooks/${bookId}/contacts/${unsub!.id}`, { body: { subscribed: false } })).status, 200);
  t.is((await w.t0.request('POST', '/v1/suppressions', { body: { email: supp!.email, reason: 'MANUAL' } })).status, 200);
  t.is((await w.t0.request('DELETE', `/v1/contactBooks/${bookId}/contacts/${del!.id}`)).status, 200);
  for (let i = 0; i < 4; i++) {
    clock.advance(WINDOW_MS);
    await run();
  }
  const rcpts = sentTo('midrun');
  t.deepEqual(rcpts.filter((r) => [unsub, supp, del].some((x) => x!.email === r)), []);
  t.is(rcpts.length, 5);
  t.is(new Set(rcpts).size, 5);
  t.is((await get(c.id)).status, 'SENT');
});

test.serial('a contact who unsubscribes, is suppressed or is deleted after the chunk was read and before it is written is not mailed nor counted', async (t) => {
  const bookId = await book('Read then write', Array.from({ length: 4 }, (_, i) => ({ email: `rtw${i}@example.net` })));
  const c = await campaign(bookId, { ...aheadOfTheApp(), batchSize: 10 });
  const [kept, unsub, supp, del] = await idsInOrder(bookId);
  const real = w.t0.app.services.emails;
  // Between the audience read (this chunk's contacts are in `items`) and the write of their emails.
  const leaving = runnerWith({ ...real, submitEach: async (ctx, items) => {
    t.is(items.length, 4, 'all four were read as still subscribed');
    t.is((await w.t0.request('PATCH', `/v1/contactBooks/${bookId}/contacts/${unsub!.id}`, { body: { subscribed: false } })).status, 200);
    t.is((await w.t0.request('POST', '/v1/suppressions', { body: { email: supp!.email, reason: 'MANUAL' } })).status, 200);
    t.is((await w.t0.request('DELETE', `/v1/contactBooks/${bookId}/contacts/${del!.id}`)).status, 200);
    return real.submitEach(ctx, items);
  } } as EmailService, 'leaving-runner', c.id);
  t.is(await leaving.tick(), 1);
  clock.advance(RACING_AHEAD_MS);
  await w.settle();
  t.deepEqual(sentTo('rtw'), [kept!.email]);
  const stored = await w.t0.app.store.db.selectFrom('emails').select('contact_id').where('campaign_id', '=', c.id).execute();
  t.deepEqual(stored.map((e) => e.contact_id), [kept!.id], 'no email is stored for those who left, not even a suppressed one');
  const done = await get(c.id);
  t.is(done.status, 'SENT', 'those who left are skipped, not failures: the campaign neither pauses nor stalls');
  t.is(done.total, 4, 'the audience counted at the start');
  t.is(done.sent, 1);
});

test.serial('a chunk whose every contact left after it was read ends the campaign, not pauses it', async (t) => {
  const bookId = await book('All left', [{ email: 'allleft0@example.net' }]);
  const c = await campaign(bookId, { ...aheadOfTheApp(), batchSize: 10 });
  const [only] = await idsInOrder(bookId);
  const real = w.t0.app.services.emails;
  const leaving = runnerWith({ ...real, submitEach: async (ctx, items) => {
    t.is((await w.t0.request('PATCH', `/v1/contactBooks/${bookId}/contacts/${only!.id}`, { body: { subscribed: false } })).status, 200);
    return real.submitEach(ctx, items);
  } } as EmailService, 'all-left-runner', c.id);
  t.is(await leaving.tick(), 1);
  clock.advance(RACING_AHEAD_MS);
  await w.settle();
  t.deepEqual(sentTo('allleft'), []);
  const done = await get(c.id);
  t.is(done.status, 'SENT');
  t.is(done.sent, 0);
});

test.serial("a segment edited while its campaign runs does not change the campaign's audience", async (t) => {
  const contacts = Array.from({ length: 20 }, (_, i) => ({ email: `segrun${i}@example.net`, properties: { plan: i < 4 ? 'pro' : 'free' } }));
  const bookId = await book('Segment run', contacts);
  const seg = await w.t0.request('POST', '/v1/segments', { body: { name: 'Pro', contactBookId: bookId, filters: { match: 'all', conditions: [{ field: 'properties.plan', op: 'eq', value: 'pro' }] } } });
  t.is(seg.status, 200, JSON.stringify(seg.body));
  const c = await campaign(bookId, { segmentId: seg.body.id, sendNow: true, batchSize: 2 });
  await run();
  t.is(sentTo('segrun').length, 2);
  t.is((await get(c.id)).total, 4);
  // Everyone matches now: without a fixed audience the free contacts past the cursor (ids are random) would be mailed.
  const edited = await w.t0.request('PATCH', `/v1/segments/${seg.body.id}`, { body: { filters: { match: 'all', conditions: [{ field: 'properties.plan', op: 'exists' }] } } });
  t.is(edited.status, 200, JSON.stringify(edited.body));
  for (let i = 0; i < 12; i++) {
    clock.advance(WINDOW_MS);
    await run();
  }
  const done = await get(c.id);
  t.is(done.status, 'SENT');
  t.is(done.total, 4);
  t.is(done.sent, 4);
  const pros = new Set(contacts.slice(0, 4).map((x) => x.email));
  t.deepEqual(sentTo('segrun').filter((r) => !pros.has(r)), [], 'only the audience as of the start');
  t.is(sentTo('segrun').length, 4);
});

test.serial('a segment deleted while its campaign runs leaves the rest of the audience mailed', async (t) => {
  const contacts = Array.from({ length: 6 }, (_, i) => ({ email: `segdel${i}@example.net`, properties: { plan: i < 4 ? 'pro' : 'free' } }));
  const bookId = await book('Segment deleted', contacts);
  const seg = await w.t0.request('POST', '/v1/segments', { body: { name: 'Pro', contactBookId: bookId, filters: { match: 'all', conditions: [{ field: 'properties.plan', op: 'eq', value: 'pro' }] } } });
  const c = await campaign(bookId, { segmentId: seg.body.id, sendNow: true, batchSize: 2 });
  await run();
  t.is(sentTo('segdel').length, 2);
  t.is((await w.t0.request('DELETE', `/v1/segments/${seg.body.id}`)).status, 200);
  for (let i = 0; i < 3; i++) {
    clock.advance(WINDOW_MS);
    await run();
  }
  const done = await get(c.id);
  t.is(done.status, 'SENT');
  t.is(done.sent, 4);
  t.deepEqual(sentTo('segdel').sort(), contacts.slice(0, 4).map((x) => x.email).sort());
});

test.serial('cc and bcc that leave no room for the contact in one message are refused when the campaign is written (400), not at every send', async (t) => {
  const bookId = await book('Many copies', [{ email: 'copies@example.net' }]);
  const fifty = (p: string) => Array.from({ length: 50 }, (_, i) => `${p}${i}@example.org`);
  const res = await w.t0.request('POST', '/v1/campaigns', {
    body: { name: 'n', from: `news@${w.domain.name}`, subject: 's', contactBookId: bookId, html: '<p>x</p>', cc: fifty('cc'), bcc: fifty('bcc') },
  });
  t.is(res.status, 400, JSON.stringify(res.body.error));
  t.is(res.body.error.code, 'BAD_REQUEST');
  t.regex(res.body.error.message, /^(cc|bcc)/);
  const c = await campaign(bookId, { cc: fifty('cc') });
  const patched = await w.t0.request('PATCH', `/v1/campaigns/${c.id}`, { body: { bcc: fifty('bcc') } });
  t.is(patched.status, 400, JSON.stringify(patched.body.error));
  // At the limit: 49 + 50 copies and the contact are one message of 100 recipients.
  t.is((await w.t0.request('PATCH', `/v1/campaigns/${c.id}`, { body: { bcc: fifty('bcc').slice(1) } })).status, 200);
});

test.serial('a hard bounce whose counting a killed process never did is counted at the next start, hardBounced included', async (t) => {
  w.sink.setBehaviour({ onRcpt: (a) => (a === 'gone@example.net' ? { code: 550, message: '5.1.1 <gone@example.net>: user unknown' } : undefined) });
  try {
    const bookId = await book('Recount', [{ email: 'gone@example.net' }]);
    const c = await campaign(bookId, { sendNow: true });
    await run();
    const counted = await get(c.id);
    t.is(counted.bounced, 1);
    t.is(counted.hardBounced, 1);
    // Killed after the BOUNCED event was committed, before the counting that follows it.
    const db = w.t0.app.store.db;
    await db.updateTable('campaign_recipients').set({ counted: '' }).where('campaign_id', '=', c.id).execute();
    await db.updateTable('campaigns').set({ sent: 0, bounced: 0, hard_bounced: 0 }).where('id', '=', c.id).execute();
    await w.restart({ campaigns: { batchWindowSeconds: WINDOW_MS / 1000 } });
    const recovered = await get(c.id);
    t.is(recovered.bounced, 1);
    t.is(recovered.hardBounced, 1);
  } finally {
    w.sink.setBehaviour({ onRcpt: undefined });
  }
});

test.serial('a batch that fails unexpectedly again and again pauses its campaign after MAX_BATCH_FAILURES, saying why; an outage never does', async (t) => {
  const bookId = await book('Broken', Array.from({ length: 2 }, (_, i) => ({ email: `broken${i}@example.net` })));
  const c = await campaign(bookId, { ...aheadOfTheApp(), batchSize: 10 });
  const real = w.t0.app.services.emails;
  // A batch that throws leaves its started campaign due at once (next_batch_at null): on the
  // app's clock too, and the app's runner, ticking every real second, would send it between two
  // of a failing runner's ticks. Each failing batch (its lease held) makes it due a second ahead
  // of the app's clock, long past on the runners' (RACING_AHEAD_MS ahead).
  let attempts = 0;
  const failWith = (err: Error) => async () => {
    attempts++;
    await w.t0.app.store.db.updateTable('campaigns').set({ next_batch_at: clock.nowMs() + 1000 }).where('id', '=', c.id).execute();
    throw err;
  };
  const outage = runnerWith({ ...real, submitEach: failWith(Object.assign(new Error('disk I/O error'), { code: 'SQLITE_IOERR' })) } as EmailService, 'outage-runner', c.id);
  // The app's own runner ticks between the failing runner's ticks, as its timer may: it takes nothing.
  const tickThenApp = async (runner: { tick(): Promise<number> }) => {
    await runner.tick();
    await w.t0.app.runCampaigns();
  };
  for (let i = 0; i < MAX_BATCH_FAILURES + 1; i++) await tickThenApp(outage);
  t.is((await get(c.id)).status, 'RUNNING', 'the store out of reach: tried again, never paused');
  t.is(attempts, MAX_BATCH_FAILURES + 1, 'every tick of the failing runner tried the batch');

  const broken = runnerWith({ ...real, submitEach: failWith(new TypeError("Cannot read properties of undefined (reading 'x')")) } as EmailService, 'broken-runner', c.id);
  for (let i = 0; i < MAX_BATCH_FAILURES - 1; i++) await tickThenApp(broken);
  t.is((await get(c.id)).status, 'RUNNING', 'a failure or a few may pass (a race, a moment)');
  await tickThenApp(broken);
  t.is((await get(c.id)).status, 'PAUSED');
  t.is(await broken.tick(), 0, 'paused: no more attempts, no more error lines');
  // Resumed (the cause fixed), it sends as usual.
  clock.advance(RACING_AHEAD_MS);
  t.is((await w.t0.request('POST', `/v1/campaigns/${c.id}/resume`)).status, 200);
  await run();
  await run();
  t.is(sentTo('broken').length, 2);
  t.is((await get(c.id)).status, 'SENT');
});
