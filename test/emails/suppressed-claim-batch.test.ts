import test from 'ava';
import { claimBatchWorld } from './helpers/claim-batch-world.js';
import type { WebhookReceiver } from '../webhooks/webhook-receiver.js';
import { twoTeams } from '../helpers/two-teams.js';

// One claim that finds many groups whose recipients were suppressed after acceptance (two
// teams' mail): every email ends SUPPRESSED with its events and webhooks, on its own team's
// endpoint, in one store write for all of them (not one per group); a recipient suppressed
// beside one that is not is closed alone, and the rest is handed on.

const world = claimBatchWorld(test);

const A_EMAILS = 10; // to two recipient domains each: 20 groups
const B_EMAILS = 5;

test('many groups suppressed in one claim: all SUPPRESSED with their events and webhooks, per team, in one write', async (t) => {
  const { w, hookA, hookB } = world;
  const app = w.t0.app;
  const { b } = await twoTeams(w.t0, { b: { domains: ['bee-mail.dev'] } });
  const keyB = b.key;
  const domainB = b.domains[0]!.name;
  for (const [url, key] of [[hookA.url, w.t0.key], [hookB.url, keyB]] as const) {
    const hook = await w.t0.request('POST', '/v1/webhooks', { body: { url, eventTypes: ['email.suppressed'] }, key });
    t.is(hook.status, 200, JSON.stringify(hook.body));
  }
  await app.engine.stop();

  const send = async (body: Record<string, unknown>, key: string) => {
    const res = await w.t0.request('POST', '/v1/emails', { body: { subject: 'Hello', text: 'Hi', ...body }, key });
    if (res.status !== 200) throw new Error(JSON.stringify(res.body));
    return res.body.emailId as string;
  };
  const suppress = async (email: string, key: string) => {
    const res = await w.t0.request('POST', '/v1/suppressions', { body: { email, reason: 'MANUAL' }, key });
    if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  };
  const idsA: string[] = [];
  for (let i = 0; i < A_EMAILS; i++) idsA.push(await send({ from: `news@${w.domain.name}`, to: [`a${i}@example.net`, `a${i}@example.org`] }, w.t0.key));
  const idsB: string[] = [];
  for (let i = 0; i < B_EMAILS; i++) idsB.push(await send({ from: `news@${domainB}`, to: `b${i}@example.net`, cc: `cc${i}@example.org` }, keyB));
  // One of two To suppressed: that row is closed, the email goes on to the other.
  const partial = await send({ from: `news@${w.domain.name}`, to: ['half-gone@example.net', 'half-kept@example.org'] }, w.t0.key);
  // Suppressed by team B only: team A's email to the same address still goes.
  const kept = await send({ from: `news@${w.domain.name}`, to: 'b0@example.net' }, w.t0.key);
  for (let i = 0; i < A_EMAILS; i++) for (const d of ['example.net', 'example.org']) await suppress(`a${i}@${d}`, w.t0.key);
  for (let i = 0; i < B_EMAILS; i++) await suppress(`b${i}@example.net`, keyB);
  await suppress('half-gone@example.net', w.t0.key);

  const svc = app.services.deliveries;
  const before = world.writes();
  const groups = await svc.claim(100);
  const writes = world.writes() - before;
  t.deepEqual(groups.map((g) => `${g.email.id} ${g.deliveries.map((d) => d.recipient).join(',')}`).sort(), [`${kept} b0@example.net`, `${partial} half-kept@example.org`].sort(), 'only what may still be sent is handed on');
  // A write per group would be 27 at least. One for all of them: the claim's UPDATE ... RETURNING,
  // the results, and what runs beside them (the webhook dispatcher, woken by the results, claims).
  t.true(writes <= 8, `${writes} write transactions for one claim that suppressed ${2 * A_EMAILS + 2 * B_EMAILS + 1} groups`);

  const suppressedOf = async (id: string, key: string, status = 'SUPPRESSED') => {
    const e = (await w.t0.request('GET', `/v1/emails/${id}`, { key })).body;
    t.is(e.latestStatus, status, id);
    return (e.emailEvents as any[]).filter((x) => x.status === 'SUPPRESSED').map((x) => x.data.recipient as string).sort();
  };
  for (const [i, id] of idsA.entries()) t.deepEqual(await suppressedOf(id, w.t0.key), [`a${i}@example.net`, `a${i}@example.org`]);
  // Every To suppressed: the cc goes the same way.
  for (const [i, id] of idsB.entries()) t.deepEqual(await suppressedOf(id, keyB), [`b${i}@example.net`, `cc${i}@example.org`]);
  t.deepEqual(await suppressedOf(partial, w.t0.key, 'QUEUED'), ['half-gone@example.net']);
  t.deepEqual(await suppressedOf(kept, w.t0.key, 'QUEUED'), []);
  // Another team's email is not found under the wrong key.
  t.is((await w.t0.request('GET', `/v1/emails/${idsB[0]}`, { key: w.t0.key })).status, 404);

  // One webhook per recipient of a SUPPRESSED email, each on its own team's endpoint; none for
  // the one recipient of several (latestStatus unchanged).
  await Promise.all([hookA.waitFor(2 * A_EMAILS), hookB.waitFor(2 * B_EMAILS)]);
  await app.services.events.settled();
  const calls = (r: WebhookReceiver) => r.calls.map((c) => `${c.json.type} ${c.json.data.id} ${c.json.data.recipient}`).sort();
  t.deepEqual(calls(hookA), idsA.flatMap((id, i) => [`email.suppressed ${id} a${i}@example.net`, `email.suppressed ${id} a${i}@example.org`]).sort());
  t.deepEqual(calls(hookB), idsB.flatMap((id, i) => [`email.suppressed ${id} b${i}@example.net`, `email.suppressed ${id} cc${i}@example.org`]).sort());

  // What was handed on goes out once handed back.
  await svc.releaseGroups(groups);
  app.engine.start();
  await w.settle();
  const mailedTo = w.sink.messages.flatMap((m) => m.rcptTo).sort();
  t.deepEqual(mailedTo, ['b0@example.net', 'half-kept@example.org']);
  t.is((await w.t0.request('GET', `/v1/emails/${kept}`)).body.latestStatus, 'DELIVERED');
  t.is((await w.t0.request('GET', `/v1/emails/${partial}`)).body.latestStatus, 'DELIVERED');
});
