// The one source of time. Core code never calls Date.now() directly so tests can
// drive scheduling, retries, expiry and rate-limit windows with a manual clock.
export interface Clock {
  now(): Date;
  nowMs(): number;
}

export const systemClock: Clock = {
  now: () => new Date(),
  nowMs: () => Date.now(),
};

/** A clock that only moves when told to; used by tests and the CLI's dry runs. */
export class ManualClock implements Clock {
  private ms: number;
  constructor(start: Date | number = Date.UTC(2026, 0, 1, 12, 0, 0)) {
    this.ms = typeof start === 'number' ? start : start.getTime();
  }
  now(): Date {
    return new Date(this.ms);
  }
  nowMs(): number {
    return this.ms;
  }
  advance(ms: number): void {
    this.ms += ms;
  }
  set(at: Date | number): void {
    this.ms = typeof at === 'number' ? at : at.getTime();
  }
}
