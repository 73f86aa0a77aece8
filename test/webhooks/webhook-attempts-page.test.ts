import test from 'ava';
import type { BusEvent } from '../../src/core/events.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { emitCommitted, startWebhookReceiver, type WebhookReceiver } from './webhook-receiver.js';

// An event's body can be megabytes (an email.received whose sender filled its 1 MB header with
// To and Cc addresses), and every attempt of it shows that body. A page of 100 attempts of
// such events held all of them at once, hundreds of megabytes in one answer: a page ends
// early, with its nextCursor, once its request bodies add up to more than 8 MiB.

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

test('a page of attempts ends early once its request bodies pass 8 MiB; the cursor reaches every attempt', async (t) => {
  const made = (await t0.request('POST', '/v1/webhooks', { body: { url: receiver.url, eventTypes: ['contact.updated'] } })).body;
  const big = 3_500_000;
  // One at a time, so the attempts are recorded in this order.
  for (let i = 0; i < 3; i++) {
    await emit('contact.updated', { id: `ct_big${i}`, note: String(i).repeat(big) });
    await receiver.waitFor(i + 1);
    await t0.app.webhookDispatcher.whenIdle();
  }
  await emit('contact.updated', { id: 'ct_small' });
  await receiver.waitFor(4);
  await t0.app.webhookDispatcher.whenIdle();

  const pages: { ids: string[]; chars: number }[] = [];
  let cursor: string | null = null;
  do {
    const res: any = await t0.request('GET', `/v1/webhooks/${made.id}/attempts?limit=100${cursor ? `&cursor=${cursor}` : ''}`);
    t.is(res.status, 200);
    const attempts: any[] = res.body.attempts;
    t.true(attempts.length >= 1, 'a page always has an attempt when there are more');
    for (const a of attempts) t.is(JSON.parse(a.request.body).id, a.eventId);
    pages.push({ ids: attempts.map((a) => JSON.parse(a.request.body).data.id as string), chars: attempts.reduce((n, a) => n + a.request.body.length, 0) });
    cursor = res.body.nextCursor;
  } while (cursor && pages.length < 10);
  // Newest first: the small one and two big ones fit 8 MiB; the third big one opens the next page.
  t.deepEqual(pages.map((p) => p.ids), [['ct_small', 'ct_big2', 'ct_big1'], ['ct_big0']]);
  t.true(pages.every((p) => p.chars <= 8 * 1024 * 1024 || p.ids.length === 1));
});

test('one attempt bigger than the budget is a page of its own', async (t) => {
  const made = (await t0.request('POST', '/v1/webhooks', { body: { url: receiver.url, eventTypes: ['contact.deleted'] } })).body;
  const before = receiver.calls.length;
  await emit('contact.deleted', { id: 'ct_small0' });
  await receiver.waitFor(before + 1);
  await t0.app.webhookDispatcher.whenIdle();
  await emit('contact.deleted', { id: 'ct_huge', note: 'y'.repeat(9 * 1024 * 1024) });
  await receiver.waitFor(before + 2);
  await t0.app.webhookDispatcher.whenIdle();
  const first: any = await t0.request('GET', `/v1/webhooks/${made.id}/attempts?limit=100`);
  t.deepEqual(first.body.attempts.map((a: any) => JSON.parse(a.request.body).data.id), ['ct_huge']);
  t.truthy(first.body.nextCursor);
  const second: any = await t0.request('GET', `/v1/webhooks/${made.id}/attempts?limit=100&cursor=${first.body.nextCursor}`);
  t.deepEqual(second.body.attempts.map((a: any) => JSON.parse(a.request.body).data.id), ['ct_small0']);
  t.is(second.body.nextCursor, null);
});
