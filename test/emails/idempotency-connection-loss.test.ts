import test from 'ava';
import pg from 'pg';
import { ManualClock } from '../../src/lib/clock.js';
import { sendBody, type MailWorld } from '../helpers/mail-world.js';
import { lockWaiter, startPgCutWorld, type PgCutWorld } from '../helpers/pg-sessions.js';

// PostgreSQL (whatever POSTHORN_TEST_STORE says): a keyed send whose connections are ended under
// it (pg_terminate_backend: an operator, a failover, a proxy) answers 500 "not stored, retry
// later", and the client's retry with the same Idempotency-Key must then be able to send it: the
// key the request had taken is given up even when the first attempt to give it up fails too.
// Found by test/proof/pg-connection-loss (the retry was answered 409 "still in progress" for as
// long as the node ran).

let world: PgCutWorld;
let w: MailWorld;
let client: pg.Client;
let admin: pg.Client;
let url: string;
const clock = new ManualClock(Date.UTC(2026, 10, 29, 9, 0, 0));

test.before(async () => {
  world = await startPgCutWorld(clock);
  ({ w, client, admin, url } = world);
});
test.after.always(async () => {
  await world?.close();
});

test.serial('a keyed send whose write and whose key release both lose their connection: 500, and the retry with the key sends it once', async (t) => {
  const key = 'cut-twice';
  const body = sendBody(w, { to: 'cut@example.net', subject: 'cut twice' });
  const holder = new pg.Client({ connectionString: url });
  await holder.connect();
  t.teardown(() => holder.end());
  // The send's write waits on the emails table; the request has taken its key by then.
  await holder.query('begin');
  await holder.query('lock table emails in share mode');
  const answer = w.t0.request('POST', '/v1/emails', { body, headers: { 'Idempotency-Key': key } });
  const writing = await lockWaiter(client);
  // Hold the key's row too, so that giving the key up waits as well; then cut the write.
  await holder.query('select 1 from idempotency_keys where key = $1 for update', [key]);
  await admin.query('select pg_terminate_backend($1)', [writing]);
  const releasing = await lockWaiter(client);
  t.not(releasing, writing);
  await admin.query('select pg_terminate_backend($1)', [releasing]);
  await holder.query('rollback');
  const first = await answer;
  t.is(first.status, 500, JSON.stringify(first.body));
  t.regex(first.body.error.message, /nothing was accepted, retry later/);

  const retry = await w.t0.request('POST', '/v1/emails', { body, headers: { 'Idempotency-Key': key } });
  t.is(retry.status, 200, JSON.stringify(retry.body));
  const again = await w.t0.request('POST', '/v1/emails', { body, headers: { 'Idempotency-Key': key } });
  t.is(again.body.emailId, retry.body.emailId, 'a replay');
  await w.settle();
  t.is(w.sink.messages.filter((m) => m.rcptTo.includes('cut@example.net')).length, 1);
  t.is((await client.query("select count(*)::int as n from emails where subject = 'cut twice'")).rows[0].n, 1);
});
