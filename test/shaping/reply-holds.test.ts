import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { HOLDS_REFRESH_MS } from '../../src/core/shaping/traffic-shaper.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { until } from '../helpers/until.js';

// Automation from replies: a provider's "slow down" reply suspends or throttles that
// (source, rollup) for a while; the rest of its backlog waits without attempts, everything else
// flows, the hold survives a restart and is visible to the operator, and the mail goes once
// the hold ends.

const T0 = Date.UTC(2026, 10, 25, 9, 0, 0);
const GMAIL_421 = '4.7.28 [127.0.0.1] Our system has detected an unusual rate of unsolicited mail originating from your IP address.';

async function send(w: MailWorld, to: string): Promise<string> {
  const res = await w.t0.request('POST', '/v1/emails', { body: { from: `News <news@${w.domain.name}>`, to, subject: 'Hi', text: 'Hello' } });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  return res.body.emailId;
}
const statuses = async (w: MailWorld, id: string) => ((await w.t0.request('GET', `/v1/emails/${id}`)).body.emailEvents as { status: string }[]).map((e) => e.status);

test('421 4.7.28 suspends only that rollup for the configured time: no connection meanwhile, the backlog held without attempts (across a restart), delivered once afterwards', async (t) => {
  const clock = new ManualClock(T0);
  const w = await startMailWorld({
    clock,
    overrides: { rateLimit: { perSecond: 1_000_000 }, outbound: { replyRules: [{ enhancedCode: '4.7.28', action: 'suspend', duration: '30m', reason: 'unusual rate' }] } as never },
  });
  t.teardown(() => w.close());
  let refusing = true;
  const mx2 = await w.startSecondSink('gmailish.example', { onMailFrom: () => (refusing ? { code: 421, message: GMAIL_421 } : undefined) });
  const op = (await w.t0.app.services.operatorKeys.create('ops')).token;

  const first = await send(w, 'one@gmailish.example');
  await w.settle();
  t.deepEqual((await statuses(w, first)).filter((s) => s !== 'QUEUED'), ['SENT', 'DELIVERY_DELAYED']);
  const connections = mx2.connectionCount;
  t.true(connections >= 1);

  // The rollup is suspended: its backlog goes back unattempted, other destinations flow.
  const held = [await send(w, 'two@gmailish.example'), await send(w, 'three@gmailish.example'), await send(w, 'four@gmailish.example')];
  const other = await send(w, 'someone@example.net');
  await w.settle();
  t.is(mx2.connectionCount, connections, 'no connection to the suspended rollup');
  t.is(w.sink.messages.length, 1);
  t.true((await statuses(w, other)).includes('DELIVERED'));
  for (const id of held) t.deepEqual(await statuses(w, id), ['QUEUED']);

  // The operator sees the hold with its reason and end, and the held mail as suspended.
  const summary = (await w.t0.request('GET', '/admin/v1/queue', { key: op })).body;
  const hold = summary.shaping.holds.find((h: any) => h.rollup === 'gmailish.example');
  t.truthy(hold);
  t.is(hold.kind, 'suspend');
  t.is(hold.source, 'default');
  t.is(hold.until, new Date(T0 + 30 * 60_000).toISOString());
  t.regex(hold.reason, /unusual rate: 421 4\.7\.28/);
  // The first one is deferred (its retry comes due inside the hold, and is parked then); the others are held.
  const row = summary.destinations.find((d: any) => d.destination === 'gmailish.example');
  t.like(row, { queued: 4, suspended: 3, deferred: 1 });
  const messages = (await w.t0.request('GET', '/admin/v1/queue/messages?destination=gmailish.example', { key: op })).body.messages;
  t.true(messages.filter((m: any) => held.includes(m.emailId)).every((m: any) => m.state === 'suspended' && m.attempts === 0 && m.heldReason.startsWith('suspended: unusual rate')));

  // A restart keeps the hold: still nothing goes there.
  await w.restart({ outbound: { replyRules: [{ enhancedCode: '4.7.28', action: 'suspend', duration: '30m', reason: 'unusual rate' }] } } as never);
  clock.advance(10 * 60_000); // the first one's retry comes due inside the hold
  await w.settle();
  t.is(mx2.connectionCount, connections);
  t.true((await w.t0.app.services.queue.summary()).shaping.holds.some((h) => h.rollup === 'gmailish.example'));

  // The hold ends: each held message goes once, without a DELIVERY_DELAYED of its own.
  refusing = false;
  clock.advance(20 * 60_000 + 1000);
  await w.settle();
  t.is(mx2.messages.length, 4);
  for (const id of held) t.deepEqual(await statuses(w, id), ['QUEUED', 'SENT', 'DELIVERED']);
  t.deepEqual((await statuses(w, first)).filter((s) => s !== 'QUEUED'), ['SENT', 'DELIVERY_DELAYED', 'DELIVERED']);
  const after = await w.t0.app.services.queue.summary();
  t.false(after.shaping.holds.some((h) => h.rollup === 'gmailish.example'));
});

test('a throttle reply lowers the rate of that (source, rollup) for its duration; an operator can lift a hold at once', async (t) => {
  const clock = new ManualClock(T0);
  const w = await startMailWorld({ clock, overrides: { rateLimit: { perSecond: 1_000_000 } } });
  t.teardown(() => w.close());
  let throttling = true;
  // Microsoft's "451 4.7.650 ... temporarily rate limited due to IP reputation": a built-in rule (10/min for 1h).
  const mx2 = await w.startSecondSink('outlookish.example', {
    onRcpt: () => (throttling ? { code: 451, message: '4.7.650 The mail server [127.0.0.1] has been temporarily rate limited due to IP reputation.' } : undefined),
  });
  const op = (await w.t0.app.services.operatorKeys.create('ops')).token;
  await send(w, 'a@outlookish.example');
  await w.settle();
  throttling = false;
  const ids = [await send(w, 'b@outlookish.example'), await send(w, 'c@outlookish.example'), await send(w, 'd@outlookish.example')];
  await w.settle();
  // 10/min: one now, the next ones 6 s apart.
  t.is(mx2.messages.length, 1);
  const hold = (await w.t0.app.services.queue.summary()).shaping.holds.find((h) => h.rollup === 'outlookish.example')!;
  t.is(hold.kind, 'throttle');
  t.is(hold.messageRate, '10/min');
  t.true((await w.t0.app.services.queue.summary()).shaping.rates.some((r) => r.rollup === 'outlookish.example' && r.messageRate === '10/min' && r.until !== null));
  clock.advance(6000);
  await w.settle();
  t.is(mx2.messages.length, 2);

  // Lifting it: what it held is due now and goes at full speed.
  const lifted = await w.t0.request('DELETE', `/admin/v1/queue/shaping-holds/${hold.id}`, { key: op });
  t.is(lifted.status, 200);
  t.is(lifted.body.id, hold.id);
  // On PostgreSQL other nodes may still hold the hold in memory: what it parked is due once they
  // have all read the holds again (a few seconds), not before (they would park it anew).
  if (w.t0.app.store.kind === 'postgres') clock.advance(HOLDS_REFRESH_MS + 1000);
  await w.settle();
  t.is(mx2.messages.length, 3);
  for (const id of ids) t.true((await statuses(w, id)).includes('DELIVERED'));
  t.is((await w.t0.request('DELETE', `/admin/v1/queue/shaping-holds/${hold.id}`, { key: op })).status, 404);
  const audit = (await w.t0.request('GET', '/admin/v1/audit', { key: op })).body.entries;
  t.true(audit.some((e: any) => e.action === 'queue.shaping.resume'));
});

test('a throttle holds its rate only for its duration: a backlog parked past its end goes when it ends, not at the throttled slots', async (t) => {
  const clock = new ManualClock(T0);
  const rule = { code: 451, text: 'slow down', action: 'throttle', messageRate: '1/min', duration: '5m', reason: 'asked to slow down' };
  const w = await startMailWorld({ clock, overrides: { rateLimit: { perSecond: 1_000_000 }, outbound: { replyRules: [rule] } as never } });
  t.teardown(() => w.close());
  let throttling = true;
  const mx2 = await w.startSecondSink('slowish.example', { onRcpt: () => (throttling ? { code: 451, message: '4.7.1 slow down please' } : undefined) });
  await send(w, 'first@slowish.example');
  await w.settle();
  throttling = false;
  for (let i = 0; i < 10; i++) await send(w, `u${i}@slowish.example`);
  await w.settle();
  // 1/min while the throttle lasts: one now, the others a minute apart, none past its end.
  t.is(mx2.messages.length, 1);
  const parked = (await w.t0.app.services.queue.messages({ destination: 'slowish.example', state: 'suspended' }, 100)).messages;
  t.is(parked.length, 9);
  const end = T0 + 5 * 60_000;
  t.true(parked.every((m) => Date.parse(m.nextAttemptAt!) <= end), parked.map((m) => m.nextAttemptAt).join(' '));
  // The throttle ends: what it still held goes at once (no rate is configured for the rollup).
  clock.set(end);
  await w.settle();
  clock.advance(60_000); // the first one's retry
  await w.settle();
  t.is(mx2.messages.length, 11);
  t.is((await w.t0.app.services.queue.messages({ destination: 'slowish.example' }, 100)).messages.length, 0);
});

test('a later matching reply extends the hold in force, same id: lifting it releases everything it held (Gmail-style replies differ in their tracking id)', async (t) => {
  const clock = new ManualClock(T0);
  const replyRules = [{ enhancedCode: '4.7.28', action: 'suspend', duration: '30m', reason: 'unusual rate' }];
  const w = await startMailWorld({ clock, overrides: { rateLimit: { perSecond: 1_000_000 }, outbound: { replyRules } as never } });
  t.teardown(() => w.close());
  let refusing = true;
  let n = 0;
  const gmail421 = () => ({ code: 421, message: `${GMAIL_421} ${++n}x2f3a-4b8f5b2c5d1si${n}.${n} - gsmtp` });
  let letDataGo!: () => void;
  const dataHeld = new Promise<void>((r) => (letDataGo = r));
  let holding = 0;
  const mx2 = await w.startSecondSink('gmailish.example', {
    onRcpt: (a) => (refusing && a.startsWith('a@') ? gmail421() : undefined),
    holdData: () => (holding++ === 0 ? dataHeld : Promise.resolve()),
    onData: () => (refusing ? gmail421() : undefined),
  });
  const op = (await w.t0.app.services.operatorKeys.create('ops')).token;
  const holds = async () => (await w.t0.app.services.queue.summary()).shaping.holds.filter((h) => h.rollup === 'gmailish.example');
  const stateOf = async (id: string) => (await w.t0.app.services.queue.messages({ destination: 'gmailish.example' }, 100)).messages.find((m) => m.emailId === id)?.state;

  // b's transaction is at DATA, its reply not in yet; a's RCPT reply suspends the rollup.
  const b = await send(w, 'b@gmailish.example');
  await until(() => holding > 0);
  await send(w, 'a@gmailish.example');
  for (let h = await holds(); h.length === 0; h = await holds()) await new Promise((r) => setImmediate(r));
  const first = (await holds())[0]!;
  // The backlog is parked under it.
  const held = [await send(w, 'c@gmailish.example'), await send(w, 'd@gmailish.example')];
  for (const id of held) while ((await stateOf(id)) !== 'suspended') await new Promise((r) => setImmediate(r));

  // 5 s later b's DATA gets the same refusal (another tracking id): the hold runs from now.
  clock.advance(5000);
  letDataGo();
  while ((await stateOf(b)) !== 'deferred') await new Promise((r) => setImmediate(r));
  await w.settle();
  const now = await holds();
  t.is(now.length, 1);
  t.is(now[0]!.id, first.id, 'the same hold, extended');
  t.is(now[0]!.until, new Date(T0 + 5000 + 30 * 60_000).toISOString());

  // Lifting it releases what it held, whenever it was parked.
  refusing = false;
  t.is((await w.t0.request('DELETE', `/admin/v1/queue/shaping-holds/${first.id}`, { key: op })).status, 200);
  if (w.t0.app.store.kind === 'postgres') clock.advance(HOLDS_REFRESH_MS + 1000);
  await w.settle();
  const delivered = mx2.messages.flatMap((m) => m.rcptTo);
  t.true(delivered.includes('c@gmailish.example') && delivered.includes('d@gmailish.example'), delivered.join(' '));
});
