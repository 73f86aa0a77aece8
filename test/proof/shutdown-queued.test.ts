import { repositoriesOf } from '../helpers/repositories.js';
import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld, sendBody } from '../helpers/mail-world.js';
import { startFaultyMx } from './helpers/faulty-mx.js';

// A graceful stop with a destination that stalls every session: the transaction on the wire
// is bounded by the socket timeout and recorded, but the ones queued behind it for the same
// host (at its connection limit) would each wait their turn and stall too, holding the
// shutdown for minutes per message with the production timeouts. They go back unattempted:
// no attempt counted, no DELIVERY_DELAYED, delivered after the restart.

const FAULTY_HOST = 'mx2.sink.test';
const STALLED_DOMAIN = 'stalled.example';

test('stopping with transactions queued behind a stalling host puts them back unattempted; the one on the wire is recorded', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 10, 25, 8, 0, 0));
  const w = await startMailWorld({ clock, overrides: { outbound: { maxConnectionsPerHost: 1, greetingTimeoutMs: 2000, socketTimeoutMs: 2000, transactionTimeoutMs: 3000 } } });
  const mx = await startFaultyMx({ host: '127.0.0.2', port: w.sink.port, name: FAULTY_HOST, upstream: { host: w.sink.host, port: w.sink.port } });
  t.teardown(async () => {
    mx.dropAll();
    await w.close();
    await mx.close();
  });
  w.zone.set(FAULTY_HOST, 'A', ['127.0.0.2']);
  w.zone.set(STALLED_DOMAIN, 'MX', [{ exchange: FAULTY_HOST, priority: 10 }]);
  mx.setFault('stall-at-data');
  const ids: string[] = [];
  for (const to of ['a', 'b', 'c']) {
    const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: `${to}@${STALLED_DOMAIN}` }) });
    ids.push(res.body.emailId);
  }
  await mx.waitForFaults(1);
  await w.t0.stop();
  mx.setFault('none');
  await w.restart();
  const events = async (id: string) => ((await w.t0.request('GET', `/v1/emails/${id}`)).body.emailEvents as { status: string }[]).map((e) => e.status);
  const delayed = [];
  for (const id of ids) if ((await events(id)).includes('DELIVERY_DELAYED')) delayed.push(id);
  t.is(delayed.length, 1, 'only the transaction that was on the wire counts as an attempt');
  const rows = (await Promise.all(ids.map((id) => repositoriesOf(w.t0.app).deliveries.listForEmail(id)))).flat();
  t.deepEqual(rows.map((r) => r.attempts).sort(), [0, 0, 1]);
  // Everything is delivered after the restart, the deferred one at its retry time.
  await w.settle();
  clock.advance(5 * 60_000);
  await w.settle();
  for (const id of ids) t.is(w.sink.messages.filter((m) => m.mailFrom.startsWith(`bounces+${id}_`)).length, 1, id);
});

test('the engine can be stopped and started again in one process (the pool stays usable)', async (t) => {
  const w = await startMailWorld();
  t.teardown(() => w.close());
  await w.t0.app.engine.stop();
  const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'after-restart@example.net' }) });
  w.t0.app.engine.start();
  await w.settle();
  t.is((await w.t0.request('GET', `/v1/emails/${res.body.emailId}`)).body.latestStatus, 'DELIVERED');
});
