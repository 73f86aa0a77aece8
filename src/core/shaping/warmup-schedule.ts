/*
 * Warm-up (docs/outbound.md, "Warm-up"): a new sending address earns its reputation by sending
 * little at first and more each day. A schedule is the most messages per day to each rollup
 * (provider), by day since the start date; past its last day there is no cap.
 */

/**
 * "standard": 50 the first day, doubling for a week, then growing by about half each day until
 * 100,000 a day after four weeks. The usual shape of the large providers' advice (start low,
 * grow steadily, watch the deferrals) and of the warm-up plans ESPs publish.
 */
export const STANDARD_WARMUP: readonly number[] = [
  50, 100, 200, 400, 800, 1_200, 1_600, 2_000, 2_500, 3_000, 4_000, 5_000, 6_000, 8_000, 10_000, 12_500, 15_000, 20_000, 25_000, 30_000, 35_000, 40_000, 50_000,
  60_000, 70_000, 80_000, 90_000, 100_000,
];

const DAY_MS = 86_400_000;

export interface WarmupSpec {
  /** UTC start date, YYYY-MM-DD: day 1. */
  start: string;
  schedule: 'standard' | number[];
}

export interface Warmup {
  startMs: number;
  perDay: readonly number[];
}

export function compileWarmup(spec: WarmupSpec): Warmup {
  return { startMs: Date.parse(`${spec.start}T00:00:00Z`), perDay: spec.schedule === 'standard' ? STANDARD_WARMUP : spec.schedule };
}

/** Day of the schedule at `nowMs` (1 on the start date; days before it count as day 1). */
export function warmupDay(w: Warmup, nowMs: number): number {
  return Math.max(1, Math.floor((nowMs - w.startMs) / DAY_MS) + 1);
}

/** The day's budget per rollup; undefined once the schedule is over (no cap). */
export function warmupBudget(w: Warmup, nowMs: number): number | undefined {
  return w.perDay[warmupDay(w, nowMs) - 1];
}

/** The UTC date of `ms`, the key of a day's usage. */
export function utcDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/** The start of the next UTC day. */
export function nextUtcDayMs(ms: number): number {
  return (Math.floor(ms / DAY_MS) + 1) * DAY_MS;
}
