import type { DnsResolver } from '../../src/lib/dns/dns-client.js';

/**
 * A resolver whose TXT lookup of one name waits at a gate: a job (a domain re-check, the TLS
 * reports) held partway at a known point. `reached` resolves when the lookup starts waiting;
 * `release()` lets it go. `name` may be set after the app is built.
 */
export function heldTxtLookup(name = '') {
  let reachedNow!: () => void;
  const reached = new Promise<void>((resolve) => (reachedNow = resolve));
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const held = {
    name,
    reached,
    release: () => release(),
    resolver: (base: DnsResolver): DnsResolver => ({
      ...base,
      async resolveTxt(n) {
        if (n === held.name) {
          reachedNow();
          await gate;
        }
        return base.resolveTxt(n);
      },
    }),
  };
  return held;
}
