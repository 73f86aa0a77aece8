import test from 'ava';
import pg from 'pg';
import { createTestDatabase, dropTestDatabase, untilSomeoneWaitsForALock } from '../helpers/pg-databases.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import type { BusEvent } from '../../src/core/events.js';
import { transact } from '../../src/store/store-context.js';
import { startWebhookReceiver } from './webhook-receiver.js';

// PostgreSQL (whatever POSTHORN_TEST_STORE says): an endpoint deleted by one transaction while
// another writes an event's outbox rows. The event's write read the team's endpoints before the
// delete committed; its call for that endpoint must not turn the delete into a failure of the
// state change the event reports (a contact not created, a send answered 500).

let url: string;
let app: TestApp;
let client: pg.Client;

test.before(async () => {
  url = await createTestDatabase();
  app = await startTestApp({ overrides: { store: { url }, webhooks: { allowPrivate: true } } });
  client = new pg.Client({ connectionString: url });
  await client.connect();
});
test.after.always(async () => {
  await client?.end();
  await app?.close();
  if (url) await dropTestDatabase(url);
});

async function endpoint(): Promise<string> {
  const res = await app.request('POST', '/v1/webhooks', { body: { url: 'http://127.0.0.1:9/hook', eventTypes: ['contact.created'] } });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  return (res.body as { id: string }).id;
}

/** Runs `request` while another transaction deletes the endpoint, committing once the request waits on its row. */
async function deletedDuring<T>(webhookId: string, request: () => Promise<T>): Promise<T> {
  const deleting = new pg.Client({ connectionString: url });
  await deleting.connect();
  try {
    await deleting.query('begin');
    await deleting.query('delete from webhooks where id = $1', [webhookId]);
    const answer = request();
    await untilSomeoneWaitsForALock(client);
    await deleting.query('commit');
    return await answer;
  } finally {
    await deleting.end();
  }
}

test.serial('an endpoint deleted while an event writes its outbox rows: the change is stored, the deleted endpoint gets no call', async (t) => {
  const book = (await app.request('POST', '/v1/contactBooks', { body: { name: 'Race' } })).body as { id: string };
  const kept = await endpoint();
  const doomed = await endpoint();
  // The contact's write reads both endpoints and then waits on the deleted one's row.
  const res = await deletedDuring(doomed, () => app.request('POST', `/v1/contactBooks/${book.id}/contacts`, { body: { email: 'race@example.net' } }));
  t.is(res.status, 200, JSON.stringify(res.body));
  const contacts = (await app.request('GET', `/v1/contactBooks/${book.id}/contacts`)).body as { email: string }[];
  t.deepEqual(contacts.map((c) => c.email), ['race@example.net']);
  const calls = await client.query('select webhook_id from webhook_calls c join webhook_events e on e.id = c.event_id where e.type = $1', ['contact.created']);
  t.deepEqual(calls.rows.map((r) => r.webhook_id), [kept], 'one call, for the endpoint that is left');
});

test.serial('a test event for an endpoint deleted meanwhile is 404, not 500', async (t) => {
  const doomed = await endpoint();
  const res = await deletedDuring(doomed, () => app.request('POST', `/v1/webhooks/${doomed}/test`));
  t.is(res.status, 404, JSON.stringify(res.body));
});

test.serial('an endpoint deleted while an attempt of its is being recorded: the delete succeeds, no deadlock', async (t) => {
  // The attempt's record takes the call's row, then (its foreign key) the endpoint's; the delete
  // takes the endpoint's row, then its calls'. Taken in that order they deadlocked, and the
  // delete was answered 500 after a second. An open transaction holding the attempts table
  // stops the record between its two statements while the delete comes in.
  const receiver = await startWebhookReceiver();
  t.teardown(() => receiver.close());
  receiver.reply(() => 'hang');
  const hook = (await app.request('POST', '/v1/webhooks', { body: { url: receiver.url, eventTypes: ['domain.verified'] } })).body as { id: string };
  const event: BusEvent = { type: 'domain.verified', teamId: app.teamId, domainId: null, occurredAt: new Date().toISOString(), data: {} };
  await transact(app.app.store.db, async () => app.app.services.events.inTransaction([event]));
  app.app.services.events.emit(event);
  await receiver.waitFor(1);

  const blocker = new pg.Client({ connectionString: url });
  await blocker.connect();
  t.teardown(() => blocker.end());
  const waiting = async () => (await client.query(`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`)).rows[0].n as number;
  await blocker.query('begin');
  await blocker.query('lock table webhook_attempts in share mode');
  receiver.release(); // 200: the attempt is recorded, and waits for the blocker
  while ((await waiting()) < 1);
  const deleted = app.request('DELETE', `/v1/webhooks/${hook.id}`);
  while ((await waiting()) < 2);
  await blocker.query('commit');
  const res = await deleted;
  t.is(res.status, 200, JSON.stringify(res.body));
  t.is((await app.request('GET', `/v1/webhooks/${hook.id}`)).status, 404);
  await app.app.webhookDispatcher.whenIdle();
});
