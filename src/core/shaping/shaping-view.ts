import type { Clock } from '../../lib/clock.js';
import type { ShapingHoldRow, ShapingRepository } from '../../store/repositories/shaping-repository.js';
import { notFound } from '../errors.js';
import type { AuditService, OperatorActor } from '../operators/audit-service.js';
import { BUILTIN_SHAPING, ruleRollup, type ShapingRuleSpec } from './shaping-rules.js';
import { HOLDS_REFRESH_MS, type TrafficShaper } from './traffic-shaper.js';
import { utcDay, warmupBudget, warmupDay } from './warmup-schedule.js';

/*
 * The operator's view of traffic shaping (GET /admin/v1/queue, posthorn queue summary): the
 * sources and their pools, the holds replies put in place, the message rates in force and
 * warm-up progress. Read from the configuration and the store, so the CLI (another process)
 * sees what the server does.
 */

/** Ended holds are kept this long, for the record. */
const ENDED_HOLD_KEEP_MS = 30 * 86_400_000;
/** Warm-up usage is kept this many days. */
const WARMUP_USAGE_KEEP_DAYS = 90;

export interface ShapingHoldView {
  id: string;
  source: string;
  rollup: string;
  kind: 'suspend' | 'throttle';
  messageRate: string | null;
  reason: string;
  until: string;
  createdAt: string;
}

export interface ShapingOperatorDeps {
  shaper: TrafficShaper;
  repo: ShapingRepository;
  rules: readonly ShapingRuleSpec[];
  builtinShaping: boolean;
  audit: AuditService;
  clock: Clock;
  /** Mail became due: the engine claims it now. */
  wake: () => void;
  /**
   * Whether the delivery engine runs in this process. When it does not (the CLI), the server
   * learns of a lifted hold at its next read of the holds, so the mail is made due only then:
   * sooner, the server would park it again until the hold's old end.
   */
  engineHere: () => boolean;
}

const holdView = (h: ShapingHoldRow): ShapingHoldView => ({
  id: h.id,
  source: h.source,
  rollup: h.rollup,
  kind: h.kind,
  messageRate: h.message_rate,
  reason: h.reason,
  until: new Date(h.until_ms).toISOString(),
  createdAt: h.created_at,
});

export function createShapingOperator(deps: ShapingOperatorDeps) {
  const { shaper, repo, clock } = deps;
  return {
    async state() {
      const now = clock.nowMs();
      const [holds, usage] = await Promise.all([repo.activeHolds(now), repo.warmupUsage(utcDay(now))]);
      const pools = [...shaper.egress.pools.values()];
      const sources = [...shaper.egress.sources.values()].map((s) => {
        let warmup = null;
        if (s.warmup && s.warmupSpec) {
          const budget = warmupBudget(s.warmup, now) ?? null;
          warmup = {
            start: s.warmupSpec.start,
            day: warmupDay(s.warmup, now),
            budget,
            rollups: usage.filter((u) => u.source === s.name).map((u) => ({ rollup: u.rollup, used: u.used, left: budget === null ? null : Math.max(0, budget - u.used) })),
          };
        }
        return { name: s.name, localAddress: s.localAddress ?? null, ehloName: s.ehloName, pools: pools.filter((p) => p.members.some((m) => m.source === s)).map((p) => p.name), warmup };
      });
      const configured = [...(deps.builtinShaping ? BUILTIN_SHAPING : []), ...deps.rules]
        .filter((r) => r.messageRate !== undefined)
        // Named as the queue and the holds name it (A-labels, lowercase), not as typed in the file.
        .map((r) => ({ source: r.source ?? null, rollup: ruleRollup(r), messageRate: r.messageRate!, until: null, reason: null }));
      const throttles = holds
        .filter((h) => h.kind === 'throttle')
        .map((h) => ({ source: h.source, rollup: h.rollup, messageRate: h.message_rate ?? '', until: new Date(h.until_ms).toISOString(), reason: h.reason }));
      return {
        sources,
        pools: pools.map((p) => ({ name: p.name, sources: p.members.map((m) => ({ name: m.source.name, weight: m.weight })) })),
        holds: holds.map(holdView),
        rates: [...configured, ...throttles],
      };
    },

    /**
     * Lifts a hold at once: what it parked is due now. The hold's end, the release of its mail
     * and the audit entry commit together: a refused entry leaves the hold on and its mail held.
     */
    async endHold(actor: OperatorActor, id: string): Promise<ShapingHoldView> {
      const dueMs = clock.nowMs() + (deps.engineHere() ? 0 : HOLDS_REFRESH_MS + 1000);
      const ended = await shaper.endHold(id, { dueMs, nowIso: clock.now().toISOString() }, (h) =>
        deps.audit.inTransaction(actor, 'queue.shaping.resume', { holdId: id, source: h.source, rollup: h.rollup, kind: h.kind }),
      );
      if (!ended) throw notFound(`shaping hold ${id} not found (or already ended)`);
      deps.wake();
      return holdView(ended);
    },

    /** Daily: holds long ended, old warm-up usage, and the cluster's rate slots of rollups long quiet. */
    async prune(): Promise<{ holds: number; warmupDays: number }> {
      const now = clock.nowMs();
      const holds = await repo.pruneHolds(now - ENDED_HOLD_KEEP_MS);
      await repo.pruneRates(now - 86_400_000); // a slot time a day past means the same as none
      const warmupDays = await repo.pruneWarmupUsage(utcDay(now - WARMUP_USAGE_KEEP_DAYS * 86_400_000));
      return { holds, warmupDays };
    },
  };
}
export type ShapingOperator = ReturnType<typeof createShapingOperator>;
export type ShapingState = Awaited<ReturnType<ShapingOperator['state']>>;
