import test from 'ava';
import type { BusEvent } from '../../src/core/events.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { twoTeams } from '../helpers/two-teams.js';
import { emitCommitted, startWebhookReceiver, type WebhookReceiver } from './webhook-receiver.js';

// Many endpoints, of two teams, on one slow host (every call hangs until the timeout, 30 s here)
// hold at most webhooks.maxInFlightPerHost calls (16 by default) of the dispatcher's 64 between
// them: another host's events still go out at once. Two host names, both 127.0.0.1 through the
// test's DNS zone; the cap counts host names, not ports.

let t0: TestApp;
let slow: WebhookReceiver;
let fast: WebhookReceiver;

test.before(async () => {
  t0 = await startTestApp({ overrides: { webhooks: { allowPrivate: true, timeoutMs: 30_000 } } });
  t0.zone.set('slow.example.com', 'A', ['127.0.0.1']);
  t0.zone.set('fast.example.com', 'A', ['127.0.0.1']);
  slow = await startWebhookReceiver();
  fast = await startWebhookReceiver();
  slow.reply(() => 'hang');
});
test.after.always(async () => {
  slow?.reply(() => ({ status: 200 }));
  slow?.release();
  await t0?.close();
  await slow?.close();
  await fast?.close();
});

test('endpoints on one slow host hold at most maxInFlightPerHost calls: another host is not held back', async (t) => {
  t.timeout(20_000, "the other host's event waited for the slow host's calls");
  const { b } = await twoTeams(t0);
  const teams = [
    { teamId: t0.teamId, key: t0.key },
    { teamId: b.teamId, key: b.key },
  ];
  // 16 endpoints (8 per team) with 4 calls each: 64 calls wanted, as many as the dispatcher makes at once.
  for (const team of teams) {
    for (let i = 0; i < 8; i++) {
      const res = await t0.request('POST', '/v1/webhooks', { key: team.key, body: { url: `http://slow.example.com:${slow.port}/hook${i}`, eventTypes: ['contact.created'] } });
      if (res.status !== 200) throw new Error(JSON.stringify(res.body));
    }
  }
  const good = await t0.request('POST', '/v1/webhooks', { body: { url: `http://fast.example.com:${fast.port}/hook`, eventTypes: ['contact.updated'] } });
  t.is(good.status, 200);

  const emit = (teamId: number, type: BusEvent['type'], id: string) =>
    emitCommitted(t0, { type, teamId, domainId: null, occurredAt: new Date().toISOString(), data: { id } });
  for (const team of teams) for (let i = 0; i < 4; i++) await emit(team.teamId, 'contact.created', `ct_slow${i}`);
  await slow.waitFor(16);

  let slowMeanwhile = -1;
  fast.reply(() => {
    slowMeanwhile = slow.hanging;
    return { status: 204 };
  });
  await emit(t0.teamId, 'contact.updated', 'ct_fast');
  await fast.waitFor(1);
  t.is(slowMeanwhile, 16, 'it went out while the slow host held its 16');
  t.is(slow.calls.length, 16, 'no more than the cap reached the slow host');
  t.is(fast.calls[0]!.json.data.id, 'ct_fast');
});
