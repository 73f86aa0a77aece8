/**
 * A bound on bytes held at once by work that takes memory in proportion to a size: messages the
 * delivery engine composes and sends, request and message bodies being processed. Work waits
 * until its bytes fit; work larger than the whole budget waits until nothing else is held, then
 * runs alone. First come, first served, so large work is not passed over forever by small.
 */
export class ByteBudget {
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

  /** Work waiting for room (metrics, tests). */
  get queued(): number {
    return this.waiting.length;
  }

  private fits(bytes: number): boolean {
    return this.used === 0 || this.used + bytes <= this.limitBytes;
  }
}
