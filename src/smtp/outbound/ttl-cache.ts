import type { Clock } from '../../lib/clock.js';

/**
 * A bounded map of values that expire by the injected clock, least recently used out first,
 * with concurrent loads of one key sharing one promise. The transport policy's DNS answers
 * (MTA-STS TXT, TLSA) live here for their TTL, negative answers included, so a message to a
 * domain that publishes nothing costs no DNS query beyond the first per TTL.
 */
export class TtlCache<V> {
  private readonly entries = new Map<string, { value: V; expiresAtMs: number }>();
  private readonly loading = new Map<string, Promise<V>>();

  constructor(
    private readonly clock: Clock,
    private readonly maxEntries: number,
  ) {}

  get(key: string): V | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    this.entries.delete(key);
    if (entry.expiresAtMs <= this.clock.nowMs()) return undefined;
    this.entries.set(key, entry);
    return entry.value;
  }

  /** ttlMs <= 0 keeps nothing (a TTL-0 answer is used once, RFC 1035 §3.2.1). */
  set(key: string, value: V, ttlMs: number): void {
    this.entries.delete(key);
    if (ttlMs <= 0) return;
    this.entries.set(key, { value, expiresAtMs: this.clock.nowMs() + ttlMs });
    while (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
  }

  /** Forgets the key's value (a load under way still answers those waiting for it). */
  delete(key: string): void {
    this.entries.delete(key);
  }

  /** The cached value, or the one `load` produces (cached for the TTL it says); one load per key at a time. */
  async through(key: string, load: () => Promise<{ value: V; ttlMs: number }>): Promise<V> {
    const hit = this.get(key);
    if (hit !== undefined) return hit;
    let pending = this.loading.get(key);
    if (!pending) {
      pending = load()
        .then(({ value, ttlMs }) => {
          this.set(key, value, ttlMs);
          return value;
        })
        .finally(() => this.loading.delete(key));
      this.loading.set(key, pending);
    }
    return pending;
  }
}
