import test from 'ava';
import pg from 'pg';
import { ManualClock } from '../../src/lib/clock.js';
import { createTestDatabase, dropTestDatabase, untilSomeoneWaitsForALock } from '../helpers/pg-databases.js';
import { sendBody, startMailWorld, type MailWorld } from '../helpers/mail-world.js';

// PostgreSQL (whatever POSTHORN_TEST_STORE says): a node claims a scheduled email's delivery for
// its attempt while a cancel or a reschedule of that email is between its check of the email
// and its update of the deliveries. The attempt must not be cancelled or moved under the engine
// (it would be sent while the API said CANCELLED): the request is refused as "being sent".

let url: string;
let w: MailWorld;
let client: pg.Client;
const clock = new ManualClock(Date.UTC(2026, 10, 26, 9, 0, 0));

test.before(async () => {
  url = await createTestDatabase();
  w = await startMailWorld({ clock, overrides: { store: { url } } });
  client = new pg.Client({ connectionString: url });
  await client.connect();
});
test.after.always(async () => {
  await client?.end();
  await w?.close();
  if (url) await dropTestDatabase(url);
});

/** Runs `request` while another node's claim of the email's deliveries commits in the middle of it. */
async function claimedDuring(emailId: string, request: () => Promise<{ status: number; body: any }>) {
  const claiming = new pg.Client({ connectionString: url });
  await claiming.connect();
  try {
    await claiming.query('begin');
    await claiming.query(`update deliveries set lease_owner = 'other-node', lease_until = $2 where email_id = $1`, [emailId, clock.nowMs() + 600_000]);
    const answer = request();
    // The request has checked the email (no lease committed yet) and waits on the delivery's row.
    await untilSomeoneWaitsForALock(client);
    await claiming.query('commit');
    return await answer;
  } finally {
    await claiming.end();
  }
}

const deliveriesOf = async (emailId: string) =>
  (await client.query('select state, lease_owner, next_attempt_at from deliveries where email_id = $1', [emailId])).rows as { state: string; lease_owner: string | null; next_attempt_at: string }[];

for (const action of ['cancel', 'reschedule'] as const) {
  test.serial(`a ${action} racing another node's claim of the delivery is refused, and the claim keeps it`, async (t) => {
    const sent = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { scheduledAt: 'in 1 hour' }) });
    t.is(sent.status, 200, JSON.stringify(sent.body));
    const id = sent.body.emailId as string;
    const [before] = await deliveriesOf(id);
    const res = await claimedDuring(id, () =>
      action === 'cancel' ? w.t0.request('POST', `/v1/emails/${id}/cancel`) : w.t0.request('PATCH', `/v1/emails/${id}`, { body: { scheduledAt: 'in 3 hours' } }),
    );
    t.is(res.status, 400, JSON.stringify(res.body));
    t.regex(res.body.error.message, /being sent/);
    t.deepEqual(await deliveriesOf(id), [{ state: 'queued', lease_owner: 'other-node', next_attempt_at: before!.next_attempt_at }]);
    const email = (await w.t0.request('GET', `/v1/emails/${id}`)).body;
    t.is(email.latestStatus, 'SCHEDULED');
  });
}
