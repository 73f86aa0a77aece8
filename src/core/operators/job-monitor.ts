import type { Clock } from '../../lib/clock.js';

/*
 * The last outcome of each background job (cron jobs, the campaign runner, the delivery
 * engine's claims, the webhook dispatcher, WAL checkpoints), for /admin/v1/health: an operator
 * sees which job last failed, when and why, without reading the log.
 */

export interface JobState {
  lastRunAt: string | null;
  lastOkAt: string | null;
  lastError: { at: string; message: string } | null;
  runs: number;
  failures: number;
}

export class JobMonitor {
  private readonly jobs = new Map<string, JobState>();

  constructor(private readonly clock: Clock) {}

  private state(name: string): JobState {
    let s = this.jobs.get(name);
    if (!s) this.jobs.set(name, (s = { lastRunAt: null, lastOkAt: null, lastError: null, runs: 0, failures: 0 }));
    return s;
  }

  ok(name: string): void {
    const s = this.state(name);
    const now = this.clock.now().toISOString();
    s.lastRunAt = now;
    s.lastOkAt = now;
    s.runs++;
  }

  failed(name: string, err: unknown): void {
    const s = this.state(name);
    const now = this.clock.now().toISOString();
    s.lastRunAt = now;
    s.lastError = { at: now, message: err instanceof Error ? err.message : String(err) };
    s.runs++;
    s.failures++;
  }

  /** Runs fn as one run of job `name`, recording its outcome; errors propagate. */
  async run<T>(name: string, fn: () => Promise<T>): Promise<T> {
    try {
      const result = await fn();
      this.ok(name);
      return result;
    } catch (err) {
      this.failed(name, err);
      throw err;
    }
  }

  snapshot(): Record<string, JobState> {
    return Object.fromEntries([...this.jobs].map(([name, s]) => [name, { ...s }]));
  }
}
