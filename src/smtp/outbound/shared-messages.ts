import type { ByteBudget } from '../../lib/byte-budget.js';

// The delivery engine's messages in memory. A claim takes hundreds of deliveries; with a few
// large attachments among them, building every message at once ran the process out of heap (30
// emails of 20 MB did, under the server's 512 MB heap limit), and a restart claimed the same mail
// and died again. So each message's bytes are held in a budget (outbound.messageMemoryMb) from
// before its body is read until it has been sent.

/**
 * Each email's signed message while any of its groups (one per destination domain) is in
 * flight: built once, shared, and its bytes held in the budget from before its body is read
 * until the last of those groups lets go, after its last transaction.
 */
export class SharedMessages {
  private readonly entries = new Map<string, { message: Promise<Buffer>; users: number; bytes: number }>();

  constructor(private readonly budget: ByteBudget) {}

  /** The email's message: the first taker's build(), run once the budget has room for `bytes`. Pair with release(). */
  take(emailId: string, bytes: number, build: () => Promise<Buffer>): Promise<Buffer> {
    let entry = this.entries.get(emailId);
    if (!entry) {
      entry = { message: this.budget.acquire(bytes).then(build), users: 0, bytes };
      this.entries.set(emailId, entry);
    }
    entry.users += 1;
    return entry.message;
  }

  /** Called once the taker's take() has settled, whether it got the message or an error. */
  release(emailId: string): void {
    const entry = this.entries.get(emailId);
    if (entry && --entry.users <= 0) {
      this.entries.delete(emailId);
      this.budget.release(entry.bytes);
    }
  }
}
