import test from 'ava';
import pg from 'pg';
import { ManualClock } from '../../src/lib/clock.js';
import { sendBody, type MailWorld } from '../helpers/mail-world.js';
import { lockWaiter, startPgCutWorld, type PgCutWorld } from '../helpers/pg-sessions.js';
import { startWebhookReceiver } from '../webhooks/webhook-receiver.js';

// PostgreSQL (whatever POSTHORN_TEST_STORE says): the write that records what was done outside
// (a message the MX accepted, a webhook call the endpoint answered) loses its connection (the
// session ended by pg_terminate_backend while it waits on a lock another session holds). It is
// written again on a new connection: nothing goes out a second time when its lease runs out.
// Found by test/proof/pg-connection-loss.

let world: PgCutWorld;
let w: MailWorld;
let client: pg.Client;
let admin: pg.Client;
let url: string;
const clock = new ManualClock(Date.UTC(2026, 10, 29, 9, 0, 0));

test.before(async () => {
  world = await startPgCutWorld(clock, { webhooks: { allowPrivate: true } });
  ({ w, client, admin, url } = world);
});
test.after.always(async () => {
  await world?.close();
});

/** Holds `table` from writes while `during` runs, ends the first session that waits on it, then lets go. */
async function cutTheWriteTo(table: string, during: () => void): Promise<void> {
  const holder = new pg.Client({ connectionString: url });
  await holder.connect();
  try {
    await holder.query('begin');
    await holder.query(`lock table ${table} in share mode`);
    during();
    await admin.query('select pg_terminate_backend($1)', [await lockWaiter(client, table)]);
    await holder.query('rollback');
  } finally {
    await holder.end();
  }
}

test.serial('a delivery result whose write loses its connection is written again: the message goes to the MX once', async (t) => {
  const leaseMs = w.t0.config.outbound.leaseMs;
  let sending!: Promise<{ status: number; body: any }>;
  // Attempt traces are written by the results' write alone (in its statement with the status events).
  await cutTheWriteTo('delivery_attempts', () => {
    sending = w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'result-cut@example.net', subject: 'result cut' }) });
  });
  const sent = await sending;
  t.is(sent.status, 200, JSON.stringify(sent.body));
  await w.settle();
  clock.advance(leaseMs + 60_000);
  await w.settle();
  t.is(w.sink.messages.filter((m) => m.rcptTo.includes('result-cut@example.net')).length, 1, 'sent once');
  t.is((await w.t0.request('GET', `/v1/emails/${sent.body.emailId}`)).body.latestStatus, 'DELIVERED');
});

test.serial('a webhook attempt whose record loses its connection is recorded again: the endpoint is called once, as on record', async (t) => {
  const hook = await startWebhookReceiver();
  t.teardown(() => hook.close());
  const created = await w.t0.request('POST', '/v1/webhooks', { body: { url: hook.url, eventTypes: ['contact.created'] } });
  t.is(created.status, 200, JSON.stringify(created.body));
  const book = (await w.t0.request('POST', '/v1/contactBooks', { body: { name: 'Cut' } })).body.id as string;
  await cutTheWriteTo('webhook_attempts', () => {
    void w.t0.request('POST', `/v1/contactBooks/${book}/contacts`, { body: { email: 'hook-cut@example.net' } });
  });
  await w.t0.app.webhookDispatcher.whenIdle();
  clock.advance(10 * 60_000);
  await w.t0.app.webhookDispatcher.whenIdle();
  const attempts = (await client.query<{ n: number }>('select count(*)::int as n from webhook_attempts where webhook_id = $1', [created.body.id])).rows[0]!.n;
  t.is(hook.calls.length, 1, 'called once');
  t.is(attempts, 1, 'one attempt on record');
  t.is((await client.query("select state from webhook_calls where webhook_id = $1", [created.body.id])).rows[0].state, 'delivered');
});

test.serial("a campaign's count whose write loses its connection is written again: the campaign counts the delivery", async (t) => {
  const book = (await w.t0.request('POST', '/v1/contactBooks', { body: { name: 'Count cut' } })).body.id as string;
  t.is((await w.t0.request('POST', `/v1/contactBooks/${book}/contacts`, { body: { email: 'count-cut@example.net' } })).status, 200);
  const created = await w.t0.request('POST', '/v1/campaigns', {
    body: { name: 'Count cut', from: `News <news@${w.domain.name}>`, subject: 'Count', contactBookId: book, html: '<p>Count</p>', sendNow: true },
  });
  t.is(created.status, 200, JSON.stringify(created.body));
  await w.t0.app.runCampaigns();
  await w.settle();
  const campaign = async () => (await w.t0.request('GET', `/v1/campaigns/${created.body.id}`)).body;
  t.is((await campaign()).delivered, 1);
  // The delivery's count undone, then its event again: counting it waits on the lock and its
  // session is ended.
  const rec = (await client.query<{ email_id: string; contact_id: string }>('select email_id, contact_id from campaign_recipients where campaign_id = $1', [created.body.id])).rows[0]!;
  await client.query("update campaign_recipients set counted = '' where campaign_id = $1", [created.body.id]);
  await client.query('update campaigns set delivered = 0 where id = $1', [created.body.id]);
  const events = w.t0.app.services.events;
  await cutTheWriteTo('campaign_recipients', () =>
    events.emit({ type: 'email.delivered', teamId: w.t0.teamId, domainId: w.domain.id, occurredAt: clock.now().toISOString(), data: { id: rec.email_id, campaignId: created.body.id, contactId: rec.contact_id } }),
  );
  await events.settled();
  t.is((await campaign()).delivered, 1);
});
