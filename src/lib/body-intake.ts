import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { ByteBudget } from './byte-budget.js';
import { BodySpool, type Received, type SpooledBody } from './body-spool.js';

/**
 * The memory bodies take on their way in (API requests, submitted and inbound messages), shared
 * by every door, in two bounded stages: while a body is received, the spool keeps it in memory
 * or, past its share, in a file; while it is parsed and handled, which takes a few times its size
 * in the heap, the budget makes it wait until there is room. Each stage is bounded by
 * intakeMemoryMb.
 */
export class BodyIntake {
  constructor(
    readonly spool: BodySpool,
    readonly budget: ByteBudget,
  ) {}

  static open(dataDir: string, memoryBytes: number): BodyIntake {
    return new BodyIntake(BodySpool.open(join(dataDir, 'spool'), memoryBytes), new ByteBudget(memoryBytes));
  }

  /** Reads a body whole (BodySpool.receive). */
  receive(source: Readable, limit: number): Promise<Received> {
    return this.spool.receive(source, limit);
  }

  /** Waits for room, runs fn with the body's bytes, then lets the body go, whatever fn did. */
  async process<T>(body: SpooledBody, fn: (raw: Buffer) => Promise<T>): Promise<T> {
    await this.budget.acquire(body.size);
    try {
      // Every API request comes this way: a body in memory costs no extra hop.
      return await fn(body.bytes() ?? (await body.read()));
    } finally {
      this.budget.release(body.size);
      body.release();
    }
  }
}
