import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { groupCommitOf } from '../../src/store/group-commit.js';
import type { DeliveryRow } from '../../src/store/repositories/deliveries-repository.js';
import type { EmailRow } from '../../src/store/repositories/emails-repository.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { repositoriesOf } from '../helpers/repositories.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { startWebhookReceiver, verifySignature, type WebhookReceiver } from './webhook-receiver.js';

// The transactional outbox inside the group commit: an email's webhook rows are written by the
// same group-commit write fn as its status. That fn may run twice (a batch rolled back by another
// item is redone with a savepoint per item); only the run that committed may leave rows, and the
// dispatcher must deliver exactly that event. The webhook real-kill proof is
// test/proof/webhook-outbox-kill.test.ts.

const clock = new ManualClock(Date.UTC(2026, 5, 1, 9, 0, 0));
let t0: TestApp;
let receiver: WebhookReceiver;

test.before(async () => {
  t0 = await startTestApp({ clock, overrides: { webhooks: { allowPrivate: true } } });
  receiver = await startWebhookReceiver();
  await addVerifiedDomain(t0, 'outbox.dev');
});
test.after.always(async () => {
  await t0?.close();
  await receiver?.close();
});

test('a status write redone after a rolled-back batch leaves one outbox event, and that one is delivered', async (t) => {
  const hook = (await t0.request('POST', '/v1/webhooks', { body: { url: receiver.url, eventTypes: ['email.delivered', 'email.queued'] } })).body;
  // Scheduled an hour ahead: the engine leaves it alone; the test completes its delivery itself.
  const sent = await t0.request('POST', '/v1/emails', {
    body: { from: 'a@outbox.dev', to: 'b@rcpt.example', subject: 'x', text: 'y', scheduledAt: new Date(clock.nowMs() + 3_600_000).toISOString() },
  });
  t.is(sent.status, 200);
  const emailId = sent.body.emailId as string;
  const db = t0.app.store.db;
  const email = (await db.selectFrom('emails').selectAll().where('id', '=', emailId).executeTakeFirstOrThrow()) as EmailRow;
  const deliveries = (await db.selectFrom('deliveries').selectAll().where('email_id', '=', emailId).execute()) as DeliveryRow[];
  const before = await db.selectFrom('webhook_events').select('id').where('type', '=', 'email.delivered').execute();
  t.is(before.length, 0);

  // The result and a failing write queued in the same turn share one batch: the batch fails,
  // is rolled back, and the result's fn runs again (with fresh event ids) under a savepoint.
  const completed = t0.app.services.deliveries.complete({ email: { ...email, body_bytes: 0 }, domain: undefined, rcptDomain: 'rcpt.example', deliveries }, clock.now(), [
    { deliveryId: deliveries[0]!.id, outcome: 'delivered', code: 250, response: '250 ok' },
  ]);
  // SQLite: a write fn that throws. PostgreSQL: a result write the database refuses (a trace
  // whose started_at is no number), in the same coalescing window of the results' group commit.
  const failing =
    t0.app.store.kind === 'sqlite'
      ? groupCommitOf(db).write(() => {
          throw new Error('a failing neighbour in the batch');
        })
      : repositoriesOf(t0.app).deliveries.applyResults(
          { updates: [], events: [], suppressions: [], traces: [{ email_id: emailId, team_id: t0.teamId, rcpt_domain: 'x', started_at: 'not a number' as never, results_json: '[]', transcript_json: '[]' }] },
          clock.now().toISOString(),
        );
  await t.throwsAsync(failing, { message: t0.app.store.kind === 'sqlite' ? 'a failing neighbour in the batch' : /invalid input syntax for type bigint/ });
  await completed;

  const stored = await db
    .selectFrom('webhook_events')
    .leftJoin('webhook_calls', 'webhook_calls.event_id', 'webhook_events.id')
    .select(['webhook_events.id as id', 'webhook_events.body as body', 'webhook_calls.webhook_id as webhookId'])
    .where('webhook_events.type', '=', 'email.delivered')
    .execute();
  t.is(stored.length, 1, 'one email.delivered event with one call: the rolled-back run left nothing');
  t.is(stored[0]!.webhookId, hook.id);
  t.is(JSON.parse(stored[0]!.body).data.id, emailId);
  t.is((await t0.request('GET', `/v1/emails/${emailId}`)).body.latestStatus, 'DELIVERED');

  // Woken after the commit, the dispatcher delivers exactly the stored event.
  await t0.app.webhookDispatcher.whenIdle();
  const calls = receiver.calls.filter((c) => c.json?.type === 'email.delivered');
  t.is(calls.length, 1);
  t.is(calls[0]!.json.id, stored[0]!.id, 'the event delivered is the one that committed');
  t.true(verifySignature(hook.secret, calls[0]!));
  t.is(receiver.calls.filter((c) => c.json?.type === 'email.queued' && c.json.data.id === emailId).length, 1, 'email.queued went out once too');
});
