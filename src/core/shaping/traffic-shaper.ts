import type { Clock } from '../../lib/clock.js';
import { newId } from '../../lib/ids.js';
import type { Logger } from '../../lib/logger.js';
import { parseRate, spacingMs, type MessageRate } from '../../lib/rate-spec.js';
import type { ShapingHoldRow, ShapingRepository } from '../../store/repositories/shaping-repository.js';
import { buildEgress, type Egress, type EgressPool, type EgressSource, type PoolSpec, type SourceSpec } from './egress.js';
import {
  BUILTIN_REPLY_RULES,
  BUILTIN_SHAPING,
  ShapingRules,
  compileReplyRule,
  matchReply,
  type CompiledReplyRule,
  type ReplyRuleSpec,
  type ShapingLimits,
  type ShapingRuleSpec,
} from './shaping-rules.js';
import { nextUtcDayMs, utcDay, warmupBudget, warmupDay } from './warmup-schedule.js';

/*
 * Traffic shaping at run time (docs/outbound.md, "Traffic shaping"). The engine asks plan()
 * once per transaction, after MX resolution (the rollup depends on the MX): which source of the
 * sender's pool sends it, with what limits, or until when it waits. Waiting mail goes back to
 * the queue unattempted. Everything is in memory (a few map lookups when nothing limits); holds
 * and warm-up usage are also in the store, so they survive a restart.
 *
 * - Holds: a reply rule that matches a remote reply suspends the (source, rollup) or throttles
 *   it to a lower rate, for a while, with the reason.
 * - Rate: GCRA (a virtual-scheduling token bucket, tolerance half a spacing): messages are
 *   spaced evenly, never a burst then silence. A message whose slot has not come is parked at the next
 *   free slot, after those parked before it, so the queue's due index hands them back in order.
 * - Warm-up: at most the day's budget of messages per (source, rollup); the rest waits for the
 *   next UTC day.
 */

export interface TrafficShaperDeps {
  sources: readonly SourceSpec[];
  pools: readonly PoolSpec[];
  rules: readonly ShapingRuleSpec[];
  replyRules: readonly ReplyRuleSpec[];
  builtinShaping: boolean;
  builtinReplyRules: boolean;
  /** EHLO name of a source without one. */
  hostname: string;
  repo: ShapingRepository;
  /**
   * Several nodes share the store (PostgreSQL): rates and warm-up budgets are taken in it, so
   * they hold for the cluster (take()). Absent: this process is the only sender (memory).
   */
  shared?: boolean;
  clock: Clock;
  logger: Logger;
}

export type ShapingPlan =
  | {
      kind: 'send';
      source: EgressSource;
      rollup: string;
      limits: ShapingLimits;
      /** How many of the recipients asked about may go in this transaction. */
      count: number;
      /** Set when the source is warming up: the usage to record (recordWarmup), unless take() recorded it. */
      warmup?: { day: string; n: number; recorded?: boolean };
    }
  | { kind: 'hold'; rollup: string; source: string; until: number; reason: string; why: 'suspended' | 'rate' | 'warmup' };

interface Holds {
  suspend?: ShapingHoldRow;
  throttle?: ShapingHoldRow & { rate: MessageRate };
}

/** take(): how many times a slot or budget another node took first is asked again before waiting. */
const MAX_SHARED_ROUNDS = 3;

/** How often holds are read back from the store (an operator may lift one from another process). */
export const HOLDS_REFRESH_MS = 5_000;

const keyOf = (source: string, rollup: string) => `${source}\u0000${rollup}`;

/** Where `x` goes in the ascending `xs`. */
function sortedIndex(xs: readonly number[], x: number): number {
  let lo = 0;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (xs[mid]! < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Why mail waits for a hold: the deliveries it parks carry this, so lifting the hold can release them. */
export function holdReason(h: Pick<ShapingHoldRow, 'kind' | 'message_rate' | 'reason' | 'rollup'>): string {
  return h.kind === 'suspend' ? `suspended: ${h.reason}` : `throttled to ${h.message_rate} (${h.reason}) to ${h.rollup}`;
}

export function createTrafficShaper(deps: TrafficShaperDeps) {
  const { clock, repo } = deps;
  const egress: Egress = buildEgress(deps.sources, deps.pools, deps.hostname);
  const rules = new ShapingRules([...(deps.builtinShaping ? BUILTIN_SHAPING : []), ...deps.rules]);
  const replyRules: CompiledReplyRule[] = [
    ...deps.replyRules.map((r, i) => compileReplyRule(r, `outbound.replyRules[${i}]`)),
    ...(deps.builtinReplyRules ? BUILTIN_REPLY_RULES.map((r, i) => compileReplyRule(r, `builtin reply rule ${i}`)) : []),
  ];
  const warming = [...egress.sources.values()].some((s) => s.warmup);

  let holds = new Map<string, Holds>();
  /** GCRA: the theoretical arrival time of the next message, per (source, rollup). */
  const tat = new Map<string, number>();
  /** The last slot handed to a parked message, per (source, rollup). */
  const lastParked = new Map<string, number>();
  /**
   * The slots handed to parked mail that are still its own, by delivery: mail claimed again
   * (its slot came, or an operator's retry made it due before) gives its slot back, and one
   * given back before it came is a hole that the next mail parked takes (slotHoles), rather
   * than the rate idling there while that mail waits after the last slot.
   */
  const parkedSlot = new Map<number, { key: string; slot: number }>();
  /** How many parked deliveries hold each slot, per (source, rollup). */
  const slotUsers = new Map<string, Map<number, number>>();
  /** Slots given back before they came, per (source, rollup): free again, earliest first. */
  const slotHoles = new Map<string, number[]>();

  /** Mail planned again gives back the slot it was parked at. */
  function unpark(ids: readonly number[], now: number): void {
    for (const id of ids) {
      const p = parkedSlot.get(id);
      if (!p) continue;
      parkedSlot.delete(id);
      const users = slotUsers.get(p.key);
      const left = (users?.get(p.slot) ?? 1) - 1;
      if (left > 0) {
        users!.set(p.slot, left);
        continue;
      }
      users?.delete(p.slot);
      if (p.slot <= now) continue;
      const holes = slotHoles.get(p.key) ?? [];
      holes.splice(sortedIndex(holes, p.slot), 0, p.slot);
      slotHoles.set(p.key, holes);
    }
  }

  function parkAt(key: string, slot: number, ids: readonly number[]): void {
    if (!ids.length) return;
    for (const id of ids) parkedSlot.set(id, { key, slot });
    const users = slotUsers.get(key) ?? new Map<number, number>();
    users.set(slot, (users.get(slot) ?? 0) + ids.length);
    slotUsers.set(key, users);
  }

  /** The earliest slot given back that the rate can still use (not before its next slot), taken out of the holes. */
  function takeHole(key: string, tatMs: number, spacing: number, peek: boolean): number | undefined {
    const holes = slotHoles.get(key);
    if (!holes) return undefined;
    // A hole before the rate's next slot (half a spacing of tolerance) can no longer be used.
    let drop = 0;
    while (drop < holes.length && holes[drop]! < tatMs - spacing / 2) drop++;
    if (drop) holes.splice(0, drop);
    if (!holes.length) {
      slotHoles.delete(key);
      return undefined;
    }
    return peek ? holes[0] : holes.shift();
  }

  /** How many of the earliest parked slots ahead each check against the store reads. */
  const SLOTS_CHECKED = 5_000;

  /**
   * Gives back the slots whose mail no longer waits there: bounced, purged or cancelled while
   * parked, or retried and parked again by another node (any node may do these). Read from the
   * store with the holds, so a rate idles at such a slot for at most HOLDS_REFRESH_MS of parking.
   */
  async function checkSlots(now: number): Promise<void> {
    const ahead: { id: number; atMs: number }[] = [];
    for (const [id, p] of parkedSlot) {
      if (p.slot > now) ahead.push({ id, atMs: p.slot });
      if (ahead.length >= SLOTS_CHECKED) break;
    }
    if (!ahead.length) return;
    const kept = new Set(await repo.stillParked(ahead));
    // Parked again here while the store was read: that slot is its own. (Mail whose park is
    // not written yet is still leased, so the store keeps it.)
    unpark(
      ahead.filter((a) => !kept.has(a.id) && parkedSlot.get(a.id)?.slot === a.atMs).map((a) => a.id),
      clock.nowMs(),
    );
  }

  /** Forgets slots long past (mail bounced or purged while parked, or claimed by another node). */
  function pruneSlots(now: number): void {
    for (const [id, p] of parkedSlot) if (p.slot < now - 60_000) unpark([id], now);
    for (const [key, holes] of slotHoles) {
      while (holes.length && holes[0]! < now) holes.shift();
      if (!holes.length) slotHoles.delete(key);
    }
  }
  /** Warm-up messages per (source, rollup) on `usageDay`. */
  let usage = new Map<string, number>();
  let usageDay = '';
  let lastRefreshMs = -Infinity;
  /**
   * Holds put or ended here while a read of the store's holds is under way. The read may answer
   * with what the store had before (PostgreSQL: another connection): these are applied over it,
   * or a suspension a provider just asked for would be forgotten until the next read.
   */
  const reads = new Set<{ put: ShapingHoldRow[]; ended: Set<string> }>();

  async function readHolds(now: number): Promise<void> {
    const changes = { put: [] as ShapingHoldRow[], ended: new Set<string>() };
    reads.add(changes);
    let rows: ShapingHoldRow[];
    try {
      rows = await repo.activeHolds(now);
    } finally {
      reads.delete(changes);
    }
    const replaced = (r: ShapingHoldRow) => changes.put.some((p) => p.source === r.source && p.rollup === r.rollup && p.kind === r.kind);
    setHolds([...rows.filter((r) => !changes.ended.has(r.id) && !replaced(r)), ...changes.put.filter((p) => !changes.ended.has(p.id))]);
  }

  function setHolds(rows: readonly ShapingHoldRow[]): void {
    const next = new Map<string, Holds>();
    for (const row of rows) {
      const key = keyOf(row.source, row.rollup);
      const h = next.get(key) ?? {};
      if (row.kind === 'suspend') h.suspend = row;
      else {
        const rate = row.message_rate ? parseRate(row.message_rate) : undefined;
        if (rate) h.throttle = { ...row, rate };
      }
      next.set(key, h);
    }
    holds = next;
  }

  async function loadUsage(day: string): Promise<void> {
    const rows = await repo.warmupUsage(day);
    usage = new Map(rows.map((r) => [keyOf(r.source, r.rollup), r.used]));
    usageDay = day;
  }

  /** The rate a (source, rollup) may send at now: its rule's, or a throttle's if lower. */
  function rateOf(key: string, limits: ShapingLimits, now: number): MessageRate | undefined {
    const throttle = holds.get(key)?.throttle;
    const throttled = throttle && throttle.until_ms > now ? throttle.rate : undefined;
    if (!throttled) return limits.messageRate;
    if (!limits.messageRate) return throttled;
    return spacingMs(throttled) > spacingMs(limits.messageRate) ? throttled : limits.messageRate;
  }

  function poolFor(name: string | null): EgressPool {
    return (name !== null && egress.pools.get(name)) || egress.defaultPool;
  }

  type Candidate = { i: number; source: EgressSource; key: string; limits: ShapingLimits; count: number; spacing: number | undefined; warmup?: { day: string } };

  interface Evaluation {
    pool: EgressPool;
    rollup: string;
    ready: Candidate[];
    waiting: Candidate[];
    hold?: { until: number; reason: string; why: 'suspended' | 'warmup'; source: string };
  }

  /** The pool's members for this destination: those that may send now, those that wait for a slot, and the earliest other hold. */
  function evaluate(poolName: string | null, rcptDomain: string, mxHost: string | undefined, recipients: number, now: number): Evaluation {
    const pool = poolFor(poolName);
    const rollup = rules.rollupOf(rcptDomain, mxHost);
    if (warming && usageDay !== utcDay(now)) {
      // A new UTC day: nothing sent on it yet.
      usage = new Map();
      usageDay = utcDay(now);
    }
    const e: Evaluation = { pool, rollup, ready: [], waiting: [] };
    const later = (until: number, reason: string, why: 'suspended' | 'warmup', source: string) => {
      if (!e.hold || until < e.hold.until) e.hold = { until, reason, why, source };
    };
    for (let i = 0; i < pool.members.length; i++) {
      const source = pool.members[i]!.source;
      const key = keyOf(source.name, rollup);
      const h = holds.get(key);
      if (h?.suspend && h.suspend.until_ms > now) {
        later(h.suspend.until_ms, holdReason(h.suspend), 'suspended', source.name);
        continue;
      }
      const limits = rules.limits(source.name, rollup);
      // One recipient per transaction unless a rule groups them: its return path then names that
      // one delivery, and no co-recipient can report for it (core/received/return-path-token.ts).
      let count = Math.min(recipients, limits.maxRecipientsPerTransaction ?? 1);
      let warmup: { day: string } | undefined;
      if (source.warmup) {
        const budget = warmupBudget(source.warmup, now);
        if (budget !== undefined) {
          const left = budget - (usage.get(key) ?? 0);
          if (left <= 0) {
            later(nextUtcDayMs(now), `warm-up: day ${warmupDay(source.warmup, now)} budget of ${budget} to ${rollup} used`, 'warmup', source.name);
            continue;
          }
          count = Math.min(count, left);
          warmup = { day: usageDay };
        }
      }
      const rate = rateOf(key, limits, now);
      const spacing = rate ? spacingMs(rate) : undefined;
      const c: Candidate = { i, source, key, limits, count, spacing, ...(warmup ? { warmup } : {}) };
      // Half a spacing of tolerance: a parked message whose timer fired a few milliseconds before
      // its slot (or after the previous one's) still goes, instead of going to the back.
      if (spacing === undefined || (tat.get(key) ?? now) - spacing / 2 <= now) e.ready.push(c);
      else e.waiting.push(c);
    }
    return e;
  }

  /** Smooth weighted round robin over the members that may send now. */
  function choose(pool: EgressPool, ready: Candidate[]): Candidate {
    let chosen = ready[0]!;
    if (pool.members.length > 1) {
      let total = 0;
      for (const c of ready) {
        const w = pool.members[c.i]!.weight;
        pool.current[c.i]! += w;
        total += w;
        if (pool.current[c.i]! > pool.current[chosen.i]!) chosen = c;
      }
      pool.current[chosen.i]! -= total;
    }
    return chosen;
  }

  function planLocal(poolName: string | null, rcptDomain: string, mxHost: string | undefined, recipients: number, deliveryIds: readonly number[] = []): ShapingPlan {
    const now = clock.nowMs();
    unpark(deliveryIds, now);
    const e = evaluate(poolName, rcptDomain, mxHost, recipients, now);
    if (!e.ready.length) return waitPlan(e, now, deliveryIds);
    const chosen = choose(e.pool, e.ready);
    if (chosen.spacing !== undefined) tat.set(chosen.key, Math.max(tat.get(chosen.key) ?? now, now) + chosen.spacing);
    if (chosen.warmup) usage.set(chosen.key, (usage.get(chosen.key) ?? 0) + chosen.count);
    return sendPlan(e.rollup, chosen);
  }

  function sendPlan(rollup: string, c: Candidate, recorded = false): ShapingPlan {
    return {
      kind: 'send',
      source: c.source,
      rollup,
      limits: c.limits,
      count: c.count,
      ...(c.warmup ? { warmup: { day: c.warmup.day, n: c.count, ...(recorded ? { recorded } : {}) } } : {}),
    };
  }

  /**
   * Nothing may send now: parked at the next free slot (one given back, else the one after those
   * parked before it), or held. `deliveryIds` are the mail parked, so it can give its slot back.
   */
  function waitPlan(e: Evaluation, now: number, deliveryIds: readonly number[]): ShapingPlan {
    if (e.waiting.length) {
      let best: { c: Candidate; slot: number; hole: boolean } | undefined;
      for (const c of e.waiting) {
        const last = lastParked.get(c.key);
        const next = tat.get(c.key) ?? now;
        const hole = takeHole(c.key, next, c.spacing!, true);
        let slot = hole ?? Math.ceil(Math.max(next, last === undefined ? now : last + c.spacing!));
        // A throttle's rate lasts until its end: what would wait past it goes then, at the
        // rate in force after it (not at the throttled slots, hours after the throttle ended).
        const throttle = holds.get(c.key)?.throttle;
        if (throttle && throttle.until_ms > now && rateOf(c.key, c.limits, now) === throttle.rate) slot = Math.min(slot, throttle.until_ms);
        if (!best || slot < best.slot) best = { c, slot, hole: slot === hole };
      }
      // A hole is before the last slot given: that one stays the last.
      if (best!.hole) takeHole(best!.c.key, tat.get(best!.c.key) ?? now, best!.c.spacing!, false);
      else lastParked.set(best!.c.key, best!.slot);
      parkAt(best!.c.key, best!.slot, deliveryIds);
      const rate = rateOf(best!.c.key, best!.c.limits, now)!;
      const throttled = holds.get(best!.c.key)?.throttle;
      const reason = throttled && throttled.until_ms > now && throttled.rate === rate ? holdReason(throttled) : `message rate ${rate.text} to ${e.rollup}`;
      return { kind: 'hold', rollup: e.rollup, source: best!.c.source.name, until: best!.slot, reason, why: 'rate' };
    }
    if (!e.hold) {
      // Only after rounds lost to other nodes (take()): every member was ready and is now known to wait.
      const c = e.ready[0]!;
      return { kind: 'hold', rollup: e.rollup, source: c.source.name, until: now + Math.ceil(c.spacing ?? 1000), reason: `message rate to ${e.rollup}`, why: 'rate' };
    }
    const h = e.hold;
    return { kind: 'hold', rollup: e.rollup, source: h.source, until: h.until, reason: h.reason, why: h.why };
  }

  return {
    egress,
    rules,

    /** Reads the holds and today's warm-up usage from the store (at start). */
    async load(): Promise<void> {
      const now = clock.nowMs();
      await readHolds(now);
      if (warming) await loadUsage(utcDay(now));
      lastRefreshMs = now;
    },

    /** Reads the holds again when a while has passed (called by the engine between claims). */
    async maybeRefresh(): Promise<void> {
      const now = clock.nowMs();
      if (now - lastRefreshMs < HOLDS_REFRESH_MS && now >= lastRefreshMs) return;
      lastRefreshMs = now;
      pruneSlots(now);
      await readHolds(now);
      try {
        await checkSlots(now);
      } catch (err) {
        deps.logger.warn({ err }, 'checking the parked rate slots against the queue failed; tried again at the next refresh');
      }
    },

    /** Whether `name` is a configured pool (the default one included). */
    hasPool(name: string): boolean {
      return egress.pools.has(name);
    },

    poolNames(): string[] {
      return [...egress.pools.keys()];
    },

    /**
     * Which source of the pool sends a transaction of `recipients` recipients to this
     * destination, and how many of them may go; or until when it waits. This node's own
     * reckoning: with a store shared by several nodes, the engine asks take() instead.
     */
    plan: planLocal,

    /**
     * plan() for a cluster (several nodes on one PostgreSQL): the rate's slot and the warm-up
     * budget are taken in the store, atomically for all nodes, so the limits are the cluster's.
     * What this node knows (the last slot time it saw, the budget used) only spares asking when
     * the answer is certain to be "wait". Without a shared store this is plan().
     */
    async take(poolName: string | null, rcptDomain: string, mxHost: string | undefined, recipients: number, deliveryIds: readonly number[] = []): Promise<ShapingPlan> {
      if (!deps.shared) return planLocal(poolName, rcptDomain, mxHost, recipients, deliveryIds);
      unpark(deliveryIds, clock.nowMs());
      for (let round = 0; ; round++) {
        const now = clock.nowMs();
        const e = evaluate(poolName, rcptDomain, mxHost, recipients, now);
        // Another node took what this one thought free: asked again with what the store said,
        // a bounded number of times (then it waits like the others).
        if (!e.ready.length || round >= MAX_SHARED_ROUNDS) return waitPlan(e, now, deliveryIds);
        const chosen = choose(e.pool, e.ready);
        if (chosen.spacing !== undefined) {
          const [slot] = await repo.takeSlots([{ source: chosen.source.name, rollup: e.rollup, spacingMs: chosen.spacing }], now);
          tat.set(chosen.key, slot!.tatMs);
          if (!slot!.took) continue;
        }
        if (chosen.warmup) {
          // A slot taken and then not used lowers the rate a little; a budget taken and not
          // used would lower the day's volume, so the budget comes second.
          const budget = warmupBudget(chosen.source.warmup!, now)!;
          const got = await repo.takeWarmup(chosen.source.name, e.rollup, chosen.warmup.day, chosen.count, budget);
          usage.set(chosen.key, got.used);
          if (!got.took) continue;
        }
        return sendPlan(e.rollup, chosen, true);
      }
    },

    /** Records warm-up usage a plan took, before the transaction goes out (so a crash does not forget it). */
    async recordWarmup(plan: Extract<ShapingPlan, { kind: 'send' }>): Promise<void> {
      if (plan.warmup && !plan.warmup.recorded) await repo.addWarmupUsage(plan.source.name, plan.rollup, plan.warmup.day, plan.warmup.n);
    },

    /**
     * A remote reply to a transaction from `source` to `rollup`: the first reply rule it matches
     * suspends or throttles that (source, rollup). Returns the hold put in place, if any.
     */
    async observeReply(source: string, rollup: string, code: number | undefined, text: string): Promise<ShapingHoldRow | undefined> {
      const rule = matchReply(replyRules, rollup, code, text);
      if (!rule) return undefined;
      const now = clock.nowMs();
      const key = keyOf(source, rollup);
      const until = now + rule.durationMs;
      const current = holds.get(key)?.[rule.action];
      // A hold already running at least as long (the other transactions of the same backlog meet the same reply).
      if (current && current.until_ms >= until - 1000) return current;
      const reply = text.length > 300 ? `${text.slice(0, 299)}…` : text;
      const messageRate = rule.messageRate?.text ?? null;
      // The same hold still in force (same kind and rate) is extended, keeping its id and reason:
      // the mail it parked carries that reason, and lifting it must find all of it (a provider's
      // replies differ in a tracking id), and an operator must find it under the id they saw.
      const same = current && current.until_ms > now && current.message_rate === messageRate ? current : undefined;
      const row: ShapingHoldRow = same
        ? { id: same.id, source, rollup, kind: same.kind, message_rate: same.message_rate, reason: same.reason, until_ms: until, created_at: same.created_at }
        : {
            id: newId('sh'),
            source,
            rollup,
            kind: rule.action,
            message_rate: messageRate,
            reason: rule.reason ? `${rule.reason}: ${reply}` : reply,
            until_ms: until,
            created_at: new Date(now).toISOString(),
          };
      await repo.putHold(row);
      for (const r of reads) r.put.push(row);
      const h = holds.get(key) ?? {};
      if (row.kind === 'suspend') h.suspend = row;
      else h.throttle = { ...row, rate: rule.messageRate! };
      holds.set(key, h);
      deps.logger.warn(
        { event: `shaping.${rule.action}`, source, rollup, until: new Date(until).toISOString(), messageRate: row.message_rate, reason: row.reason },
        `${rule.action === 'suspend' ? 'suspended' : `throttled to ${row.message_rate}`} ${rollup} from source ${source} until ${new Date(until).toISOString()}: ${row.reason}`,
      );
      return row;
    },

    /**
     * An operator lifts a hold; with `release`, the mail it parked is due at `dueMs` in the same
     * write, and `inTransaction` (the audit entry) commits with both. Forgotten here once stored.
     */
    async endHold(id: string, release?: { dueMs: number; nowIso: string }, inTransaction?: (ended: ShapingHoldRow) => void): Promise<ShapingHoldRow | undefined> {
      const ended = await repo.endHold(id, clock.nowMs(), release && { ...release, reasonOf: holdReason }, inTransaction);
      if (ended) {
        for (const r of reads) r.ended.add(id);
        const h = holds.get(keyOf(ended.source, ended.rollup));
        if (h?.[ended.kind]?.id === id) delete h[ended.kind];
      }
      return ended;
    },
  };
}
export type TrafficShaper = ReturnType<typeof createTrafficShaper>;
