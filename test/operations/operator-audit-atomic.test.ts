import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { ConsoleClient, consoleUser } from '../console/helpers/console-client.js';
import { acceptAudit as acceptAuditOf, refuseAudit as refuseAuditOf } from '../helpers/refuse-audit.js';

// An operator action and its audit entry are stored together (docs/operations.md, The audit
// log): when the store refuses the entry (a trigger here, as a full disk would), the action is
// not applied either and the API answers the spec's 500; a normal action writes both. Bounce
// commits batch by batch, each batch with the entry that says what it bounced. Run on SQLite
// and, with POSTHORN_TEST_STORE=postgres, on PostgreSQL.

const clock = new ManualClock(Date.UTC(2026, 10, 26, 9, 0, 0));
let w: MailWorld;
let op: string;
let wakes = 0;
const OP = 'otto@operator.example';

test.before(async () => {
  w = await startMailWorld({ clock, overrides: {
      rateLimit: { perSecond: 1_000_000 },
      campaigns: { batchWindowSeconds: 60 },
      // A pool for the domain and team pool changes (the loopback address mail leaves from anyway).
      outbound: { sources: [{ name: 'lo', localAddress: '127.0.0.1', ehloName: 'lo.sender.test' }], pools: [{ name: 'solo', sources: ['lo'] }] } as never,
    },
  });
  w.addRecipientDomain('held.example');
  w.addRecipientDomain('slow.example');
  op = (await w.t0.app.services.operatorKeys.create('ops')).token;
  await consoleUser(w.t0.app, OP, w.t0.teamId, true);
  // Counts the queue's wake-ups of the engine (the service calls engine.wake() by name).
  const engine = w.t0.app.engine;
  const wake = engine.wake.bind(engine);
  engine.wake = () => {
    wakes++;
    wake();
  };
});
test.after.always(async () => {
  await w?.close();
});

const admin = (method: string, path: string, body?: unknown) => w.t0.request(method, `/admin/v1${path}`, { key: op, body });
async function must(method: string, path: string, body?: unknown): Promise<any> {
  const res = await admin(method, path, body);
  if (res.status !== 200) throw new Error(`${method} ${path} -> ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}
async function send(to: string): Promise<string> {
  const res = await w.t0.request('POST', '/v1/emails', { body: { from: `News <news@${w.domain.name}>`, to, subject: 'Hi', text: 'Hello there' } });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  return res.body.emailId;
}
const statuses = async (id: string) => ((await w.t0.request('GET', `/v1/emails/${id}`)).body.emailEvents as { status: string }[]).map((e) => e.status);
const queued = async (query: string) => (await must('GET', `/queue/messages?limit=500&${query}`)).messages as any[];
const entries = async (n = 50) => (await w.t0.app.services.audit.list(n)).entries;
const lastAuditId = async () => (await entries(1))[0]?.id ?? 0;

const refuseAudit = (pattern?: string) => refuseAuditOf(w.t0.app, pattern);
const acceptAudit = () => acceptAuditOf(w.t0.app);

/** The spec's error for a change the store refused: 500 INTERNAL_SERVER_ERROR, nothing else said. */
function isRefused(t: any, res: { status: number; body: any }) {
  t.is(res.status, 500, JSON.stringify(res.body));
  t.is(res.body.error.code, 'INTERNAL_SERVER_ERROR');
  t.false(/refused by the test/.test(res.body.error.message), 'the store error is not shown to the client');
}

test.serial.afterEach.always(acceptAudit);

test.serial('suspend: a refused audit entry refuses the suspension (500, nothing held); a normal one stores both', async (t) => {
  const before = await lastAuditId();
  await refuseAudit();
  isRefused(t, await admin('POST', '/queue/suspensions', { destination: 'held.example', minutes: 30, reason: 'not audited' }));
  t.deepEqual((await must('GET', '/queue/suspensions')).suspensions, [], 'no suspension was stored');
  t.is(await lastAuditId(), before);
  await acceptAudit();

  const s = await must('POST', '/queue/suspensions', { destination: 'held.example', minutes: 30, reason: 'provider asked' });
  t.deepEqual((await must('GET', '/queue/suspensions')).suspensions.map((x: any) => x.id), [s.id]);
  const [entry] = await entries(1);
  t.is(entry!.action, 'queue.suspend');
  t.deepEqual(entry!.target, { suspensionId: s.id, destination: 'held.example', minutes: 30, reason: 'provider asked' });
});

test.serial('resume: a refused entry leaves the suspension on and its mail held; a normal one releases it, wakes the engine and is audited', async (t) => {
  const [s] = (await must('GET', '/queue/suspensions')).suspensions;
  const held = await send('a@held.example');
  await w.settle();
  t.deepEqual(await statuses(held), ['QUEUED']);
  const before = await lastAuditId();
  await refuseAudit();
  isRefused(t, await admin('DELETE', `/queue/suspensions/${s.id}`));
  t.deepEqual((await must('GET', '/queue/suspensions')).suspensions.map((x: any) => x.id), [s.id], 'still suspended');
  t.deepEqual((await queued('destination=held.example')).map((m) => m.state), ['suspended'], 'its mail still held');
  t.is(await lastAuditId(), before);
  await acceptAudit();

  const woken = wakes;
  await must('DELETE', `/queue/suspensions/${s.id}`);
  t.true(wakes > woken, 'the engine is woken after the commit');
  const [entry] = await entries(1);
  t.deepEqual([entry!.action, entry!.target], ['queue.resume', { suspensionId: s.id }]);
  await w.settle();
  t.deepEqual(await statuses(held), ['QUEUED', 'SENT', 'DELIVERED']);
});

test.serial('retry (bulk and one delivery): a refused entry leaves deferred mail deferred; a normal one makes it due, wakes the engine and is audited', async (t) => {
  let refuse = true;
  w.sink.setBehaviour({ onRcpt: (a) => (refuse && a.endsWith('@slow.example') ? { code: 451, message: '4.7.1 try again later' } : undefined) });
  const a = await send('a@slow.example');
  const b = await send('b@slow.example');
  await w.settle();
  const deferred = await queued('destination=slow.example&state=deferred');
  t.is(deferred.length, 2);
  const due = new Map(deferred.map((m) => [m.deliveryId, m.nextAttemptAt]));
  const before = await lastAuditId();
  refuse = false;

  await refuseAudit();
  isRefused(t, await admin('POST', '/queue/retry', { destination: 'slow.example' }));
  const one = deferred.find((m) => m.emailId === a)!.deliveryId as number;
  await t.throwsAsync(w.t0.app.services.queue.retryDelivery('cli', one), { any: true, message: /refused by the test/ });
  const after = await queued('destination=slow.example');
  t.deepEqual(after.map((m) => [m.state, m.nextAttemptAt]), deferred.map((m) => ['deferred', due.get(m.deliveryId)]), 'still deferred, due as before');
  t.is(await lastAuditId(), before);
  await acceptAudit();

  let woken = wakes;
  await w.t0.app.services.queue.retryDelivery('cli', one);
  t.true(wakes > woken);
  let [entry] = await entries(1);
  t.deepEqual([entry!.action, entry!.actor, entry!.target], ['queue.retry', 'cli', { deliveryId: one, emailId: a, destination: 'slow.example', retried: 1 }]);
  await w.settle();
  t.deepEqual(await statuses(a), ['QUEUED', 'SENT', 'DELIVERY_DELAYED', 'DELIVERED']);

  woken = wakes;
  t.deepEqual(await must('POST', '/queue/retry', { destination: 'slow.example' }), { retried: 1, held: 0 });
  t.true(wakes > woken);
  [entry] = await entries(1);
  t.deepEqual([entry!.action, entry!.target], ['queue.retry', { destination: 'slow.example', retried: 1 }]);
  await w.settle();
  t.deepEqual(await statuses(b), ['QUEUED', 'SENT', 'DELIVERY_DELAYED', 'DELIVERED']);
  w.sink.setBehaviour({ onRcpt: undefined });
});

test.serial('give up on one delivery: a refused entry leaves it queued and not leased (no FAILED); a normal one fails it and is audited', async (t) => {
  await must('POST', '/queue/suspensions', { destination: 'held.example', minutes: 30, reason: 'hold for purge' });
  const id = await send('purge@held.example');
  await w.settle();
  const [m] = await queued('destination=held.example');
  const before = await lastAuditId();
  await refuseAudit();
  await t.throwsAsync(w.t0.app.services.queue.giveUp('cli', m.deliveryId), { any: true, message: /refused by the test/ });
  t.deepEqual((await queued('destination=held.example')).map((x) => [x.deliveryId, x.state]), [[m.deliveryId, 'suspended']], 'queued, its lease given back');
  t.deepEqual(await statuses(id), ['QUEUED']);
  t.is(await lastAuditId(), before);
  await acceptAudit();

  await w.t0.app.services.queue.giveUp('cli', m.deliveryId);
  t.deepEqual(await statuses(id), ['QUEUED', 'FAILED']);
  const [entry] = await entries(1);
  t.deepEqual([entry!.action, entry!.target], ['queue.purge', { deliveryId: m.deliveryId, emailId: id, destination: 'held.example' }]);
});

test.serial('bounce: a refused entry fails nothing and leaves no lease behind; a normal bounce fails the mail and is audited with its count', async (t) => {
  const ids = [await send('x1@held.example'), await send('x2@held.example'), await send('x3@held.example')];
  await w.settle();
  const before = await lastAuditId();
  await refuseAudit();
  isRefused(t, await admin('POST', '/queue/bounce', { destination: 'held.example', reason: 'not audited' }));
  t.deepEqual((await queued('destination=held.example')).map((m) => m.state), ['suspended', 'suspended', 'suspended'], 'still queued, not leased');
  for (const id of ids) t.deepEqual(await statuses(id), ['QUEUED']);
  t.is(await lastAuditId(), before);
  await acceptAudit();

  t.deepEqual(await must('POST', '/queue/bounce', { destination: 'held.example', reason: 'closed account' }), { bounced: 3 });
  for (const id of ids) t.deepEqual(await statuses(id), ['QUEUED', 'FAILED']);
  const [entry] = await entries(1);
  t.deepEqual([entry!.action, entry!.target], ['queue.bounce', { destination: 'held.example', reason: 'closed account', bounced: 3 }]);
  // Nothing matched: nothing changed, the attempt is still on record.
  t.deepEqual(await must('POST', '/queue/bounce', { destination: 'held.example', reason: 'again' }), { bounced: 0 });
  t.like((await entries(1))[0]!.target, { reason: 'again', bounced: 0 });
});

test.serial('bounce over more than one batch: each batch of 500 commits with an entry saying what it bounced; the batch whose entry is refused is not bounced', async (t) => {
  const book = (await w.t0.request('POST', '/v1/contactBooks', { body: { name: 'Big' } })).body.id;
  const contacts = Array.from({ length: 501 }, (_, i) => ({ email: `big${i}@held.example` }));
  t.is((await w.t0.request('POST', `/v1/contactBooks/${book}/contacts/bulk`, { body: contacts })).status, 200);
  const doc = JSON.stringify({ type: 'doc', content: [{ type: 'paragraph', content: [{ type: 'text', text: 'Hello' }] }] });
  const campaign = (
    await w.t0.request('POST', '/v1/campaigns', { body: { name: 'Big', from: `news@${w.domain.name}`, subject: 'Big', contactBookId: book, content: doc, sendNow: true, batchSize: 1000 } })
  ).body;
  await w.t0.app.runCampaigns();
  await w.settle();
  t.is((await queued(`campaignId=${campaign.id}`)).length, 500, 'a page of the 501 held');
  const before = await lastAuditId();
  // The first batch's entry says 500, the second's 1: only the second is refused.
  await refuseAudit('%"bounced":1}');
  isRefused(t, await admin('POST', '/queue/bounce', { campaignId: campaign.id, reason: 'runaway' }));
  const left = await queued(`campaignId=${campaign.id}`);
  t.deepEqual(left.map((m) => m.state), ['suspended'], 'the refused batch is still queued, its lease given back');
  const written = (await entries(5)).filter((e) => e.id > before);
  t.deepEqual(written.map((e) => [e.action, e.target]), [['queue.bounce', { campaignId: campaign.id, reason: 'runaway', bounced: 500 }]]);
  await acceptAudit();

  t.deepEqual(await must('POST', '/queue/bounce', { campaignId: campaign.id, reason: 'runaway' }), { bounced: 1 });
  t.deepEqual(await queued(`campaignId=${campaign.id}`), []);
  t.like((await entries(1))[0]!.target, { campaignId: campaign.id, bounced: 1 });
  t.deepEqual(await statuses(left[0].emailId), ['QUEUED', 'FAILED']);
});

test.serial('teams (API): a refused entry refuses the create and the update (500); normal ones record the stored, trimmed name', async (t) => {
  const before = await lastAuditId();
  const teamsBefore = await w.t0.app.services.teams.list();
  await refuseAudit();
  isRefused(t, await admin('POST', '/teams', { name: 'Never Made' }));
  isRefused(t, await admin('PATCH', `/teams/${w.t0.teamId}`, { name: 'Never Renamed' }));
  t.deepEqual(await w.t0.app.services.teams.list(), teamsBefore, 'no team created, none renamed');
  t.is(await lastAuditId(), before);
  await acceptAudit();

  const created = await must('POST', '/teams', { name: '  Initech  ', rateLimit: 5 });
  t.is(created.name, 'Initech');
  t.deepEqual((await entries(1))[0]!.target, { teamId: created.id, name: 'Initech' });
  const renamed = await must('PATCH', `/teams/${created.id}`, { name: '  Initrode ', rateLimit: null });
  t.is(renamed.name, 'Initrode');
  const [entry] = await entries(1);
  t.deepEqual([entry!.action, entry!.target], ['team.update', { teamId: created.id, name: 'Initrode', rateLimit: null }]);
});

test.serial('teams (console): a refused entry refuses the create and the update; normal ones record the stored, trimmed name under the console user', async (t) => {
  const console = new ConsoleClient(w.t0.baseUrl);
  t.is((await console.signIn(OP)).status, 303);
  const opId = (await w.t0.app.services.users.list()).find((u) => u.email === OP)!.id;
  const before = await lastAuditId();
  const teamsBefore = await w.t0.app.services.teams.list();
  await refuseAudit();
  t.is((await console.post('/console/operator/teams', { name: 'Console Never', rateLimit: '' })).status, 500);
  t.is((await console.post(`/console/operator/teams/${w.t0.teamId}`, { name: 'Console Never', rateLimit: '' })).status, 500);
  t.deepEqual(await w.t0.app.services.teams.list(), teamsBefore);
  t.is(await lastAuditId(), before);
  await acceptAudit();

  t.is((await console.post('/console/operator/teams', { name: ' Hooli ', rateLimit: '7' })).status, 303);
  const hooli = (await w.t0.app.services.teams.list()).find((x) => x.name === 'Hooli')!;
  t.truthy(hooli);
  t.is((await console.post(`/console/operator/teams/${hooli.id}`, { name: 'Hooli XYZ  ', rateLimit: '' })).status, 303);
  t.deepEqual(
    (await entries(2)).map((e) => [e.action, e.target, e.consoleUserId]),
    [
      ['team.update', { teamId: hooli.id, name: 'Hooli XYZ', rateLimit: null }, opId],
      ['team.create', { teamId: hooli.id, name: 'Hooli' }, opId],
    ],
  );
});

test.serial('domain and team pools (API): a refused entry leaves the pool as it was; normal changes record the pool as stored', async (t) => {
  const before = await lastAuditId();
  await refuseAudit();
  isRefused(t, await admin('PATCH', `/domains/${w.domain.id}`, { pool: 'solo' }));
  isRefused(t, await admin('PATCH', `/teams/${w.t0.teamId}`, { pool: 'solo' }));
  t.is((await w.t0.app.services.domains.findForCli(null, String(w.domain.id)))!.pool, null);
  t.is((await w.t0.app.services.teams.get(w.t0.teamId))!.pool, null);
  t.is(await lastAuditId(), before);
  await acceptAudit();

  t.like(await must('PATCH', `/domains/${w.domain.id}`, { pool: 'solo' }), { pool: 'solo' });
  t.deepEqual((await entries(1))[0]!.target, { domainId: w.domain.id, pool: 'solo' });
  t.like(await must('PATCH', `/teams/${w.t0.teamId}`, { pool: 'default' }), { pool: null });
  t.deepEqual((await entries(1))[0]!.target, { teamId: w.t0.teamId, pool: null }, '"default" is stored, and recorded, as null');
  t.like(await must('PATCH', `/domains/${w.domain.id}`, { pool: null }), { pool: null });
});
