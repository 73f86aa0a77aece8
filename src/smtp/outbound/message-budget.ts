/**
 * How many bytes of message content the delivery engine holds at once: bodies read to be
 * composed, and signed messages still being sent. A claim takes hundreds of deliveries; with a
 * few large attachments among them, building every message at once ran the process out of heap
 * (30 emails of 20 MB did, under the server's 512 MB heap limit), and a restart claimed the same
 * mail and died again. A message waits here until it fits; one larger than the whole budget
 * waits until nothing else is held, then goes alone. First come, first served, so a large
 * message is not passed over forever by small ones.
 */
export class MessageBudget {
  private used = 0;
  private readonly waiting: { bytes: number; admit: () => void }[] = [];

  constructor(readonly limitBytes: number) {}

  /** Resolves once `bytes` are taken from the budget; give them back with release(). */
  acquire(bytes: number): Promise<void> {
    if (this.waiting.length === 0 && this.fits(bytes)) {
      this.used += bytes;
      return Promise.resolve();
    }
    return new Promise((admit) => this.waiting.push({ bytes, admit }));
  }

  release(bytes: number): void {
    this.used -= bytes;
    while (this.waiting.length && this.fits(this.waiting[0]!.bytes)) {
      const next = this.waiting.shift()!;
      this.used += next.bytes;
      next.admit();
    }
  }

  /** Bytes held now (metrics, tests). */
  get inUse(): number {
    return this.used;
  }

  /** Messages waiting for room (metrics, tests). */
  get queued(): number {
    return this.waiting.length;
  }

  private fits(bytes: number): boolean {
    return this.used === 0 || this.used + bytes <= this.limitBytes;
  }
}

/**
 * Each email's signed message while any of its groups (one per destination domain) is in
 * flight: built once, shared, and its bytes held in the budget from before its body is read
 * until the last of those groups lets go, after its last transaction.
 */
export class SharedMessages {
  private readonly entries = new Map<string, { message: Promise<Buffer>; users: number; bytes: number }>();

  constructor(private readonly budget: MessageBudget) {}

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
