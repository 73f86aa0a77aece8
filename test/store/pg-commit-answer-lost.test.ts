import test from 'ava';
import pg from 'pg';
import { ManualClock } from '../../src/lib/clock.js';
import { startCommitCutWorld, type CommitCutWorld } from '../helpers/commit-cut-world.js';
import { sendBody, type MailWorld } from '../helpers/mail-world.js';
import type { CommitCutter } from '../helpers/pg-commit-cutter.js';
import { createTlsReportsRepository } from '../../src/store/repositories/tls-reports-repository.js';

// PostgreSQL (whatever POSTHORN_TEST_STORE says): the connection is cut after the server has
// committed a write and before its answer reaches Posthorn (a proxy drops the COMMIT's reply).
// The write is stored, so the request must say so: a 500 "not stored" would make the client's
// retry send a second email, or report a failure for a change that was made. The outcome is
// looked up by the transaction's id (store/pg/pg-commit-outcome.ts), for the group commit and
// for the store's transactions alike.

let cw: CommitCutWorld;
let w: MailWorld;
let cutter: CommitCutter;
let client: pg.Client;
const clock = new ManualClock(Date.UTC(2026, 10, 29, 9, 0, 0));

test.before(async () => {
  cw = await startCommitCutWorld(clock, { webhooks: { allowPrivate: true } });
  ({ w, cutter, client } = cw);
});
test.after.always(async () => {
  await cw?.close();
});

test.serial('a send whose COMMIT answer is lost is answered 200: it was stored, once', async (t) => {
  const cut = cutter.arm('insert into emails (');
  const sent = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'lost-answer@example.net', subject: 'lost answer' }) });
  await cut;
  t.is(sent.status, 200, JSON.stringify(sent.body));
  const rows = (await client.query<{ id: string }>("select id from emails where subject = 'lost answer'")).rows;
  t.deepEqual(rows.map((r) => r.id), [sent.body.emailId]);
  await w.settle();
  t.is(w.sink.messages.filter((m) => m.rcptTo.includes('lost-answer@example.net')).length, 1);
});

test.serial('a change made in a transaction whose COMMIT answer is lost is answered as done', async (t) => {
  const book = (await w.t0.request('POST', '/v1/contactBooks', { body: { name: 'Lost answer' } })).body.id as string;
  const cut = cutter.arm('delete from "contact_books"');
  const deleted = await w.t0.request('DELETE', `/v1/contactBooks/${book}`);
  await cut;
  t.is(deleted.status, 200, JSON.stringify(deleted.body));
  t.is((await client.query('select 1 from contact_books where id = $1', [book])).rowCount, 0);
});

test.serial('an API create in a repository transaction whose COMMIT answer is lost is answered 200, and made once', async (t) => {
  const cut = cutter.arm('insert into "webhooks"');
  const created = await w.t0.request('POST', '/v1/webhooks', { body: { url: 'http://127.0.0.1:9/lost-answer', eventTypes: ['email.delivered'] } });
  t.is(created.status, 200, JSON.stringify(created.body));
  await cut;
  const rows = (await client.query<{ id: string }>("select id from webhooks where url = 'http://127.0.0.1:9/lost-answer'")).rows;
  t.deepEqual(rows.map((r) => r.id), [created.body.id]);
});

test.serial('counts added in a transaction whose COMMIT answer is lost are added once: the failure is not put back for the next flush', async (t) => {
  const repo = createTlsReportsRepository(w.t0.app.store.db);
  const row = { policy_domain: 'lost-answer.example', day: '2026-11-29', policy_key: 'k', policy_type: 'sts', policy_json: '{}', result: 'success', sending_ip: '127.0.0.1', mx_host: 'mx.lost-answer.example', receiving_ip: '127.0.0.1', reason_code: '', count: 3 };
  const cut = cutter.arm('insert into "tls_session_counts"');
  await t.notThrowsAsync(repo.addCounts([row]));
  await cut;
  t.is((await client.query<{ count: number }>("select count::int as count from tls_session_counts where policy_domain = 'lost-answer.example'")).rows[0]?.count, 3);
});

test.serial('a webhook test event whose COMMIT answer is lost is answered 200, and stored once (a retry would send a second one)', async (t) => {
  const hook = (await w.t0.request('POST', '/v1/webhooks', { body: { url: 'http://127.0.0.1:9/lost-test-event', eventTypes: ['email.delivered'] } })).body.id as string;
  const cut = cutter.arm('insert into "webhook_calls"');
  const sent = await w.t0.request('POST', `/v1/webhooks/${hook}/test`);
  await cut;
  t.is(sent.status, 200, JSON.stringify(sent.body));
  const rows = (await client.query<{ id: string }>("select e.id from webhook_events e join webhook_calls c on c.event_id = e.id where c.webhook_id = $1 and e.type = 'webhook.test'", [hook])).rows;
  t.is(rows.length, 1);
});
