import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';

// Egress sources and pools (connections bind to the source's address and greet with its name;
// each attempt names its source in events, the trace and metrics), a team's and a domain's
// pool, and warm-up budgets by day of the injected clock.

const T0 = Date.UTC(2026, 10, 25, 9, 0, 0);

const SOURCES = [
  { name: 'ip2', localAddress: '127.0.0.2', ehloName: 'ip2.sender.test' },
  { name: 'ip3', localAddress: '127.0.0.3', ehloName: 'ip3.sender.test' },
];

async function send(w: MailWorld, to: string): Promise<string> {
  const res = await w.t0.request('POST', '/v1/emails', { body: { from: `News <news@${w.domain.name}>`, to, subject: 'Hi', text: 'Hello' } });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  return res.body.emailId;
}

test('two sources on 127.0.0.2 and 127.0.0.3 in one pool both carry mail; each attempt names its source; a domain pool beats its team pool', async (t) => {
  const clock = new ManualClock(T0);
  const w = await startMailWorld({
    clock,
    overrides: {
      rateLimit: { perSecond: 1_000_000 },
      outbound: { sources: SOURCES, pools: [{ name: 'pair', sources: ['ip2', 'ip3'] }, { name: 'solo', sources: ['ip3'] }] } as never,
    },
  });
  t.teardown(() => w.close());
  const op = (await w.t0.app.services.operatorKeys.create('ops')).token;
  const admin = (method: string, path: string, body?: unknown) => w.t0.request(method, `/admin/v1${path}`, { key: op, body });

  // An unknown pool is refused, naming the field.
  const bad = await admin('PATCH', `/teams/${w.t0.teamId}`, { pool: 'nope' });
  t.is(bad.status, 400);
  t.regex(bad.body.error.message, /^pool: no egress pool named "nope"/);
  const team = await admin('PATCH', `/teams/${w.t0.teamId}`, { pool: 'pair' });
  t.is(team.status, 200);
  t.is(team.body.pool, 'pair');

  const ids: string[] = [];
  for (let i = 0; i < 10; i++) ids.push(await send(w, `user${i}@example.net`));
  await w.settle();
  t.is(w.sink.messages.length, 10);
  const from = (addr: string) => w.sink.messages.filter((m) => m.remoteAddress === addr);
  // Equal weights: the pool alternates.
  t.is(from('127.0.0.2').length, 5);
  t.is(from('127.0.0.3').length, 5);
  t.true(from('127.0.0.2').every((m) => m.heloName === 'ip2.sender.test'));
  t.true(from('127.0.0.3').every((m) => m.heloName === 'ip3.sender.test'));

  // Each attempt names its source: the trace (name and local address) and the DELIVERED event.
  for (const id of ids) {
    const trace = (await admin('GET', `/emails/${id}/trace`)).body;
    const attempt = trace.attempts[0];
    t.true(attempt.sourceName === 'ip2' || attempt.sourceName === 'ip3');
    t.is(attempt.source, attempt.sourceName === 'ip2' ? '127.0.0.2' : '127.0.0.3');
    t.true(attempt.transcript.some((l: any) => l.line.includes(`from ${attempt.source}`)));
    const events = (await w.t0.request('GET', `/v1/emails/${id}`)).body.emailEvents as { status: string; data: any }[];
    t.is(events.find((e) => e.status === 'DELIVERED')!.data.source, attempt.sourceName);
  }
  const metrics = await (await fetch(`${w.t0.baseUrl}/metrics`)).text();
  t.regex(metrics, /posthorn_messages_delivered_total\{provider="other",source="ip2"\} 5/);
  t.regex(metrics, /posthorn_messages_delivered_total\{provider="other",source="ip3"\} 5/);

  // The domain's pool beats the team's.
  const domain = await admin('PATCH', `/domains/${w.domain.id}`, { pool: 'solo' });
  t.is(domain.status, 200);
  t.like(domain.body, { id: w.domain.id, pool: 'solo' });
  t.is((await admin('PATCH', '/domains/999999', { pool: null })).status, 404);
  for (let i = 0; i < 4; i++) await send(w, `later${i}@example.net`);
  await w.settle();
  t.is(from('127.0.0.3').length, 9);
  t.is(from('127.0.0.2').length, 5);

  // The operator's view: sources and pools.
  const state = (await admin('GET', '/queue')).body.shaping;
  t.deepEqual(
    state.sources.map((s: any) => [s.name, s.localAddress, s.pools]),
    [
      ['ip2', '127.0.0.2', ['pair', 'default']],
      ['ip3', '127.0.0.3', ['pair', 'solo', 'default']],
    ],
  );
});

test('a warm-up of 20 a day lets 20 through on day 1 and the next 20 on day 2; the rest waits unattempted, progress is shown', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 11, 1, 10, 0, 0));
  const w = await startMailWorld({
    clock,
    overrides: {
      rateLimit: { perSecond: 1_000_000 },
      outbound: { sources: [{ name: 'fresh', localAddress: '127.0.0.2', ehloName: 'fresh.sender.test', warmup: { start: '2026-12-01', schedule: [20, 20] } }] } as never,
    },
  });
  t.teardown(() => w.close());
  const ids: string[] = [];
  for (let i = 0; i < 45; i++) ids.push(await send(w, `user${i}@example.net`));
  await w.settle();
  t.is(w.sink.messages.length, 20);
  let state = (await w.t0.app.services.queue.summary()).shaping;
  t.like(state.sources[0]!.warmup, { start: '2026-12-01', day: 1, budget: 20 });
  t.deepEqual(state.sources[0]!.warmup!.rollups, [{ rollup: 'example.net', used: 20, left: 0 }]);
  const waiting = (await w.t0.app.services.queue.messages({ destination: 'example.net' }, 100)).messages;
  t.is(waiting.length, 25);
  t.true(waiting.every((m) => m.state === 'suspended' && m.attempts === 0 && m.nextAttemptAt === '2026-12-02T00:00:00.000Z' && /^warm-up: day 1 budget of 20/.test(m.heldReason!)));

  // Later the same day nothing more goes, even after a restart (the usage is in the store).
  await w.restart({ outbound: { sources: [{ name: 'fresh', localAddress: '127.0.0.2', ehloName: 'fresh.sender.test', warmup: { start: '2026-12-01', schedule: [20, 20] } }] } } as never);
  clock.advance(6 * 3_600_000);
  await w.t0.app.services.queue.retry('cli', { destination: 'example.net' });
  await w.settle();
  t.is(w.sink.messages.length, 20);

  // Day 2: the next 20.
  clock.set(Date.UTC(2026, 11, 2, 0, 0, 1));
  await w.settle();
  t.is(w.sink.messages.length, 40);
  state = (await w.t0.app.services.queue.summary()).shaping;
  t.like(state.sources[0]!.warmup, { day: 2, budget: 20 });
  // Day 3: the schedule is over, no cap.
  clock.set(Date.UTC(2026, 11, 3, 0, 0, 1));
  await w.settle();
  t.is(w.sink.messages.length, 45);
  t.is((await w.t0.app.services.queue.summary()).shaping.sources[0]!.warmup!.budget, null);
  // Waiting was never an attempt.
  for (const id of ids.slice(20, 30)) {
    const statuses = ((await w.t0.request('GET', `/v1/emails/${id}`)).body.emailEvents as { status: string }[]).map((e) => e.status);
    t.deepEqual(statuses, ['QUEUED', 'SENT', 'DELIVERED']);
  }
  t.true(w.sink.messages.every((m) => m.remoteAddress === '127.0.0.2' && m.heloName === 'fresh.sender.test'));
});
