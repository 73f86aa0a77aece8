import test from 'ava';
import { nodeShare } from '../../src/lib/node-share.js';
import { ManualClock } from '../../src/lib/clock.js';
import { createLogger } from '../../src/lib/logger.js';
import { parseDuration, parseRate } from '../../src/lib/rate-spec.js';
import { loadConfig } from '../../src/config/load.js';
import { BUILTIN_REPLY_RULES, BUILTIN_SHAPING, ShapingRules, compileReplyRule, matchReply } from '../../src/core/shaping/shaping-rules.js';
import { createTrafficShaper } from '../../src/core/shaping/traffic-shaper.js';
import { createShapingOperator } from '../../src/core/shaping/shaping-view.js';
import type { AuditService } from '../../src/core/operators/audit-service.js';
import { STANDARD_WARMUP } from '../../src/core/shaping/warmup-schedule.js';
import { MinHeap } from '../../src/lib/min-heap.js';
import type { ShapingHoldRow, ShapingRepository } from '../../src/store/repositories/shaping-repository.js';

// The pieces of traffic shaping on their own: spellings, rollups and merged limits, reply
// rules against the providers' real replies, the GCRA spacing and weighted pools of the
// shaper (with an in-memory store), and the configuration's checks.

function memoryRepo(): ShapingRepository & { holds: ShapingHoldRow[]; usage: Map<string, number> } {
  const holds: ShapingHoldRow[] = [];
  const usage = new Map<string, number>();
  const rates = new Map<string, number>();
  return {
    holds,
    usage,
    activeHolds: async (now) => holds.filter((h) => h.until_ms > now),
    putHold: async (row) => {
      const i = holds.findIndex((h) => h.source === row.source && h.rollup === row.rollup && h.kind === row.kind);
      if (i >= 0) holds.splice(i, 1);
      holds.push(row);
    },
    endHold: async (id) => {
      const i = holds.findIndex((h) => h.id === id);
      return i >= 0 ? holds.splice(i, 1)[0] : undefined;
    },
    pruneHolds: async () => 0,
    // No queue here: the mail parked is taken to wait at its slot.
    stillParked: async (slots) => slots.map((s) => s.id),
    warmupUsage: async (day) => [...usage].filter(([k]) => k.endsWith(`|${day}`)).map(([k, used]) => ({ source: k.split('|')[0]!, rollup: k.split('|')[1]!, used })),
    addWarmupUsage: async (source, rollup, day, n) => void usage.set(`${source}|${rollup}|${day}`, (usage.get(`${source}|${rollup}|${day}`) ?? 0) + n),
    pruneWarmupUsage: async () => 0,
    takeWarmup: async (source, rollup, day, n, budget) => {
      const k = `${source}|${rollup}|${day}`;
      const used = usage.get(k) ?? 0;
      if (used + n > budget) return { took: false, used };
      usage.set(k, used + n);
      return { took: true, used: used + n };
    },
    // GCRA as the store does it, for shapers that share this repository (nodes of a cluster).
    takeSlots: async (requests, now) =>
      requests.map((r) => {
        const k = `${r.source}|${r.rollup}`;
        const tat = rates.get(k) ?? now;
        if (2 * (tat - now) > r.spacingMs) return { took: false, tatMs: tat };
        rates.set(k, Math.max(tat, now) + r.spacingMs);
        return { took: true, tatMs: rates.get(k)! };
      }),
    pruneRates: async () => 0,
  };
}

const logger = createLogger('silent');

function shaper(opts: Partial<Parameters<typeof createTrafficShaper>[0]> = {}) {
  const clock = new ManualClock(Date.UTC(2026, 11, 1, 12, 0, 0));
  const repo = memoryRepo();
  const s = createTrafficShaper({ sources: [], pools: [], rules: [], replyRules: [], builtinShaping: true, builtinReplyRules: true, hostname: 'mta.example', repo, clock, logger, ...opts });
  return { s, clock, repo };
}

test('rates and durations: the spellings, and what is refused', (t) => {
  t.like(parseRate('5/s'), { count: 5, perMs: 1000 });
  t.like(parseRate(' 100 / min '), { count: 100, perMs: 60_000 });
  t.like(parseRate('2000/h'), { count: 2000, perMs: 3_600_000 });
  for (const bad of ['5', '5/x', '0/s', '-1/s', 'fast', '']) t.is(parseRate(bad), undefined, bad);
  t.is(parseDuration('30m'), 1_800_000);
  t.is(parseDuration('4h'), 14_400_000);
  t.is(parseDuration('1d'), 86_400_000);
  t.is(parseDuration('30s'), 30_000);
  for (const bad of ['30', '0m', 'm', '1w']) t.is(parseDuration(bad), undefined, bad);
});

test('rollups: a domain rule first, then the longest MX suffix with a rule, else the recipient domain; limits merge built-in < every source < one source', (t) => {
  const rules = new ShapingRules([
    ...BUILTIN_SHAPING,
    { mx: 'google.com', messageRate: '20/s' },
    { mx: 'google.com', source: 'ip2', connectionLimit: 2 },
    { domain: 'gmail.com', messageRate: '1/s' },
  ]);
  t.is(rules.rollupOf('customer.example', 'aspmx.l.google.com'), 'google.com');
  t.is(rules.rollupOf('customer.example', 'ASPMX.L.GOOGLE.COM.'), 'google.com');
  t.is(rules.rollupOf('gmail.com', 'gmail-smtp-in.l.google.com'), 'gmail.com');
  t.is(rules.rollupOf('small.example', 'mx.small.example'), 'small.example');
  t.is(rules.rollupOf('notgoogle.com', 'mx.notgoogle.com'), 'notgoogle.com', 'a suffix matches whole labels only');
  t.like(rules.limits('ip1', 'google.com'), { connectionLimit: 10, maxDeliveriesPerConnection: 50, messageRate: { count: 20, perMs: 1000 } });
  t.like(rules.limits('ip2', 'google.com'), { connectionLimit: 2, maxDeliveriesPerConnection: 50 });
  t.deepEqual(rules.limits('ip1', 'small.example'), {});
});

test('a rule for an IDN domain or MX suffix applies however it was written: U-labels, A-labels, any case', (t) => {
  const rules = new ShapingRules([
    { domain: 'Bücher.example', messageRate: '1/s' },
    { mx: 'mail.Bücher-host.example', connectionLimit: 3 },
  ]);
  t.is(rules.rollupOf('xn--bcher-kva.example', 'mx.elsewhere.example'), 'xn--bcher-kva.example');
  t.like(rules.limits('ip1', 'xn--bcher-kva.example'), { messageRate: { count: 1, perMs: 1000 } });
  t.is(rules.rollupOf('shop.example', 'in.mail.xn--bcher-host-9db.example'), 'mail.xn--bcher-host-9db.example');
  t.like(rules.limits('ip1', 'mail.xn--bcher-host-9db.example'), { connectionLimit: 3 });
});

test('the operator\'s summary lists the configured rates under the rollup mail is counted in: A-labels, lowercase, as the queue names it', async (t) => {
  const rules = [
    { domain: 'Bücher.example', messageRate: '1/s' },
    { mx: '.Mail.Bücher-Host.example.', messageRate: '5/s' },
    { domain: 'Plain.Example', source: 'ip1', messageRate: '2/s' },
  ];
  const { s, clock, repo } = shaper({ rules, builtinShaping: false });
  await s.load();
  const operator = createShapingOperator({ shaper: s, repo, rules, builtinShaping: false, audit: {} as AuditService, clock, wake: () => {}, engineHere: () => true });
  t.deepEqual(
    (await operator.state()).rates.map((r) => [r.source, r.rollup, r.messageRate]),
    [
      [null, 'xn--bcher-kva.example', '1/s'],
      [null, 'mail.xn--bcher-host-9db.example', '5/s'],
      ['ip1', 'plain.example', '2/s'],
    ],
  );
});

test('the built-in reply rules know the providers\u2019 replies, and nothing else', (t) => {
  const rules = BUILTIN_REPLY_RULES.map((r, i) => compileReplyRule(r, `r${i}`));
  const match = (rollup: string, code: number, text: string) => matchReply(rules, rollup, code, text);
  t.like(match('google.com', 421, '421 4.7.28 [192.0.2.1] Our system has detected an unusual rate of unsolicited mail originating from your IP address.'), { action: 'suspend', durationMs: 3_600_000 });
  t.like(match('outlook.com', 451, '451 4.7.650 The mail server [192.0.2.1] has been temporarily rate limited due to IP reputation.'), { action: 'throttle', messageRate: { count: 10, perMs: 60_000 } });
  t.like(match('outlook.com', 451, '451 4.7.500 Server busy. Please try again later from [192.0.2.1]. (S77719)'), { action: 'suspend' });
  t.like(match('yahoodns.net', 421, '421 4.7.0 [TSS04] Messages from 192.0.2.1 temporarily deferred due to unexpected volume or user complaints - 4.16.55.1'), { action: 'suspend' });
  t.like(match('small.example', 421, '421 4.7.0 Too many connections from your host'), { action: 'throttle' });
  t.like(match('small.example', 421, '421 Rate limit exceeded, slow down'), { action: 'throttle' });
  t.like(match('outlook.com', 421, '421 4.3.2 The maximum number of concurrent server connections has exceeded a limit, closing transmission channel'), { action: 'throttle' });
  t.is(match('small.example', 450, '450 4.2.1 Mailbox busy, try again'), undefined);
  t.is(match('small.example', 550, '550 5.1.1 User unknown'), undefined);
  t.is(match('small.example', 451, '451 4.3.0 Temporary lookup failure'), undefined);
  // An IP address is not an enhanced code.
  t.is(match('small.example', 451, '451 deferred for 4.7.28.9 reasons'), undefined);
});

test('GCRA: 5/s spaces messages 200 ms apart; those that must wait are parked at successive slots, in order', async (t) => {
  const { s, clock } = shaper({ rules: [{ domain: 'slow.example', messageRate: '5/s' }] });
  await s.load();
  const t0 = clock.nowMs();
  const plans = Array.from({ length: 5 }, () => s.plan(null, 'slow.example', 'mx.slow.example', 1));
  t.is(plans[0]!.kind, 'send');
  t.deepEqual(
    plans.slice(1).map((p) => (p.kind === 'hold' ? p.until - t0 : -1)),
    [200, 400, 600, 800],
  );
  // Another destination is not limited at all.
  t.is(s.plan(null, 'fast.example', 'mx.fast.example', 1).kind, 'send');
  // At the first parked slot, the parked message goes; one more at the same time waits.
  clock.advance(200);
  t.is(s.plan(null, 'slow.example', 'mx.slow.example', 1).kind, 'send');
  const again = s.plan(null, 'slow.example', 'mx.slow.example', 1);
  t.true(again.kind === 'hold' && again.until - t0 === 1000, 'after the ones parked before it');
});

test('nodes sharing the store (take()): a rate of 5/s is 5/s for two shapers together, and a warm-up budget of 7 is 7 for both', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 11, 1, 12, 0, 0));
  const repo = memoryRepo();
  const node = (shared: boolean, opts: Partial<Parameters<typeof createTrafficShaper>[0]> = {}) =>
    createTrafficShaper({ sources: [], pools: [], rules: [{ domain: 'slow.example', messageRate: '5/s' }], replyRules: [], builtinShaping: false, builtinReplyRules: false, hostname: 'mta.example', repo, clock, logger, shared, ...opts });
  const sendsOver2s = async (nodes: ReturnType<typeof node>[]) => {
    const sent: { n: number; at: number }[] = [];
    const t0 = clock.nowMs();
    for (let ms = 0; ms <= 2000; ms += 50) {
      // Who asks first changes every step (a node that always asked first would get every slot).
      const order = (ms / 50) % 3 === 0 ? [...nodes.entries()].reverse() : [...nodes.entries()];
      for (const [n, s] of order) if ((await s.take(null, 'slow.example', undefined, 1)).kind === 'send') sent.push({ n, at: clock.nowMs() - t0 });
      clock.advance(50);
    }
    return sent;
  };
  // Each on its own, two nodes would send twice the rate.
  t.is((await sendsOver2s([node(false), node(false)])).length, 22);
  clock.advance(10_000);
  const sent = await sendsOver2s([node(true), node(true)]);
  t.true(sent.length === 11, `${sent.length} in 2 s`);
  // Asked every 50 ms (not parked at slots, as the engine does): never closer than GCRA's half-spacing tolerance.
  for (let i = 1; i < sent.length; i++) t.true(sent[i]!.at - sent[i - 1]!.at >= 100, `gap ${i}`);
  t.true(sent.some((x) => x.n === 0) && sent.some((x) => x.n === 1), 'both nodes sent');

  // Transactions of several recipients (a rule that groups them), so a budget can be cut short.
  const warm = { sources: [{ name: 'w', localAddress: '', ehloName: '', warmup: { start: '2026-12-01', schedule: [7, 7] } }], rules: [{ domain: 'x.example', maxRecipientsPerTransaction: 3 }] };
  const [a, b] = [node(true, warm), node(true, warm)];
  await a.load();
  await b.load();
  const counts: number[] = [];
  for (const s of [a, b, a, b]) {
    const p = await s.take(null, 'x.example', undefined, 3);
    counts.push(p.kind === 'send' ? p.count : 0);
    if (p.kind === 'send') {
      t.true(p.warmup?.recorded, 'take() counted it in the store already');
      await s.recordWarmup(p);
    }
  }
  t.deepEqual(counts, [3, 3, 1, 0], 'the budget is shared: 3 + 3, then the 1 left, then nothing');
  t.is(repo.usage.get('w|x.example|2026-12-01'), 7);
  t.like(await b.take(null, 'x.example', undefined, 1), { kind: 'hold', why: 'warmup', until: Date.UTC(2026, 11, 2) });
});

test('a weighted pool spreads mail by weight over the sources that may send, and skips a suspended one', async (t) => {
  const { s } = shaper({
    sources: [
      { name: 'a', localAddress: '127.0.0.2', ehloName: '' },
      { name: 'b', localAddress: '127.0.0.3', ehloName: 'b.example' },
    ],
    pools: [{ name: 'p', sources: ['a', { name: 'b', weight: 2 }] }],
  });
  await s.load();
  const used = (n: number) => {
    const counts: Record<string, number> = {};
    for (let i = 0; i < n; i++) {
      const p = s.plan('p', 'x.example', undefined, 1);
      if (p.kind === 'send') counts[p.source.name] = (counts[p.source.name] ?? 0) + 1;
    }
    return counts;
  };
  t.deepEqual(used(30), { a: 10, b: 20 });
  const p = s.plan('p', 'x.example', undefined, 1);
  t.true(p.kind === 'send' && (p.source.ehloName === 'mta.example' || p.source.ehloName === 'b.example'));
  // A hold on b for this rollup: a carries everything; other rollups still use both.
  await s.observeReply('b', 'x.example', 421, '421 4.7.28 unusual rate');
  t.deepEqual(used(6), { a: 6 });
  const other: Record<string, number> = {};
  for (let i = 0; i < 6; i++) {
    const q = s.plan('p', 'y.example', undefined, 1);
    if (q.kind === 'send') other[q.source.name] = (other[q.source.name] ?? 0) + 1;
  }
  t.deepEqual(other, { a: 2, b: 4 });
  // Unknown or null pool: the default one (every source).
  t.true(s.hasPool('p') && s.hasPool('default') && !s.hasPool('nope'));
});

test('warm-up: the day\u2019s budget per rollup, a partial transaction at the edge, the next day at midnight UTC; the standard schedule', async (t) => {
  const { s, clock, repo } = shaper({
    sources: [{ name: 'w', localAddress: '', ehloName: '', warmup: { start: '2026-12-01', schedule: [5, 8] } }],
    // x.example's transactions carry several recipients (a rule groups them); y.example's one each.
    rules: [{ domain: 'x.example', maxRecipientsPerTransaction: 100 }],
  });
  await s.load();
  const p1 = s.plan(null, 'x.example', undefined, 3);
  t.like(p1, { kind: 'send', count: 3 });
  if (p1.kind === 'send') await s.recordWarmup(p1);
  const p2 = s.plan(null, 'x.example', undefined, 3);
  t.like(p2, { kind: 'send', count: 2 }, 'only what is left of the budget');
  if (p2.kind === 'send') await s.recordWarmup(p2);
  const p3 = s.plan(null, 'x.example', undefined, 1);
  t.like(p3, { kind: 'hold', why: 'warmup', until: Date.UTC(2026, 11, 2) });
  t.is(repo.usage.get('w|x.example|2026-12-01'), 5);
  // Another rollup has its own budget; without a rule that groups, one recipient per transaction.
  t.like(s.plan(null, 'y.example', undefined, 4), { kind: 'send', count: 1, warmup: { n: 1 } });
  clock.set(Date.UTC(2026, 11, 2, 0, 0, 1));
  t.like(s.plan(null, 'x.example', undefined, 10), { kind: 'send', count: 8 });
  clock.set(Date.UTC(2026, 11, 3, 0, 0, 1));
  t.like(s.plan(null, 'x.example', undefined, 100), { kind: 'send', count: 100 }, 'after the schedule, no cap');
  t.is(STANDARD_WARMUP[0], 50);
  t.true(STANDARD_WARMUP.every((n, i) => i === 0 || n > STANDARD_WARMUP[i - 1]!));
});

test('the engine\u2019s heap of wake-up times gives them back earliest first', (t) => {
  const heap = new MinHeap();
  const values = Array.from({ length: 500 }, (_, i) => (i * 7919) % 1000);
  for (const v of values) heap.push(v);
  const out: number[] = [];
  while (heap.size) out.push(heap.pop()!);
  t.deepEqual(out, [...values].sort((a, b) => a - b));
  t.is(heap.pop(), undefined);
});

test('the configuration refuses bad shaping settings, naming the key', (t) => {
  const bad = (outbound: unknown, message: RegExp) => t.throws(() => loadConfig({ env: {}, overrides: { outbound } as never }), { message });
  bad({ shaping: [{ domain: 'x.example', messageRate: 'fast' }] }, /outbound\.shaping\.0\.messageRate: must be a rate/);
  bad({ shaping: [{ messageRate: '5/s' }] }, /a shaping rule names exactly one of domain or mx/);
  bad({ shaping: [{ mx: 'google.com', source: 'nope' }] }, /outbound\.shaping\.0\.source: no source named nope/);
  bad({ sources: [{ name: 'a', localAddress: 'not-an-ip' }] }, /outbound\.sources\.0\.localAddress: must be an IP address/);
  bad({ sources: [{ name: 'a' }, { name: 'a' }] }, /outbound\.sources\.1\.name: source a is defined twice/);
  bad({ sources: [{ name: 'a', warmup: { start: '2026-02-30' } }] }, /outbound\.sources\.0\.warmup\.start: must be a real date/);
  bad({ pools: [{ name: 'p', sources: ['ghost'] }] }, /outbound\.pools\.0\.sources\.0: no source named ghost/);
  bad({ replyRules: [{ code: 421, action: 'throttle', duration: '5m' }] }, /a throttle needs messageRate/);
  bad({ replyRules: [{ action: 'suspend', duration: '5m' }] }, /needs code, enhancedCode or text/);
  bad({ replyRules: [{ text: '(', action: 'suspend', duration: '5m' }] }, /outbound\.replyRules\.0\.text: must be a valid regular expression/);
  t.throws(() => loadConfig({ env: { POSTHORN_OUTBOUND_SOURCES: '[{' } }), { message: /POSTHORN_OUTBOUND_SOURCES must be a JSON array of tables/ });
  const ok = loadConfig({ env: { POSTHORN_OUTBOUND_SOURCES: '[{"name":"ip1","localAddress":"192.0.2.10","warmup":{"start":"2026-12-01"}}]' } });
  t.deepEqual(ok.outbound.sources, [{ name: 'ip1', localAddress: '192.0.2.10', ehloName: '', warmup: { start: '2026-12-01', schedule: 'standard' } }]);
});

test('a hold put while the holds are being read back is not forgotten when the (older) read lands; one lifted meanwhile stays lifted', async (t) => {
  const { s, clock, repo } = shaper();
  await s.load();
  // A read of the holds that answers with what the store had when it began (PostgreSQL: another
  // connection, answering after a write on a third has committed).
  let gate!: () => void;
  const read = repo.activeHolds;
  repo.activeHolds = async (now) => {
    const snapshot = await read(now);
    await new Promise<void>((r) => (gate = r));
    return snapshot;
  };
  clock.advance(6000);
  const refreshing = s.maybeRefresh();
  const hold = (await s.observeReply('default', 'x.example', 421, '421 4.7.28 unusual rate'))!;
  t.like(s.plan(null, 'x.example', undefined, 1), { kind: 'hold', why: 'suspended' });
  gate();
  await refreshing;
  t.like(s.plan(null, 'x.example', undefined, 1), { kind: 'hold', why: 'suspended' }, 'still held after the read');

  clock.advance(6000);
  const again = s.maybeRefresh();
  t.truthy(await s.endHold(hold.id));
  gate();
  await again;
  t.like(s.plan(null, 'x.example', undefined, 1), { kind: 'send' }, 'still lifted after the read');
});

test('mail planned again before its rate slot gives the slot back: it and the mail after it take the free slots, alone or with a shared store', async (t) => {
  for (const shared of [false, true]) {
    const clock = new ManualClock(Date.UTC(2026, 11, 1, 12, 0, 0));
    const t0 = clock.nowMs();
    const s = createTrafficShaper({ sources: [], pools: [], rules: [{ domain: 'slow.example', messageRate: '1/min' }], replyRules: [], builtinShaping: false, builtinReplyRules: false, hostname: 'mta.example', repo: memoryRepo(), clock, logger, shared });
    const at = async (id: number) => {
      const p = await s.take(null, 'slow.example', undefined, 1, [id]);
      return p.kind === 'send' ? 0 : (p.until - t0) / 60_000;
    };
    t.is(await at(1), 0);
    t.deepEqual([await at(2), await at(3), await at(4), await at(5)], [1, 2, 3, 4], `shared: ${shared}`);
    clock.advance(10_000);
    // An operator's retry: all four are claimed again, in any order; they keep the slots 1..4.
    t.deepEqual([await at(5), await at(3), await at(2), await at(4)].sort(), [1, 2, 3, 4], `shared: ${shared}`);
    t.is(await at(6), 5, `shared: ${shared}`);
  }
});

test('nodeShare: one node keeps the limit; several take it rounded down, never below 1', (t) => {
  t.is(nodeShare(16, 1), 16);
  t.is(nodeShare(16, 0), 16);
  t.is(nodeShare(16, 2), 8);
  t.is(nodeShare(16, 3), 5);
  t.is(nodeShare(4, 2), 2);
  t.is(nodeShare(1, 3), 1);
  t.is(nodeShare(Infinity, 3), Infinity);
});
