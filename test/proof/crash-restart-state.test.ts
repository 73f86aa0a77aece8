import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { createIdempotencyRepository } from '../../src/store/repositories/idempotency-repository.js';
import { sendBody, startMailWorld, type MailWorld } from '../helpers/mail-world.js';

// What a SIGKILL leaves behind, set up exactly (crash-sigkill.test.ts finds these states by
// chance): a restart must repair them. Each state is written into the store the way a process
// killed at that instant leaves it, then the app is restarted on the same data dir.

const clock = new ManualClock(Date.UTC(2026, 4, 4, 8, 0, 0));
let w: MailWorld;
test.before(async () => {
  w = await startMailWorld({ clock });
});
test.after.always(async () => {
  await w?.close();
});

test.serial('an Idempotency-Key whose request died with the process is usable at once after a restart', async (t) => {
  const body = sendBody(w, { to: 'idem-crash@example.net' });
  const headers = { 'idempotency-key': 'died-with-the-process' };
  // The request claimed its key (committed), then the process died before its email insert.
  const repo = createIdempotencyRepository(w.t0.app.store.db);
  t.is((await repo.begin(w.t0.teamId, headers['idempotency-key'], 'hash-of-the-lost-request', clock.nowMs(), 86_400_000, 60_000)).kind, 'started');
  const meanwhile = await w.t0.request('POST', '/v1/emails', { body, headers });
  t.is(meanwhile.status, 409, 'in the same process the key is (correctly) still in flight');

  await w.restart();
  const retried = await w.t0.request('POST', '/v1/emails', { body, headers });
  t.is(retried.status, 200, 'the retry after the restart is served, not told to wait for a request that can not finish');
  const replay = await w.t0.request('POST', '/v1/emails', { body, headers });
  t.deepEqual(replay.body, retried.body, 'and the key then replays as usual');
  // A key that was completed before the restart still replays after it.
  const done = await w.t0.request('POST', '/v1/emails', { body: { ...body, subject: 'done' }, headers: { 'idempotency-key': 'completed-before' } });
  await w.restart();
  t.deepEqual((await w.t0.request('POST', '/v1/emails', { body: { ...body, subject: 'done' }, headers: { 'idempotency-key': 'completed-before' } })).body, done.body);
  await w.settle();
});
