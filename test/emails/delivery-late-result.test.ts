import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import type { DeliveryRow } from '../../src/store/repositories/deliveries-repository.js';
import type { EmailRow } from '../../src/store/repositories/emails-repository.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

// A node taken for dead (frozen, cut off) whose delivery another node claimed meanwhile records
// its late result: it must not clear the lease of the node now delivering the message, nor
// close the row under it. A row freed by the sweep and not claimed again takes the late result
// (the message went out: sending it again would deliver it twice). Either store: one node's
// rows are leased under its own name, so its results always apply.

const clock = new ManualClock(Date.UTC(2026, 10, 29, 9, 0, 0));
let t0: TestApp;

test.before(async () => {
  t0 = await startTestApp({ clock });
  await addVerifiedDomain(t0, 'late.dev');
});
test.after.always(async () => {
  await t0?.close();
});

/** A queued delivery leased by `owner` (null: by none), and the group the engine would record it with. */
async function leasedDelivery(owner: string | null) {
  const sent = await t0.request('POST', '/v1/emails', {
    body: { from: 'a@late.dev', to: 'b@rcpt.example', subject: 'x', text: 'y', scheduledAt: new Date(clock.nowMs() + 3_600_000).toISOString() },
  });
  const db = t0.app.store.db;
  const emailId = sent.body.emailId as string;
  await db.updateTable('deliveries').set({ lease_owner: owner, lease_until: owner ? clock.nowMs() + 60_000 : null }).where('email_id', '=', emailId).execute();
  const email = (await db.selectFrom('emails').selectAll().where('id', '=', emailId).executeTakeFirstOrThrow()) as EmailRow;
  const deliveries = (await db.selectFrom('deliveries').selectAll().where('email_id', '=', emailId).execute()) as DeliveryRow[];
  const group = { email: { ...email, body_bytes: 0 }, domain: undefined, rcptDomain: 'rcpt.example', deliveries };
  const row = () => db.selectFrom('deliveries').select(['state', 'lease_owner']).where('id', '=', deliveries[0]!.id).executeTakeFirstOrThrow();
  return { group, id: deliveries[0]!.id, row };
}

test.serial('a late result does not touch a delivery another node has claimed since', async (t) => {
  const { group, id, row } = await leasedDelivery('node-now-delivering');
  await t0.app.services.deliveries.complete(group, clock.now(), [{ deliveryId: id, outcome: 'delivered', code: 250, response: '250 ok' }]);
  t.deepEqual(await row(), { state: 'queued', lease_owner: 'node-now-delivering' });
});

test.serial('a late result is recorded on a delivery the sweep freed and no node claimed again', async (t) => {
  const { group, id, row } = await leasedDelivery(null);
  await t0.app.services.deliveries.complete(group, clock.now(), [{ deliveryId: id, outcome: 'delivered', code: 250, response: '250 ok' }]);
  t.deepEqual(await row(), { state: 'delivered', lease_owner: null });
});
