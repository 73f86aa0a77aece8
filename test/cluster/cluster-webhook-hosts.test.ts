import test from 'ava';
import type { BusEvent } from '../../src/core/events.js';
import { createTestDatabase, dropTestDatabase } from '../helpers/pg-databases.js';
import { startTestApp } from '../helpers/test-app.js';
import { emitCommitted, startWebhookReceiver } from '../webhooks/webhook-receiver.js';

// webhooks.maxInFlightPerHost (and the 4 calls per endpoint) are promises to the receiving
// server, counted in each node's memory: on several nodes each takes its share (the limit over
// the live nodes, rounded down, at least 1), so the cluster together stays within the cap. Two
// nodes in one process on one PostgreSQL database; every call to the slow host hangs.

test('two nodes hold at most webhooks.maxInFlightPerHost calls to one host between them', async (t) => {
  t.timeout(30_000);
  const url = await createTestDatabase();
  const webhooks = { allowPrivate: true, timeoutMs: 30_000, maxInFlightPerHost: 4 };
  const a = await startTestApp({ overrides: { store: { url }, cluster: { nodeName: 'node-a' }, webhooks } as never });
  const b = await startTestApp({ zone: a.zone, overrides: { store: { url }, cluster: { nodeName: 'node-b' }, webhooks } as never });
  const slow = await startWebhookReceiver();
  const fast = await startWebhookReceiver();
  t.teardown(async () => {
    slow.reply(() => ({ status: 200 }));
    slow.release();
    await b.close();
    await a.close();
    await slow.close();
    await fast.close();
    await dropTestDatabase(url);
  });
  a.zone.set('slow.example.com', 'A', ['127.0.0.1']);
  a.zone.set('fast.example.com', 'A', ['127.0.0.1']);
  slow.reply(() => 'hang');

  // Each node has seen the other at a heartbeat: each takes half.
  await a.app.cluster!.sweepNow();
  await b.app.cluster!.sweepNow();
  t.deepEqual(a.app.webhookDispatcher.caps, { perEndpoint: 2, perHost: 2 });
  t.deepEqual(b.app.webhookDispatcher.caps, { perEndpoint: 2, perHost: 2 });

  // Four endpoints on the slow host, one on another host.
  for (let i = 0; i < 4; i++) {
    const res = await a.request('POST', '/v1/webhooks', { body: { url: `http://slow.example.com:${slow.port}/hook${i}`, eventTypes: ['contact.created'] } });
    t.is(res.status, 200);
  }
  t.is((await a.request('POST', '/v1/webhooks', { body: { url: `http://fast.example.com:${fast.port}/hook`, eventTypes: ['contact.updated'] } })).status, 200);

  const emit = (on: typeof a, type: BusEvent['type'], id: string) => emitCommitted(on, { type, teamId: a.teamId, domainId: null, occurredAt: new Date().toISOString(), data: { id } });
  // 32 slow calls, made known to both nodes (each notes the endpoints of the events it commits).
  for (let i = 0; i < 4; i++) await emit(a, 'contact.created', `ct_a${i}`);
  for (let i = 0; i < 4; i++) await emit(b, 'contact.created', `ct_b${i}`);
  // A call to the other host, committed on each node after those: it goes out in a claim round
  // that passed over every slow endpoint with its calls due, so each node has taken all it may.
  await emit(a, 'contact.updated', 'ct_fast_a');
  await fast.waitFor(1);
  await emit(b, 'contact.updated', 'ct_fast_b');
  await fast.waitFor(2);
  t.is(slow.hanging, 4, 'the cap of 4 for the cluster, not 4 per node');
  t.is(slow.calls.length, 4);
});
