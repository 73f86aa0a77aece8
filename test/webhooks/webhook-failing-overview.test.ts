import test from 'ava';
import type { BusEvent } from '../../src/core/events.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { emitCommitted, startWebhookReceiver, type WebhookReceiver } from './webhook-receiver.js';

// The console overview lists endpoints whose last attempt failed, with that attempt's status and
// time. An event's body can be megabytes, and one endpoint per team up to the limit: the list
// reads each last attempt without its event's body.

let t0: TestApp;
let receiver: WebhookReceiver;

test.before(async () => {
  t0 = await startTestApp({ overrides: { webhooks: { allowPrivate: true } } });
  receiver = await startWebhookReceiver();
});
test.after.always(async () => {
  await t0?.close();
  await receiver?.close();
});

async function emit(type: BusEvent['type'], data: Record<string, unknown>): Promise<void> {
  const event: BusEvent = { type, teamId: t0.teamId, domainId: null, occurredAt: new Date().toISOString(), data };
  await emitCommitted(t0, event);
}

test('failing endpoints come with their last attempt\'s status and time, not its event body; the overview names them as before', async (t) => {
  receiver.reply(() => ({ status: 500, body: 'down' }));
  const made = (await t0.request('POST', '/v1/webhooks', { body: { url: receiver.url, eventTypes: ['contact.updated'] } })).body;
  const marker = 'body-that-is-not-read-'.repeat(1000);
  await emit('contact.updated', { id: 'ct_fail', note: marker });
  await receiver.waitFor(1);
  await t0.app.webhookDispatcher.whenIdle();

  const scope = { teamId: t0.teamId, domainId: null };
  const failing = await t0.app.services.webhooks.failing(scope);
  t.is(failing.length, 1);
  t.is(failing[0]!.webhook.id, made.id);
  t.like(failing[0]!.lastAttempt, { response: { status: 500 }, status: 'FAILED' });
  t.truthy(failing[0]!.lastAttempt.createdAt);
  t.false(JSON.stringify(failing).includes('body-that-is-not-read-'), 'the event body is not read');

  const { attention } = await t0.app.services.overview.overview(scope);
  const item = attention.find((a) => a.kind === 'webhook-failing');
  t.like(item, { kind: 'webhook-failing', webhookId: made.id, url: receiver.url, lastStatus: 500, at: failing[0]!.lastAttempt.createdAt });
});
