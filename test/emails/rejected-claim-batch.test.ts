import test from 'ava';
import { claimBatchWorld } from './helpers/claim-batch-world.js';
import type { WebhookReceiver } from '../webhooks/webhook-receiver.js';
import { twoTeams } from '../helpers/two-teams.js';

// One claim that finds many groups whose sending domain was deleted (two teams' mail): every
// row ends REJECTED with its event and its webhook, on its own team's endpoint, in one store
// write for all of them (not one per group), and the group that may still send is handed on.

const world = claimBatchWorld(test);

const A_EMAILS = 10; // to two recipient domains each: 20 groups
const B_EMAILS = 5;

test('many groups rejected in one claim: all REJECTED with their events and webhooks, per team, in one write', async (t) => {
  const { w, hookA, hookB } = world;
  const { a, b } = await twoTeams(w.t0, { a: { domains: ['gone-a.dev'] }, b: { domains: ['gone-b.dev'] } });
  const keyB = b.key;
  const [goneA, goneB] = [a.domains[0]!, b.domains[0]!];
  for (const [url, key] of [[hookA.url, w.t0.key], [hookB.url, keyB]] as const) {
    const hook = await w.t0.request('POST', '/v1/webhooks', { body: { url, eventTypes: ['email.rejected'] }, key });
    t.is(hook.status, 200, JSON.stringify(hook.body));
  }
  await w.t0.app.engine.stop();

  const send = async (body: Record<string, unknown>, key: string) => {
    const res = await w.t0.request('POST', '/v1/emails', { body: { subject: 'Hello', text: 'Hi', ...body }, key });
    if (res.status !== 200) throw new Error(JSON.stringify(res.body));
    return res.body.emailId as string;
  };
  const idsA: string[] = [];
  for (let i = 0; i < A_EMAILS; i++) idsA.push(await send({ from: 'news@gone-a.dev', to: [`a${i}@example.net`, `a${i}@example.org`] }, w.t0.key));
  const idsB: string[] = [];
  for (let i = 0; i < B_EMAILS; i++) idsB.push(await send({ from: 'news@gone-b.dev', to: `b${i}@example.net` }, keyB));
  const kept = await send({ from: `news@${w.domain.name}`, to: 'kept@example.net' }, w.t0.key);
  t.is((await w.t0.request('DELETE', `/v1/domains/${goneA.id}`)).status, 200);
  t.is((await w.t0.request('DELETE', `/v1/domains/${goneB.id}`, { key: keyB })).status, 200);

  const svc = w.t0.app.services.deliveries;
  const before = world.writes();
  const groups = await svc.claim(100);
  const writes = world.writes() - before;
  t.deepEqual(groups.map((g) => g.email.id), [kept], 'only the group that may send is handed on');
  // A write per group would be 25 at least. One for all of them: the claim's UPDATE ... RETURNING,
  // the results, and what runs beside them (the webhook dispatcher, woken by the results, claims).
  t.true(writes <= 8, `${writes} write transactions for one claim that rejected ${2 * A_EMAILS + B_EMAILS} groups`);

  const rejectedOf = async (id: string, key: string) => {
    const e = (await w.t0.request('GET', `/v1/emails/${id}`, { key })).body;
    t.is(e.latestStatus, 'REJECTED', id);
    return (e.emailEvents as any[]).filter((x) => x.status === 'REJECTED').map((x) => x.data.recipient as string).sort();
  };
  for (const [i, id] of idsA.entries()) t.deepEqual(await rejectedOf(id, w.t0.key), [`a${i}@example.net`, `a${i}@example.org`]);
  for (const [i, id] of idsB.entries()) t.deepEqual(await rejectedOf(id, keyB), [`b${i}@example.net`]);
  // Another team's email is not found under the wrong key.
  t.is((await w.t0.request('GET', `/v1/emails/${idsB[0]}`, { key: w.t0.key })).status, 404);

  // One webhook per recipient, each on its own team's endpoint.
  await Promise.all([hookA.waitFor(2 * A_EMAILS), hookB.waitFor(B_EMAILS)]);
  await w.t0.app.services.events.settled();
  const calls = (r: WebhookReceiver) => r.calls.map((c) => `${c.json.type} ${c.json.data.id} ${c.json.data.recipient}`).sort();
  t.deepEqual(calls(hookA), idsA.flatMap((id, i) => [`email.rejected ${id} a${i}@example.net`, `email.rejected ${id} a${i}@example.org`]).sort());
  t.deepEqual(calls(hookB), idsB.map((id, i) => `email.rejected ${id} b${i}@example.net`).sort());

  // The kept group goes out once handed back.
  await svc.releaseGroups(groups);
  w.t0.app.engine.start();
  await w.settle();
  t.is(w.sink.messages.filter((m) => m.rcptTo.includes('kept@example.net')).length, 1);
  t.is((await w.t0.request('GET', `/v1/emails/${kept}`)).body.latestStatus, 'DELIVERED');
});
