import type { MtaStsPoliciesRepository, MtaStsPolicyRow } from '../../store/repositories/mta-sts-policies-repository.js';

/** An MTA-STS policy learnt from a recipient domain, as the outbound engine keeps it across restarts. */
export type StoredStsPolicy = MtaStsPolicyRow;

export interface StsPolicyCache {
  get(domain: string): Promise<StoredStsPolicy | undefined>;
  put(policy: StoredStsPolicy): Promise<void>;
  /** Forgets policies that expired more than a day ago (housekeeping). */
  purgeExpired(nowMs: number): Promise<number>;
}

const KEEP_EXPIRED_MS = 24 * 3_600_000;

/** The store behind the engine's MTA-STS cache (RFC 8461 §5.1: policies live for max_age, across restarts). */
export function createStsPolicyCache(repo: MtaStsPoliciesRepository): StsPolicyCache {
  return {
    get: (domain) => repo.get(domain),
    put: (policy) => repo.put(policy),
    purgeExpired: (nowMs) => repo.deleteExpired(nowMs - KEEP_EXPIRED_MS),
  };
}
