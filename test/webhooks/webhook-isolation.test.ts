import test from 'ava';
import { startMailWorld, sendBody, type MailWorld } from '../helpers/mail-world.js';
import { startWebhookReceiver, verifySignature, type WebhookReceiver } from './webhook-receiver.js';

// A dead endpoint (accepts the connection, never answers) must not delay mail or the other
// endpoints' events. The timeout is long here so the dead endpoint is still hanging while
// everything else completes.

let w: MailWorld;
let dead: WebhookReceiver;
let healthy: WebhookReceiver;

test.before(async () => {
  w = await startMailWorld({ overrides: { webhooks: { allowPrivate: true, timeoutMs: 30_000 } } });
  dead = await startWebhookReceiver();
  healthy = await startWebhookReceiver();
  dead.reply(() => 'hang');
});
test.after.always(async () => {
  dead?.reply(() => ({ status: 200 }));
  dead?.release();
  await w?.close();
  await dead?.close();
  await healthy?.close();
});

test('a hanging endpoint never holds back sending or another endpoint', async (t) => {
  const types = ['email.queued', 'email.sent', 'email.delivered'];
  await w.t0.request('POST', '/v1/webhooks', { body: { url: dead.url, eventTypes: types } });
  const good = (await w.t0.request('POST', '/v1/webhooks', { body: { url: healthy.url, eventTypes: types } })).body;

  const before = w.sink.messages.length;
  const ids: string[] = [];
  for (let i = 0; i < 6; i++) {
    const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { subject: `n${i}` }) });
    t.is(res.status, 200);
    ids.push(res.body.emailId);
  }
  // Mail flows...
  await w.sink.waitForMessages(before + 6);
  // ...and the healthy endpoint gets all 18 events (queued, sent, delivered for 6 emails)...
  await healthy.waitFor(18);
  // ...while the dead one still holds its requests open.
  t.true(dead.hanging >= 1, `dead endpoint holds ${dead.hanging} requests`);
  t.true(dead.hanging <= 4, 'at most its own concurrency slots');
  t.true(healthy.calls.every((c) => verifySignature(good.secret, c)));
  for (const id of ids) {
    const seen = healthy.calls.filter((c) => c.json.data.id === id).map((c) => c.json.type).sort();
    t.deepEqual(seen, [...types].sort());
  }
  const email = await w.t0.request('GET', `/v1/emails/${ids[5]}`);
  t.is(email.body.latestStatus, 'DELIVERED');
});
