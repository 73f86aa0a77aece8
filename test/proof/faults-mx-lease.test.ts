import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld, sendBody, type MailWorld } from '../helpers/mail-world.js';
import { startFaultyMx, type FaultyMx } from './helpers/faulty-mx.js';

// Proof: a transaction still in flight when its delivery lease would run out (by the clock),
// held by a slow MX or queued behind the per-host limit, keeps its lease (the engine renews it
// before its sweep looks for expired ones): its rows are not freed, claimed again and sent a
// second time. The claim that meets rows whose attempt ended while it ran is
// test/smtp/outbound/delivery-engine.test.ts; two nodes, test/cluster/cluster-nodes.test.ts.
//
// A file of its own: the sessions must stay held for as long as the test needs, whatever the
// load on the machine, so the SMTP client's real-time timeouts are set far beyond anything the
// test waits for (faults-mx.test.ts needs them small to end its stalls quickly).

const clock = new ManualClock(Date.UTC(2026, 5, 1, 8, 0, 0));
const GENEROUS_TIMEOUT_MS = 10 * 60_000;
const FAULTY_HOST = 'mx2.sink.test';
const FAULTY_DOMAIN = 'faulty.example';

let w: MailWorld;
let mx: FaultyMx;

test.before(async () => {
  w = await startMailWorld({
    clock,
    overrides: { outbound: { greetingTimeoutMs: GENEROUS_TIMEOUT_MS, socketTimeoutMs: GENEROUS_TIMEOUT_MS, transactionTimeoutMs: GENEROUS_TIMEOUT_MS } },
  });
  mx = await startFaultyMx({ host: '127.0.0.2', port: w.sink.port, name: FAULTY_HOST, upstream: { host: w.sink.host, port: w.sink.port } });
  w.zone.set(FAULTY_HOST, 'A', ['127.0.0.2']);
  w.zone.set(FAULTY_DOMAIN, 'MX', [{ exchange: FAULTY_HOST, priority: 10 }]);
});
test.after.always(async () => {
  mx?.dropAll();
  await w?.close();
  await mx?.close();
});

const email = async (id: string) => (await w.t0.request('GET', `/v1/emails/${id}`)).body;
const copies = (id: string) => w.sink.messages.filter((m) => m.mailFrom.startsWith(`bounces+${id}_`)).length;
const statuses = (e: any) => (e.emailEvents as any[]).map((x) => x.status);

test('an MX that holds sessions past the delivery lease: nothing in flight is claimed and sent a second time', async (t) => {
  // More messages than the pool's sessions per host (10): some are held by the MX after their
  // final dot, the rest wait in the pool's queue. Then more than the lease (10 min) passes.
  mx.setFault('hold-after-dot');
  const ids: string[] = [];
  for (let i = 0; i < 12; i++) {
    const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: `lease-${i}@${FAULTY_DOMAIN}`, subject: `lease ${i}` }) });
    t.is(res.status, 200, JSON.stringify(res.body));
    ids.push(res.body.emailId);
  }
  await mx.waitForFaults(10, GENEROUS_TIMEOUT_MS);
  const leasedUntil = async () =>
    (await w.t0.app.store.db.selectFrom('deliveries').select('lease_until').where('email_id', 'in', ids).execute()).map((r) => r.lease_until ?? 0);
  const firstLease = Math.max(...(await leasedUntil()));
  clock.advance(11 * 60_000);
  w.t0.app.engine.wake();
  // Wait for the engine's next claim round: it renews the leases of what it is still sending
  // (before its sweep, which would free them otherwise).
  while ((await leasedUntil()).some((u) => u <= firstLease)) await new Promise((r) => setImmediate(r));
  t.is(mx.stalled, 10, 'the held sessions are still in flight when the leases are renewed');

  mx.setFault('none', { keepOpen: true });
  t.is(mx.release(), 10);
  await w.settle();
  for (const id of ids) {
    const e = await email(id);
    t.is(e.latestStatus, 'DELIVERED', id);
    t.is(copies(id), 1, `${id}: sent once, not once per claim`);
    t.is(statuses(e).filter((s: string) => s === 'DELIVERED').length, 1);
  }
});
