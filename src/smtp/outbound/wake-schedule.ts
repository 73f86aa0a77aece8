import type { Clock } from '../../lib/clock.js';
import { MinHeap } from '../../lib/min-heap.js';

/** Pending wake-ups kept at most (beyond, the idle poll finds the mail). */
const MAX_WAKE_TIMES = 100_000;
/** A wake-up timer is re-armed at least this often (setTimeout overflows past 24.8 days). */
const MAX_WAKE_DELAY_MS = 60_000;

/**
 * When the delivery engine claims again for parked mail: with a message rate a slot comes every
 * few hundred milliseconds, sooner than the idle poll would look, and each slot needs its claim
 * (a poll would find several due at once, and the rate would send one of them). One timer, for
 * the earliest time pending.
 */
export class WakeSchedule {
  /** When parked mail becomes due (shaping's slots and hold ends), earliest first. */
  private readonly times = new MinHeap();
  private lastPushed: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  private timerAt: number | undefined;

  constructor(
    private readonly clock: Clock,
    private readonly wake: () => void,
    /** No timer is armed while this says no (the engine is stopped). */
    private readonly running: () => boolean,
  ) {}

  at(atMs: number): void {
    // A backlog parked at one hold's end needs one wake-up, not one each.
    if (atMs !== this.lastPushed && this.times.size < MAX_WAKE_TIMES) {
      this.times.push(atMs);
      this.lastPushed = atMs;
    }
    this.arm();
  }

  /** Drops the armed timer (the pending times stay for a later start). */
  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = undefined;
  }

  private arm(): void {
    const next = this.times.peek();
    if (next === undefined || !this.running()) return;
    if (this.timerAt !== undefined && this.timerAt <= next) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = next;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.timerAt = undefined;
      const now = this.clock.nowMs();
      while ((this.times.peek() ?? Infinity) <= now) this.times.pop();
      this.wake();
      this.arm();
    }, Math.min(MAX_WAKE_DELAY_MS, Math.max(0, next - this.clock.nowMs())));
    this.timer.unref?.();
  }
}
