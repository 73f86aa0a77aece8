import { compileWarmup, type Warmup, type WarmupSpec } from './warmup-schedule.js';

/*
 * Egress sources and pools (docs/outbound.md, "Egress sources and pools"): a source is a local address
 * to bind outbound connections to and the EHLO name it greets with; a pool is a weighted set of
 * sources. A team, or one of its domains, sends through a pool; everyone else through the
 * default pool.
 */

/** A source as configured ([[outbound.sources]]). */
export interface SourceSpec {
  name: string;
  /** Local address to bind to; empty: the host's default route. */
  localAddress: string;
  /** EHLO name; empty: the configured hostname. */
  ehloName: string;
  warmup?: WarmupSpec;
}

/** A pool as configured ([[outbound.pools]]). */
export interface PoolSpec {
  name: string;
  sources: (string | { name: string; weight?: number })[];
}

export interface EgressSource {
  name: string;
  localAddress?: string;
  ehloName: string;
  warmup?: Warmup;
  warmupSpec?: WarmupSpec;
}

export interface EgressPool {
  name: string;
  members: { source: EgressSource; weight: number }[];
  /** Smooth weighted round robin (nginx's): each member's current weight. */
  current: number[];
}

export const DEFAULT_SOURCE = 'default';
export const DEFAULT_POOL = 'default';

export interface Egress {
  sources: Map<string, EgressSource>;
  pools: Map<string, EgressPool>;
  defaultPool: EgressPool;
}

/**
 * Sources and pools from the configuration. No source configured: one, "default", on the
 * host's default address with the hostname. No pool named "default": the default pool is
 * every source, each with weight 1.
 */
export function buildEgress(specs: readonly SourceSpec[], poolSpecs: readonly PoolSpec[], hostname: string): Egress {
  const sources = new Map<string, EgressSource>();
  const list = specs.length ? specs : [{ name: DEFAULT_SOURCE, localAddress: '', ehloName: '' }];
  for (const s of list) {
    sources.set(s.name, {
      name: s.name,
      ...(s.localAddress ? { localAddress: s.localAddress } : {}),
      ehloName: s.ehloName || hostname,
      ...(s.warmup ? { warmup: compileWarmup(s.warmup), warmupSpec: s.warmup } : {}),
    });
  }
  const pools = new Map<string, EgressPool>();
  for (const p of poolSpecs) {
    const members = p.sources.map((m) => {
      const name = typeof m === 'string' ? m : m.name;
      const source = sources.get(name);
      if (!source) throw new Error(`outbound.pools: pool ${p.name} names source ${name}, which is not in outbound.sources`);
      return { source, weight: typeof m === 'string' ? 1 : (m.weight ?? 1) };
    });
    pools.set(p.name, { name: p.name, members, current: members.map(() => 0) });
  }
  let defaultPool = pools.get(DEFAULT_POOL);
  if (!defaultPool) {
    const members = [...sources.values()].map((source) => ({ source, weight: 1 }));
    defaultPool = { name: DEFAULT_POOL, members, current: members.map(() => 0) };
    pools.set(DEFAULT_POOL, defaultPool);
  }
  return { sources, pools, defaultPool };
}
