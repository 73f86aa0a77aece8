import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { startWebhookReceiver, type WebhookReceiver } from '../webhooks/webhook-receiver.js';
import { OpenApiCheck } from '../proof/helpers/openapi-check.js';
import { until } from '../helpers/until.js';

// The operator API (/admin/v1) end to end: who may call it, and what each action does to real
// deliveries to the test MX: suspensions that hold mail (across a restart), retry, bounce by
// campaign with its events and webhooks, the trace of a real STARTTLS session, teams, the
// audit log and health.

const clock = new ManualClock(Date.UTC(2026, 10, 25, 9, 0, 0));
let w: MailWorld;
let receiver: WebhookReceiver;
let op: string;
let opId: number;

const doc = JSON.stringify({ type: 'doc', content: [{ type: 'paragraph', content: [{ type: 'text', text: 'Hello' }] }] });

test.before(async () => {
  w = await startMailWorld({ clock, overrides: { rateLimit: { perSecond: 1_000_000 }, webhooks: { allowPrivate: true }, campaigns: { batchWindowSeconds: 60 } } });
  w.addRecipientDomain('held.example');
  w.addRecipientDomain('other.example');
  receiver = await startWebhookReceiver();
  const key = await w.t0.app.services.operatorKeys.create('ops');
  op = key.token;
  opId = key.id;
});
test.after.always(async () => {
  await w?.close();
  await receiver?.close();
});

const admin = (method: string, path: string, body?: unknown, key: string | null = op) => w.t0.request(method, `/admin/v1${path}`, { key, body });
async function must(method: string, path: string, body?: unknown): Promise<any> {
  const res = await admin(method, path, body);
  if (res.status !== 200) throw new Error(`${method} ${path} -> ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}
async function send(to: string, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await w.t0.request('POST', '/v1/emails', { body: { from: `News <news@${w.domain.name}>`, to, subject: 'Hi', text: 'Hello there', ...extra } });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  return res.body.emailId;
}
const statuses = async (id: string) => ((await w.t0.request('GET', `/v1/emails/${id}`)).body.emailEvents as { status: string }[]).map((e) => e.status);
const sentTo = (rcpt: string) => w.sink.messages.filter((m) => m.rcptTo.includes(rcpt)).length;

/** One valid request per operator route, so the walls are tried on every one. */
const EXAMPLES: Record<string, { method: string; path: string; body?: unknown }> = {
  'GET /queue': { method: 'GET', path: '/queue' },
  'GET /queue/messages': { method: 'GET', path: '/queue/messages?limit=5' },
  'GET /queue/suspensions': { method: 'GET', path: '/queue/suspensions' },
  'POST /queue/suspensions': { method: 'POST', path: '/queue/suspensions', body: { destination: 'nowhere.example', minutes: 1, reason: 'wall test' } },
  'DELETE /queue/suspensions/:suspensionId': { method: 'DELETE', path: '/queue/suspensions/su_doesnotexist0000000' },
  'DELETE /queue/shaping-holds/:holdId': { method: 'DELETE', path: '/queue/shaping-holds/sh_doesnotexist0000000' },
  'POST /queue/retry': { method: 'POST', path: '/queue/retry', body: { destination: 'nowhere.example' } },
  'POST /queue/bounce': { method: 'POST', path: '/queue/bounce', body: { destination: 'nowhere.example', reason: 'wall test' } },
  'GET /emails/:emailId/trace': { method: 'GET', path: '/emails/em_doesnotexist000000000/trace' },
  'GET /teams': { method: 'GET', path: '/teams' },
  'POST /teams': { method: 'POST', path: '/teams', body: { name: 'wall team' } },
  'PATCH /teams/:teamId': { method: 'PATCH', path: '/teams/1', body: { rateLimit: null } },
  'PATCH /domains/:domainId': { method: 'PATCH', path: '/domains/1', body: { pool: null } },
  'GET /audit': { method: 'GET', path: '/audit' },
  'GET /health': { method: 'GET', path: '/health' },
};

test.serial('only operator keys may call the operator API: team keys get 403 on every route, no key and bad keys 401; operator keys get 403 on the team API', async (t) => {
  const routes = w.t0.app.adminRoutes.filter((r) => r.access === 'operator').map((r) => `${r.method} ${r.path}`);
  t.deepEqual(routes.filter((r) => !EXAMPLES[r]).sort(), [], 'every operator route has an example here');
  const sending = await w.t0.request('POST', '/v1/apiKeys', { body: { name: 'sending', permission: 'SENDING' } });
  const revoked = await w.t0.app.services.operatorKeys.create('gone');
  await w.t0.app.services.operatorKeys.revoke(revoked.id);
  for (const [name, ex] of Object.entries(EXAMPLES)) {
    for (const [who, key, status] of [
      ['no key', null, 401],
      ['malformed key', 'nope', 401],
      ['revoked operator key', revoked.token, 401],
      ['team FULL key', w.t0.key, 403],
      ['team SENDING key', sending.body.token, 403],
    ] as const) {
      const res = await admin(ex.method, ex.path, ex.body, key);
      t.is(res.status, status, `${who}: ${name}: ${JSON.stringify(res.body)}`);
      t.regex(res.body?.error?.code ?? '', status === 401 ? /^UNAUTHORIZED$/ : /^FORBIDDEN$/, `${who}: ${name}`);
      t.is(res.headers.get('x-ratelimit-limit'), null, 'the operator API is not rate limited');
    }
    const ok = await admin(ex.method, ex.path, ex.body);
    t.false([401, 403].includes(ok.status), `operator key: ${name}: ${ok.status} ${JSON.stringify(ok.body)}`);
  }
  // What the operator's examples created goes away again.
  for (const s of (await must('GET', '/queue/suspensions')).suspensions) await must('DELETE', `/queue/suspensions/${s.id}`);
  const onTeamApi = await w.t0.request('GET', '/v1/emails', { key: op });
  t.is(onTeamApi.status, 403);
  t.regex(onTeamApi.body.error.message, /operator key may call only/);
  // The operator document is public, like the team API's.
  t.is((await admin('GET', '/openapi.json', undefined, null)).status, 200);
});

test.serial('validation: a selector is required, minutes and reasons are checked, unknown fields are refused (400 naming the field)', async (t) => {
  const cases: [string, string, unknown, RegExp][] = [
    ['POST', '/queue/suspensions', { minutes: 5, reason: 'x' }, /at least one of destination/],
    ['POST', '/queue/suspensions', { destination: 'a.example', minutes: 0, reason: 'x' }, /^minutes: /],
    ['POST', '/queue/suspensions', { destination: 'a.example', minutes: 5, reason: '' }, /^reason: /],
    ['POST', '/queue/suspensions', { destination: 'not a domain', minutes: 5, reason: 'x' }, /^destination: /],
    ['POST', '/queue/suspensions', { destination: 'a.example', minutes: 5, reason: 'x', extra: 1 }, /extra/],
    ['POST', '/queue/retry', {}, /at least one of destination/],
    ['POST', '/queue/retry', { emailIds: [] }, /^emailIds: /],
    // Selectors given blank select nothing to act on: refused by name, never "all", never "0 done".
    ['POST', '/queue/retry', { emailIds: ['em_x', ' '] }, /^emailIds\[1\]: /],
    ['POST', '/queue/retry', { destination: ' ' }, /^destination: /],
    ['POST', '/queue/bounce', { campaignId: ' ', reason: 'x' }, /^campaignId: /],
    ['POST', '/queue/suspensions', { campaignId: ' ', minutes: 5, reason: 'x' }, /^campaignId: /],
    ['POST', '/queue/bounce', { destination: 'a.example' }, /^reason: /],
    ['GET', '/queue/messages?state=lost', undefined, /^state: /],
    ['GET', '/queue/messages?cursor=zzz', undefined, /^cursor: /],
    ['GET', '/audit?limit=0', undefined, /^limit: /],
    ['PATCH', '/teams/1', { rateLimit: 0 }, /rateLimit/],
    ['POST', '/teams', { name: '' }, /^name: /],
    // A suspension outlives the request: one for a team that does not exist would hold the mail of a team made later with that id.
    ['POST', '/queue/suspensions', { teamId: 999999, minutes: 5, reason: 'x' }, /^teamId: there is no team 999999/],
  ];
  for (const [method, path, body, message] of cases) {
    const res = await admin(method, path, body);
    t.is(res.status, 400, `${method} ${path} ${JSON.stringify(body)}: ${JSON.stringify(res.body)}`);
    t.is(res.body.error.code, 'BAD_REQUEST');
    t.regex(res.body.error.message, message, `${method} ${path}`);
  }
  t.is((await admin('PATCH', '/teams/999999', { name: 'x' })).status, 404);
  t.is((await admin('DELETE', '/queue/suspensions/su_nothere')).status, 404);
  t.is((await admin('GET', '/emails/em_nothere/trace')).status, 404);
  t.false((await must('GET', '/queue/suspensions')).suspensions.some((s: { teamId: number | null }) => s.teamId === 999999), 'the refused suspension was not made');
});

test.serial('a suspension holds matching mail without attempting it, survives a restart, and DELETE releases it at once', async (t) => {
  const suspension = await must('POST', '/queue/suspensions', { destination: 'HELD.example', minutes: 60, reason: 'provider asked us to slow down' });
  t.is(suspension.destination, 'held.example');
  const held = await send('a@held.example');
  const free = await send('b@other.example');
  await w.settle();
  t.is(sentTo('a@held.example'), 0, 'no attempt to the suspended destination');
  t.is(sentTo('b@other.example'), 1, 'other destinations flow');
  t.deepEqual(await statuses(held), ['QUEUED'], 'no SENT, no DELIVERY_DELAYED');
  const summary = await must('GET', '/queue');
  t.is(summary.totals.suspended, 1);
  const row = summary.destinations.find((d: any) => d.destination === 'held.example');
  t.is(row.suspended, 1);
  t.is(row.suspension.id, suspension.id);
  t.is(row.suspension.reason, 'provider asked us to slow down');
  const msgs = await must('GET', '/queue/messages?destination=held.example');
  t.deepEqual(
    msgs.messages.map((m: any) => [m.emailId, m.state, m.attempts]),
    [[held, 'suspended', 0]],
  );
  t.truthy(free);

  await w.restart();
  w.t0.app.engine.wake();
  await w.settle();
  t.is(sentTo('a@held.example'), 0, 'still held after a restart');
  t.deepEqual((await must('GET', '/queue/suspensions')).suspensions.map((s: any) => s.id), [suspension.id]);

  const ended = await must('DELETE', `/queue/suspensions/${suspension.id}`);
  t.is(ended.id, suspension.id);
  await w.settle();
  t.is(sentTo('a@held.example'), 1, 'delivered once released');
  t.deepEqual(await statuses(held), ['QUEUED', 'SENT', 'DELIVERED']);
  t.deepEqual((await must('GET', '/queue/suspensions')).suspensions, []);
});

test.serial('a new suspension counts as held at once only the queued mail it holds, not mail another suspension holds', async (t) => {
  // With the engine stopped nothing parks held mail at a claim, so mail of the first suspension
  // is still due when the second one is made.
  await w.t0.app.engine.stop();
  t.teardown(() => w.t0.app.engine.start());
  const first = await must('POST', '/queue/suspensions', { destination: 'held.example', minutes: 60, reason: 'first' });
  t.is(first.parked, 0);
  await send('p1@held.example');
  await send('p2@other.example');
  await send('p3@other.example');
  const second = await must('POST', '/queue/suspensions', { destination: 'other.example', minutes: 60, reason: 'second' });
  t.is(second.parked, 2, 'the two to other.example, not the one to held.example');
  for (const s of [first, second]) await must('DELETE', `/queue/suspensions/${s.id}`);
  w.t0.app.engine.start();
  await w.settle();
  t.deepEqual(['p1@held.example', 'p2@other.example', 'p3@other.example'].map(sentTo), [1, 1, 1]);
});

test.serial('a suspension that runs out releases its mail by itself (the injected clock moves past it)', async (t) => {
  await must('POST', '/queue/suspensions', { destination: 'held.example', minutes: 5, reason: 'short hold' });
  const id = await send('c@held.example');
  await w.settle();
  t.is(sentTo('c@held.example'), 0);
  clock.advance(5 * 60_000 + 1);
  w.t0.app.engine.wake();
  await w.settle();
  t.is(sentTo('c@held.example'), 1);
  t.deepEqual(await statuses(id), ['QUEUED', 'SENT', 'DELIVERED']);
});

test.serial('retry makes deferred mail due now; messages filter by state', async (t) => {
  let refuse = true;
  w.sink.setBehaviour({ onRcpt: (a) => (refuse && a.startsWith('later@') ? { code: 451, message: '4.7.1 try again later' } : undefined) });
  const id = await send('later@other.example');
  await w.settle();
  t.deepEqual(await statuses(id), ['QUEUED', 'SENT', 'DELIVERY_DELAYED']);
  const deferred = await must('GET', '/queue/messages?state=deferred');
  t.deepEqual(
    deferred.messages.map((m: any) => m.emailId),
    [id],
  );
  t.is(deferred.messages[0].lastReply.code, 451);
  refuse = false;
  const r = await must('POST', '/queue/retry', { emailIds: [id] });
  t.is(r.retried, 1);
  await w.settle();
  t.deepEqual(await statuses(id), ['QUEUED', 'SENT', 'DELIVERY_DELAYED', 'DELIVERED']);
  w.sink.setBehaviour({ onRcpt: undefined });
});

test.serial('retry leaves a scheduled send for its time: a retry by destination, team or email does not send it early', async (t) => {
  const at = new Date(clock.nowMs() + 60 * 60_000).toISOString();
  const id = await send('scheduled@other.example', { scheduledAt: at });
  await w.settle();
  for (const selector of [{ destination: 'other.example' }, { teamId: w.t0.teamId }, { emailIds: [id] }]) {
    t.is((await must('POST', '/queue/retry', selector)).retried, 0, JSON.stringify(selector));
  }
  await w.settle();
  t.is(sentTo('scheduled@other.example'), 0, 'not sent before its scheduled time');
  t.deepEqual(await statuses(id), ['SCHEDULED']);
  t.is((await w.t0.request('GET', `/v1/emails/${id}`)).body.scheduledAt, at);
  clock.advance(60 * 60_000);
  w.t0.app.engine.wake();
  await w.settle();
  t.is(sentTo('scheduled@other.example'), 1, 'sent at its time');
});

test.serial('retry of one delivery (the CLI and the console): a scheduled send keeps its time, one on the wire is left alone; each says why and is not audited', async (t) => {
  const queue = w.t0.app.services.queue;
  const audited = async () => (await w.t0.app.services.audit.list(1)).entries[0]?.id;
  const at = new Date(clock.nowMs() + 60 * 60_000).toISOString();
  const id = await send('later-one@other.example', { scheduledAt: at });
  await w.settle();
  const [scheduled] = (await queue.messages({ destination: 'other.example', state: 'scheduled' }, 10)).messages.filter((m) => m.emailId === id);
  const before = await audited();
  await t.throwsAsync(queue.retryDelivery('cli', scheduled!.deliveryId), { message: new RegExp(`delivery ${scheduled!.deliveryId} is scheduled for ${at}`) });
  t.is(await audited(), before, 'nothing retried, nothing audited');
  w.t0.app.engine.wake();
  await w.settle();
  t.is(sentTo('later-one@other.example'), 0, 'not sent before its scheduled time');
  t.deepEqual(await statuses(id), ['SCHEDULED']);

  // On the wire: the MX holds its DATA reply; a retry neither claims nor records anything.
  const released: (() => void)[] = [];
  w.sink.setBehaviour({ holdData: () => new Promise<void>((r) => released.push(r)) });
  try {
    const wire = await send('wire@other.example');
    await until(() => released.length === 1);
    const [inflight] = (await queue.messages({ destination: 'other.example', state: 'inflight' }, 10)).messages.filter((m) => m.emailId === wire);
    await t.throwsAsync(queue.retryDelivery('cli', inflight!.deliveryId), { message: new RegExp(`delivery ${inflight!.deliveryId} is being attempted right now`) });
    t.is(await audited(), before);
    released.shift()!();
    await w.settle();
    t.is(sentTo('wire@other.example'), 1);
  } finally {
    w.sink.setBehaviour({ holdData: undefined });
    for (const r of released) r();
  }
  clock.advance(60 * 60_000);
  w.t0.app.engine.wake();
  await w.settle();
  t.is(sentTo('later-one@other.example'), 1, 'sent at its time');
});

test.serial('retry of one delivery a suspension holds: the answer names the suspension, and the mail stays held until it is resumed', async (t) => {
  const queue = w.t0.app.services.queue;
  const other = await must('POST', '/queue/suspensions', { destination: 'elsewhere.example', minutes: 10, reason: 'not this one' });
  const ofCampaign = await must('POST', '/queue/suspensions', { destination: 'other.example', campaignId: 'cmp_not_this_one', minutes: 10, reason: 'not this one either' });
  const s = await must('POST', '/queue/suspensions', { destination: 'other.example', minutes: 10, reason: 'held for the retry test' });
  const id = await send('held-one@other.example');
  await w.settle();
  const [held] = (await queue.messages({ destination: 'other.example', state: 'suspended' }, 50)).messages.filter((m) => m.emailId === id);
  t.like(await queue.retryDelivery('cli', held!.deliveryId), { retried: 1, heldBy: { id: s.id, reason: 'held for the retry test', destination: 'other.example' } });
  w.t0.app.engine.wake();
  await w.settle();
  t.is(sentTo('held-one@other.example'), 0, 'still held');
  // The API's retry by selector counts what stays held apart.
  t.deepEqual(await must('POST', '/queue/retry', { emailIds: [id] }), { retried: 1, held: 1 });
  await must('DELETE', `/queue/suspensions/${s.id}`);
  await w.settle();
  t.is(sentTo('held-one@other.example'), 1, 'sent once resumed');
  for (const x of [other, ofCampaign]) await must('DELETE', `/queue/suspensions/${x.id}`);
});

test.serial('bounce by campaign fails its queued mail with the reason, as FAILED events and webhooks; other mail is untouched', async (t) => {
  const hook = await w.t0.request('POST', '/v1/webhooks', { body: { url: receiver.url, eventTypes: ['email.failed'] } });
  t.is(hook.status, 200);
  const book = (await w.t0.request('POST', '/v1/contactBooks', { body: { name: 'Runaway' } })).body.id;
  const contacts = Array.from({ length: 5 }, (_, i) => ({ email: `runaway${i}@held.example` }));
  await w.t0.request('POST', `/v1/contactBooks/${book}/contacts/bulk`, { body: contacts });
  const campaign = (
    await w.t0.request('POST', '/v1/campaigns', {
      body: { name: 'Runaway', from: `news@${w.domain.name}`, subject: 'Oops', contactBookId: book, content: doc, batchSize: 100 },
    })
  ).body;
  // Held first, so the campaign's mail is queued and not on the wire. A draft until then: once
  // scheduled, the runner's own tick (every second) may start it at any moment.
  await must('POST', '/queue/suspensions', { campaignId: campaign.id, minutes: 60, reason: 'runaway campaign' });
  t.is((await w.t0.request('POST', `/v1/campaigns/${campaign.id}/schedule`, { body: {} })).status, 200);
  const bystander = await send('bystander@held.example');
  await w.t0.app.runCampaigns();
  await w.settle();
  t.is(sentTo('bystander@held.example'), 1, 'a campaign suspension holds only that campaign');
  const r = await must('POST', '/queue/bounce', { campaignId: campaign.id, reason: 'sent by mistake' });
  t.is(r.bounced, 5);
  await w.t0.app.webhookDispatcher.whenIdle();
  const calls = await receiver.waitFor(5);
  t.is(calls.length, 5);
  t.true(calls.every((c) => c.json.type === 'email.failed' && /bounced by the operator: sent by mistake/.test(c.json.data.failed.reason)));
  const c = (await w.t0.request('GET', `/v1/campaigns/${campaign.id}`)).body;
  t.is(c.total, 5);
  t.is(sentTo('runaway0@held.example'), 0);
  const queued = await must('GET', `/queue/messages?campaignId=${campaign.id}`);
  t.deepEqual(queued.messages, []);
  t.truthy(bystander);
});

test.serial('the trace of an attempt: MX and addresses, TLS version, cipher and verdict, and the SMTP transcript without the body', async (t) => {
  const id = await send('traced@other.example', { subject: 'secret subject line', text: 'a body that must never be traced' });
  await w.settle();
  const trace = await must('GET', `/emails/${id}/trace`);
  t.is(trace.emailId, id);
  t.is(trace.attempts.length, 1);
  const a = trace.attempts[0];
  t.is(a.mxHost, 'mx.sink.test');
  t.regex(a.address, /^127\.0\.0\.1:\d+$/);
  t.regex(a.source, /^(::ffff:)?127\.0\.0\.1$/);
  t.regex(a.tls.version, /^TLSv1\.[23]$/);
  t.truthy(a.tls.cipher);
  t.true(a.tls.verified, 'the sink certificate is trusted through outbound.caFile');
  t.is(a.tls.subject, 'mx.sink.test');
  const lines = a.transcript.map((l: any) => `${l.direction} ${l.line}`);
  for (const re of [/^server 220 /, /^client EHLO /, /^client STARTTLS/, /^server 220 /, /^client MAIL FROM:<bounces\+/, /^client RCPT TO:<traced@other\.example>/, /^client DATA/, /^server 250 /]) {
    t.true(lines.some((l: string) => re.test(l)), `${re} in\n${lines.join('\n')}`);
  }
  t.false(JSON.stringify(trace).includes('must never be traced'), 'the body is never recorded');
  t.false(JSON.stringify(trace).includes('secret subject line'), 'nor the headers');
  t.deepEqual(a.results.map((r: any) => [r.recipient, r.outcome, r.code]), [['traced@other.example', 'delivered', 250]]);
  // The transcript's timestamps are the injected clock's (a reused session's opening is older).
  t.true(a.transcript.every((l: any) => Date.parse(l.at) <= clock.nowMs() && Date.parse(l.at) >= Date.UTC(2026, 10, 25, 9, 0, 0)));
});

test.serial('teams: create, list, rename and rate limit; the audit log names the key, action and target, newest first, cursor paginated', async (t) => {
  const created = await must('POST', '/teams', { name: 'Globex', rateLimit: 25 });
  t.is(created.name, 'Globex');
  t.is(created.rateLimit, 25);
  const patched = await must('PATCH', `/teams/${created.id}`, { name: 'Globex Inc', rateLimit: null });
  t.deepEqual([patched.name, patched.rateLimit], ['Globex Inc', null]);
  t.true((await must('GET', '/teams')).teams.some((x: any) => x.id === created.id && x.name === 'Globex Inc'));
  // A new team gets its starter templates like one made with the CLI.
  const key = await w.t0.app.services.apiKeys.create(created.id, { name: 'k' });
  t.true(((await w.t0.request('GET', '/v1/templates', { key: key.token })).body.templates ?? []).length > 0);

  const first = await must('GET', '/audit?limit=2');
  t.is(first.entries.length, 2);
  t.deepEqual(
    first.entries.map((e: any) => e.action),
    ['team.update', 'team.create'],
  );
  t.is(first.entries[0].keyId, opId);
  t.regex(first.entries[0].actor, /^key \d+ \(ops\)$/);
  t.is(first.entries[0].target.teamId, created.id);
  const next = await must('GET', `/audit?limit=50&cursor=${first.nextCursor}`);
  const actions = next.entries.map((e: any) => e.action);
  t.true(actions.includes('queue.bounce') && actions.includes('queue.retry') && actions.includes('queue.suspend') && actions.includes('queue.resume'));
  t.true(next.entries.every((e: any, i: number, all: any[]) => i === 0 || all[i - 1].id > e.id), 'newest first');
  t.true(next.entries.every((e: any) => e.id < first.entries[1].id), 'the cursor continues where the page ended');
});

test.serial('admin health: queue age, listeners, disk and the last outcome of background jobs', async (t) => {
  await w.t0.app.runCampaigns();
  const h = await must('GET', '/health');
  t.is(h.status, 'ok');
  t.is(h.store, 'ok');
  t.is(h.listeners.http.state, 'listening');
  t.is(h.listeners.inbound.state, 'listening');
  t.true(h.disk.freeBytes > 0 && h.disk.totalBytes >= h.disk.freeBytes);
  t.true(h.jobs.campaigns.runs >= 1, JSON.stringify(h.jobs));
  t.is(h.jobs.campaigns.lastError, null);
  t.is(h.queue.oldestReadyAgeSeconds, null, 'nothing is waiting');
  // The public /health stays small and cheap.
  const pub = await w.t0.request('GET', '/health', { key: null });
  t.deepEqual(Object.keys(pub.body).sort(), ['cluster', 'listeners', 'node', 'sandbox', 'status', 'store']);
  t.is(pub.body.node, h.node, 'the node names itself');
  t.deepEqual(pub.body.cluster, h.cluster.map((m: any) => m.node), 'and the members it sees');
  t.true(pub.body.cluster.includes(pub.body.node));
});

test.serial('GET /admin/v1/openapi.json describes every operator route, and real answers (200s and errors) conform to it', async (t) => {
  const res = await admin('GET', '/openapi.json', undefined, null);
  t.is(res.status, 200);
  const check = new OpenApiCheck(res.body, '/admin/v1');
  t.true(check.compileAll() > 20);
  const routes = w.t0.app.adminRoutes;
  t.deepEqual(
    routes.map((r) => `${r.method} ${r.path}`).filter((r) => !check.operation(r.split(' ')[0]!, r.split(' ')[1]!)),
    [],
    'every route is an operation',
  );
  // Real ids for the 200s.
  const s = await must('POST', '/queue/suspensions', { teamId: 1, minutes: 1, reason: 'document tour' });
  const id = await send('documented@other.example');
  await w.settle();
  const real: Record<string, string> = {
    'DELETE /queue/suspensions/:suspensionId': `/queue/suspensions/${s.id}`,
    'GET /emails/:emailId/trace': `/emails/${id}/trace`,
  };
  for (const r of routes.filter((x) => x.access === 'operator')) {
    const name = `${r.method} ${r.path}`;
    const ex = EXAMPLES[name]!;
    for (const [key, path, body] of [
      [op, real[name] ?? ex.path, ex.body],
      [null, ex.path, ex.body],
      [w.t0.key, ex.path, ex.body],
      [op, ex.path.replace(/\?.*$/, '') + (r.method === 'GET' ? '?limit=-1' : ''), r.method === 'GET' || r.method === 'DELETE' ? undefined : { unexpected: true }],
    ] as const) {
      const answer = await admin(r.method, path, body, key);
      t.deepEqual(check.check(r.method, r.path, answer), [], `${name} ${path}`);
    }
  }
  t.true(check.validated > 40);
});
