import test from 'ava';
import { sql } from 'kysely';
import { ManualClock } from '../../src/lib/clock.js';
import { createIdempotencyRepository } from '../../src/store/repositories/idempotency-repository.js';
import { capturedLog } from '../helpers/captured-log.js';
import { testStoreKind } from '../helpers/pg-databases.js';
import { sendBody, startMailWorld, type MailWorld } from '../helpers/mail-world.js';

// What a SIGKILL leaves behind, set up exactly (crash-sigkill.test.ts finds these states by
// chance): a restart must repair them. Each state is written into the store the way a process
// killed at that instant leaves it, then the app is restarted on the same data dir.

const clock = new ManualClock(Date.UTC(2026, 4, 4, 8, 0, 0));
const log = capturedLog();
/** What the starts since `from` (an index into the log) said they took up (operations.md, serve.recovered). */
const recovered = (from: number) => log.lines.slice(from).filter((l) => l.event === 'serve.recovered').map((l) => ({ left: l.left, count: l.count }));
let w: MailWorld;
test.before(async () => {
  w = await startMailWorld({ clock, logger: log.logger });
});
test.after.always(async () => {
  await w?.close();
});

test.serial('an Idempotency-Key whose request died with the process is usable at once after a restart', async (t) => {
  const body = sendBody(w, { to: 'idem-crash@example.net' });
  const headers = { 'idempotency-key': 'died-with-the-process' };
  // The request claimed its key (committed, owned by this node), then the process died before its email insert.
  const repo = createIdempotencyRepository(w.t0.app.store.db, { owner: w.t0.app.nodeId });
  t.is((await repo.begin(w.t0.teamId, headers['idempotency-key'], 'hash-of-the-lost-request', clock.nowMs(), 86_400_000)).kind, 'started');
  const meanwhile = await w.t0.request('POST', '/v1/emails', { body, headers });
  t.is(meanwhile.status, 409, 'in the same process the key is (correctly) still in flight');

  const before = log.lines.length;
  await w.restart();
  // One node on SQLite says serve.recovered; a PostgreSQL node frees its earlier life's keys as it joins.
  if (testStoreKind() === 'sqlite') t.deepEqual(recovered(before), [{ left: 'idempotency_keys', count: 1 }], 'the start says what it released');
  else t.is(log.lines.slice(before).find((l) => l.event === 'cluster.join')?.freed.idempotencyKeys, 1, 'the start says what it released');
  const retried = await w.t0.request('POST', '/v1/emails', { body, headers });
  t.is(retried.status, 200, 'the retry after the restart is served, not told to wait for a request that can not finish');
  const replay = await w.t0.request('POST', '/v1/emails', { body, headers });
  t.deepEqual(replay.body, retried.body, 'and the key then replays as usual');
  // A key that was completed before the restart still replays after it.
  const done = await w.t0.request('POST', '/v1/emails', { body: { ...body, subject: 'done' }, headers: { 'idempotency-key': 'completed-before' } });
  await w.restart();
  t.deepEqual((await w.t0.request('POST', '/v1/emails', { body: { ...body, subject: 'done' }, headers: { 'idempotency-key': 'completed-before' } })).body, done.body);
  await w.settle();
});

test.serial('campaign counts a killed process never made are made at the next start, once', async (t) => {
  const book = (await w.t0.request('POST', '/v1/contactBooks', { body: { name: 'Recount' } })).body;
  const emails = ['rc1@example.net', 'rc2@example.net', 'rc3@example.net'];
  await w.t0.request('POST', `/v1/contactBooks/${book.id}/contacts/bulk`, { body: emails.map((email) => ({ email })) });
  const created = await w.t0.request('POST', '/v1/campaigns', {
    body: { name: 'Recount', from: `news@${w.domain.name}`, subject: 'Hi', contactBookId: book.id, html: '<p>x</p>', sendNow: true },
  });
  const id = created.body.id as string;
  await w.t0.app.runCampaigns();
  await w.settle();
  await w.t0.app.runCampaigns();
  const get = async () => (await w.t0.request('GET', `/v1/campaigns/${id}`)).body;
  t.like(await get(), { status: 'SENT', total: 3, sent: 3, delivered: 3 });

  // The DELIVERED events of two recipients were committed, but the process died before the
  // counting that follows them; one of them had not even counted SENT yet.
  const db = w.t0.app.store.db;
  const rows = await sql<{ email_id: string }>`select email_id from campaign_recipients where campaign_id = ${id} order by rowid`.execute(db);
  const [a, b] = rows.rows.map((r) => r.email_id);
  await sql`update campaign_recipients set counted = 'sent' where email_id = ${a}`.execute(db);
  await sql`update campaign_recipients set counted = '' where email_id = ${b}`.execute(db);
  await sql`update campaigns set sent = 2, delivered = 1 where id = ${id}`.execute(db);
  t.like(await get(), { sent: 2, delivered: 1 }, 'the state a kill leaves');

  let before = log.lines.length;
  await w.restart();
  t.like(await get(), { status: 'SENT', total: 3, sent: 3, delivered: 3, opened: 0, bounced: 0 }, 'recounted from the stored events');
  t.deepEqual(recovered(before), [{ left: 'campaign_counts', count: 3 }], 'the start says what it counted');
  before = log.lines.length;
  await w.restart();
  t.like(await get(), { sent: 3, delivered: 3 }, 'a further restart counts nothing twice');
  t.deepEqual(recovered(before), [], 'and says nothing of it');
});
